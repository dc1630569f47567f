"""The pip and uv commands that install a variant of ptkit-ops (or of another project
built with ptkit) from ptkit's index.

The index has one PEP 503 index per variant (``<root>/<index-path>/simple``); each
serves that variant's wheels and the ``ptkit`` toolkit they depend on. A torch-mode
variant's page holds one wheel per torch minor; the commands then name the torch to keep
(``torch==2.13.0+cpu``, the installed one): both installers would otherwise replace an
installed torch 2.13 with PyPI's newest 2.14 to take the newest build, when PyPI is
among their indexes (it is, for the toolkit's own dependencies). Checked with pip 26.3
and uv 0.13.8 (tests/integration/test_torch_mode_release.py).
"""

from __future__ import annotations

import dataclasses
import re
import shlex

from ptkit.recipes.model import Recipe
from ptkit.selection.recipes import OPS_DISTRIBUTION, SelectionError

__all__ = [
    "ENV_INDEX_URL",
    "PYPI",
    "InstallCommands",
    "install_commands",
    "replace_command",
    "variant_index_url",
]

PYPI = "https://pypi.org/simple"
ENV_INDEX_URL = "PTKIT_INDEX_URL"
"""The root of ptkit's index when ``--index-url`` is not given (``ptkit select``, the doctor)."""
INDEX_PLACEHOLDER = "<ptkit index>"


@dataclasses.dataclass(frozen=True)
class InstallCommands:
    pip: str
    """pip merges every index and takes the highest version of each package."""
    uv: str
    """uv takes each package from the first index that has it (``--index`` order)."""


def variant_index_url(index_url: str, recipe: Recipe) -> str:
    """``<index root>/<the recipe's index path>/simple``; ``SelectionError`` for a root
    that is not an http(s):// or file:// URL."""
    url = index_url.strip().rstrip("/")
    if not re.match(r"^(https?|file)://\S+$", url):
        raise SelectionError(
            f"ptkit select: the ptkit index URL must be an http(s):// or file:// URL (the "
            f"folder that holds <variant>/simple/), got {index_url!r}; pass --index-url or "
            "set PTKIT_INDEX_URL"
        )
    return f"{url}/{recipe.index_path}/simple"


def install_commands(
    index_url: str,
    recipe: Recipe,
    *,
    distribution: str = OPS_DISTRIBUTION,
    torch_pin: str | None = None,
) -> tuple[str, InstallCommands]:
    """The variant's simple index and the pip and uv commands that install
    ``distribution`` (and with it ``ptkit``) from it; ``torch_pin`` (``torch==2.13.0+cpu``)
    beside it for a torch-mode variant: the torch whose build is wanted.

    pip has no index priority: it merges ``--index-url`` and every ``--extra-index-url``
    and takes the highest version. PyPI is listed too, for the toolkit's own
    dependencies (click, packaging), which the PyTorch index need not carry. uv asks
    its indexes in order and takes each package from the first that has it
    (``--index``, earlier first; PyPI, the default index, last), so ptkit-ops and ptkit
    come from ptkit's index and torch from PyTorch's whatever PyPI holds."""
    simple = variant_index_url(index_url, recipe)
    torch = recipe.torch_index_url.rstrip("/") if recipe.torch_index_url else None
    extra = [torch] if torch and torch != PYPI else []
    wanted = [distribution, *([torch_pin] if torch_pin else [])]
    pip = ["pip", "install", *wanted, "--index-url", simple]
    for url in [*extra, PYPI]:
        pip += ["--extra-index-url", url]
    uv = ["uv", "pip", "install", *wanted, "--index", simple]
    for url in extra:
        uv += ["--index", url]
    return simple, InstallCommands(shlex.join(pip), shlex.join(uv))


def replace_command(
    index_url: str | None,
    recipe: Recipe,
    installed_version: str,
    *,
    distribution: str = OPS_DISTRIBUTION,
    label: str | None = None,
) -> str:
    """The pip command that replaces an installed ``distribution`` (of any variant or
    build) with ``recipe``'s build of the same version. Pinned to the build's local label
    (``label``, default the recipe's: ``cu13``; a torch-mode build's ``cpu.torch2.13``):
    pip keeps an installed version that satisfies a bare name, and ``0.1.0+cu13``
    satisfies ``ptkit-ops``. ``--no-deps``: the variant changes, its dependencies (torch)
    stay. ``index_url`` None: the index root is left as ``<ptkit index>`` for the user to
    fill in (``SelectionError`` for one that is not a URL, as ``install_commands``)."""
    simple = (
        variant_index_url(index_url, recipe)
        if index_url is not None
        else f"{INDEX_PLACEHOLDER}/{recipe.index_path}/simple"
    )
    public = installed_version.partition("+")[0]
    pinned = f"{distribution}=={public}+{label or recipe.local_version}"
    return shlex.join(["pip", "install", "--no-deps", pinned, "--index-url", simple])
