"""The Python a torch-mode build runs in: one whose torch is the minor the wheel is for.

A torch-mode wheel (``[variant] abi = "torch"``) is compiled against one torch's C++ API
and pinned to its minor (:mod:`ptkit.recipes.torch_builds`), so the whole pipeline runs
with a Python whose torch is that minor: the build (scikit-build-core runs in the Python
that runs pip, and CMake takes that Python's torch), the audit, and the smoke test (a
fresh environment that sees the build Python's torch). ``ptkit build --torch 2.13``
takes, in this order:

1. ``--build-python PYTHON`` (``$PTKIT_BUILD_PYTHON``): that interpreter, whose torch must
   be 2.13;
2. this Python, when its torch is 2.13;
3. ptkit's build environment for torch 2.13, in its cache
   (``<cache>/build-pythons/torch2.13-<torch build>-<platform>-py3.X``, see
   :func:`build_environment`): a venv holding ``torch==2.13.*`` from the recipe's torch
   index and what the build needs (``ptkit[build]``'s requirements), made once and
   shared by every project;
4. none of them: ``ptkit build`` installs 3 (:mod:`ptkit.release.pipeline.provision`).

When the build Python is another interpreter, ``ptkit build`` runs itself there
(:func:`delegated_command`) with this toolkit staged for it (:func:`stage_toolkit`): a
copy of the running ``ptkit`` package and its distribution metadata (the ``cmake.root``
entry point through which scikit-build-core finds ptkit's CMake package) in a folder of
their own, the only thing put on ``PYTHONPATH``. So the build uses this ptkit and
nothing else of this environment: not its torch.
"""

from __future__ import annotations

import dataclasses
import importlib.metadata
import json
import os
import re
import shutil
import subprocess
import sys
import sysconfig
from collections.abc import Mapping, Sequence
from pathlib import Path

import ptkit
from ptkit._version import __version__
from ptkit.backends.toolchain_cache import cache_root
from ptkit.recipes.model import Recipe
from ptkit.recipes.torch_builds import TorchMinor

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10
    import tomli as tomllib

__all__ = [
    "BUILD_PYTHON_VARIABLE",
    "TOOLKIT_MODULES",
    "BuildEnvironment",
    "BuildPython",
    "build_environment",
    "build_pythons_dir",
    "delegated_command",
    "delegated_environment",
    "probe_python",
    "stage_toolkit",
]

BUILD_PYTHON_VARIABLE = "PTKIT_BUILD_PYTHON"
# What `python -m ptkit build` imports before it can say anything (the toolkit's own
# dependencies); the build's prerequisites are checked by the build itself, there.
TOOLKIT_MODULES = ("click", "packaging")
MARKER_FILE = "build-python.json"

# Run by the build Python: where it is, its version, its torch (from the distribution's
# metadata: torch is not imported) and which of TOOLKIT_MODULES it lacks. The path
# finder alone is asked (see prerequisites._importable: no distutils hook).
_PROBE = """
import importlib.machinery, importlib.metadata, json, sys
try:
    torch = importlib.metadata.version("torch")
except importlib.metadata.PackageNotFoundError:
    torch = None
print(json.dumps({
    "prefix": sys.prefix,
    "python": "%d.%d" % sys.version_info[:2],
    "torch": torch,
    "missing": [m for m in sys.argv[1:] if importlib.machinery.PathFinder.find_spec(m) is None],
}))
"""


@dataclasses.dataclass(frozen=True)
class BuildPython:
    """An interpreter a build can run in, as it describes itself."""

    executable: Path
    prefix: str
    """Its ``sys.prefix``: the environment (two venvs may share one interpreter)."""
    python: str
    """``3.11``."""
    torch: str | None
    """Its torch's version (``2.13.0+cpu``), None without torch."""
    missing: tuple[str, ...]
    """The modules of :data:`TOOLKIT_MODULES` it cannot import."""
    source: str
    """Why it was taken: ``--build-python``, ``this Python``, ``ptkit's build environment …``."""

    @property
    def torch_minor(self) -> TorchMinor | None:
        return TorchMinor.parse(self.torch) if self.torch else None

    @property
    def is_this_python(self) -> bool:
        return os.path.normcase(os.path.abspath(self.prefix)) == os.path.normcase(
            os.path.abspath(sys.prefix)
        )

    def describe(self) -> str:
        torch = f"torch {self.torch}" if self.torch else "no torch"
        return f"{self.executable} (Python {self.python}, {torch}; {self.source})"


def probe_python(executable: Path | str, source: str, *, timeout: float = 120) -> BuildPython:
    """What ``executable`` says about itself (see :class:`BuildPython`); ``OSError`` or
    ``ValueError`` when it does not run or does not answer."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    try:
        proc = subprocess.run(
            [str(executable), "-c", _PROBE, *TOOLKIT_MODULES],
            capture_output=True,
            text=True,
            timeout=timeout,
            env=env,
            stdin=subprocess.DEVNULL,
            check=False,
        )
    except subprocess.TimeoutExpired as exc:
        raise ValueError(f"{executable} did not answer within {timeout:.0f} s") from exc
    if proc.returncode != 0:
        tail = " ".join((proc.stdout + proc.stderr).strip().splitlines()[-2:])
        raise ValueError(f"{executable} exited with {proc.returncode}: {tail}")
    try:
        facts = json.loads(proc.stdout.strip().splitlines()[-1])
    except (json.JSONDecodeError, IndexError) as exc:
        raise ValueError(f"{executable} is not a Python (it printed {proc.stdout!r})") from exc
    return BuildPython(
        executable=Path(executable),
        prefix=str(facts["prefix"]),
        python=str(facts["python"]),
        torch=facts["torch"],
        missing=tuple(facts["missing"]),
        source=source,
    )


# --- ptkit's build environments ---------------------------------------------------------


def build_pythons_dir(environ: Mapping[str, str] | None = None) -> Path:
    """``<cache>/build-pythons``: one venv per (torch minor, torch build, platform, Python)."""
    return cache_root(environ) / "build-pythons"


def _torch_build_key(torch_index_url: str) -> str:
    """``cpu``, ``cu130``, ``rocm7.14`` of PyTorch's ``…/whl/<build>`` indexes; a name
    made of another index's URL; ``pypi`` for none."""
    if not torch_index_url:
        return "pypi"
    tail = torch_index_url.rstrip("/").rsplit("/", 1)[-1]
    return re.sub(r"[^a-z0-9.]+", "-", tail.lower()).strip("-") or "index"


@dataclasses.dataclass(frozen=True)
class BuildEnvironment:
    """ptkit's build environment for one torch minor and one torch build."""

    torch: TorchMinor
    torch_index_url: str
    """The recipe's ``torch-index-url`` ("" for PyPI): its build wins over PyPI's."""
    requirements: tuple[str, ...]
    """What pip installs besides torch: the build's prerequisites."""
    path: Path

    @property
    def python(self) -> Path:
        return self.path / ("Scripts/python.exe" if os.name == "nt" else "bin/python")

    @property
    def torch_requirement(self) -> str:
        return f"torch=={self.torch}.*"

    def pip_install(self, python: str) -> list[str]:
        """The pip command that fills it: torch of the minor (the recipe's torch index
        beside PyPI: its local label, ``+cpu``, sorts above PyPI's build of the same
        release) and the build's prerequisites."""
        index = ["--extra-index-url", self.torch_index_url] if self.torch_index_url else []
        return [
            python, "-m", "pip", "install", "--disable-pip-version-check", *index,
            self.torch_requirement, *self.requirements,
        ]  # fmt: skip

    def complete(self) -> bool:
        """Made to the end: its marker is written last, after pip succeeded."""
        return (self.path / MARKER_FILE).is_file() and self.python.is_file()


def build_environment(
    recipe: Recipe,
    torch: TorchMinor,
    requirements: Sequence[str],
    environ: Mapping[str, str] | None = None,
) -> BuildEnvironment:
    """Where ptkit keeps the build environment for ``recipe``'s torch build of ``torch``,
    made with this Python (its version is part of the name)."""
    platform = re.sub(r"[^a-z0-9]+", "_", sysconfig.get_platform().lower())
    python = f"py{sys.version_info[0]}.{sys.version_info[1]}"
    name = f"{torch.label}-{_torch_build_key(recipe.torch_index_url)}-{platform}-{python}"
    return BuildEnvironment(
        torch=torch,
        torch_index_url=recipe.torch_index_url,
        requirements=tuple(requirements),
        path=build_pythons_dir(environ) / name,
    )


# --- running ptkit build in another Python ----------------------------------------------------


def _entry_points_text() -> str:
    """The running toolkit's entry points (``entry_points.txt``): from the source tree's
    ``toolkit/pyproject.toml`` when ptkit runs from one, else from its installed
    distribution."""
    package = Path(ptkit.__file__).resolve().parent
    pyproject = package.parents[1] / "toolkit" / "pyproject.toml"
    if pyproject.is_file():
        project = tomllib.loads(pyproject.read_text(encoding="utf-8")).get("project", {})
        groups = dict(project.get("entry-points", {}))
        if project.get("scripts"):
            groups["console_scripts"] = project["scripts"]
        return "".join(
            f"[{group}]\n"
            + "".join(f"{name} = {target}\n" for name, target in points.items())
            + "\n"
            for group, points in groups.items()
        )
    try:
        return importlib.metadata.distribution("ptkit").read_text("entry_points.txt") or ""
    except importlib.metadata.PackageNotFoundError:
        return ""


def stage_toolkit(folder: Path) -> Path:
    """``folder`` holding a copy of the running ``ptkit`` package and its distribution
    metadata, for another Python's ``PYTHONPATH`` (see the module docstring)."""
    package = Path(ptkit.__file__).resolve().parent
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    # Links followed (src/ptkit/_recipes is one); compiled files are the other Python's to make.
    shutil.copytree(package, folder / "ptkit", ignore=shutil.ignore_patterns("__pycache__"))
    info = folder / f"ptkit-{__version__}.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(
        f"Metadata-Version: 2.1\nName: ptkit\nVersion: {__version__}\n", encoding="utf-8"
    )
    (info / "entry_points.txt").write_text(_entry_points_text(), encoding="utf-8")
    return folder


def delegated_environment(staged: Path) -> dict[str, str]:
    """This environment for ``ptkit build`` in the build Python: the staged toolkit as
    the only ``PYTHONPATH`` entry (``$PTKIT_TORCH`` is set there by the pipeline)."""
    env = dict(os.environ)
    env["PYTHONPATH"] = str(staged)
    return env


def delegated_command(
    python: BuildPython,
    *,
    variant: str,
    torch: TorchMinor | None,
    source: Path,
    dist: Path,
    build_root: Path,
    allow_missing_backend: bool,
    compiler_cache: str,
) -> list[str]:
    """``<python> -m ptkit build …`` for one build (``torch`` None: the one of that
    Python's torch, or the stable one), with every option spelled out, ``--build-python``
    itself too, so that it runs there and delegates no further."""
    command = [
        str(python.executable), "-m", "ptkit", "build", "--variant", variant,
        "--build-python", str(python.executable),
        "--source", str(source), "--dist", str(dist.absolute()),
        "--build-root", str(build_root), "--compiler-cache", compiler_cache,
    ]  # fmt: skip
    if torch is not None:
        command += ["--torch", str(torch)]
    if allow_missing_backend:
        command.append("--allow-missing-backend")
    return command
