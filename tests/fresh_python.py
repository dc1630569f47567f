"""Fresh Pythons for the tests that follow a new user's path: a venv that has torch and
nothing else (or nothing at all), and pip installs into it that never reach an index.

- ``torch_only_site``: a folder that holds torch and the distributions it requires (as
  links into this environment's site-packages, torch is gigabytes), and nothing else: no
  scikit-build-core, CMake, auditwheel, ptkit. A venv sees it through a ``.pth`` file, so
  pip counts torch as installed, as it does in a user's venv.
- ``wheelhouse``: every wheel those pip installs need (``ptkit[build]``'s requirements,
  pytest, the CUDA 13.5 packages of recipes/cu13.toml) in one folder under build/; filled
  once by ``pip download`` (the only step that reads an index) and reused while it holds
  the same requirements. ptkit itself is never in it: it comes from dist/toolkit.
- ``torch_env`` / ``build_python``: for the torch-mode tests, a venv that *holds* torch
  2.13 or 2.14 and the toolkit's own dependencies but no ptkit (what pip and uv install
  into), and a venv on torch 2.13 with ``ptkit[build]`` (what builds for torch 2.13).
- ``serve_index`` / ``install_from_index``: wheels in a ``ptkit index`` served on
  127.0.0.1, and pip or uv installing from it alone.
- ``offline_env``: the environment of a command run "in" the venv (its bin/ first on
  PATH, as an activated venv has it) with pip on the wheelhouse only (``PIP_NO_INDEX``,
  ``PIP_FIND_LINKS``), ptkit's own variables and PYTHONPATH removed.
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import json
import os
import re
import select
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import tomllib
from filelock import FileLock
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from support import REPO, env_holding_packages_of, fresh_venv, python_env, run

from ptkit.recipes.model import load_recipe

WHEELHOUSE = REPO / "build" / "wheelhouse"
VENV_BIN = Path(sys.executable).parent
UV = shutil.which("uv", path=str(VENV_BIN)) or shutil.which("uv")
TORCH213 = REPO / ".venv-torch213" / "bin" / "python"  # scripts/bootstrap makes it


def wheelhouse_requirements() -> list[str]:
    """What the wheelhouse holds, spelled out (the build extra's own list included, so
    that a requirement added to it refills a wheelhouse downloaded before)."""
    cu13 = load_recipe("cu13", REPO / "recipes")
    toolkit = tomllib.loads((REPO / "toolkit" / "pyproject.toml").read_text())["project"]
    build_extra = toolkit["optional-dependencies"]["build"]
    return ["ptkit[build]", *build_extra, "pytest>=8", *cu13.toolkit.packages]


def wheelhouse(toolkit_wheel: Path) -> Path:
    """The wheelhouse (see the module docstring), downloaded when missing or stale."""
    folder = downloaded(
        WHEELHOUSE, wheelhouse_requirements(), ["--find-links", str(toolkit_wheel.parent)]
    )
    for own in folder.glob("ptkit-*.whl"):
        own.unlink()  # the toolkit under test comes from dist/toolkit only
    return folder


def downloaded(folder: Path, wanted: list[str], pip_args: list[str]) -> Path:
    """``folder`` holding ``wanted`` as wheels, ``pip download``-ed when missing or stale
    (a sha256 stamp of the list). A file lock makes the tests that share a folder under
    pytest-xdist wait for one download instead of each deleting the other's."""
    digest = hashlib.sha256("\n".join(wanted).encode()).hexdigest()
    folder.parent.mkdir(parents=True, exist_ok=True)
    with FileLock(folder.with_name(folder.name + ".lock")):
        stamp = folder / ".requirements.sha256"
        if stamp.is_file() and stamp.read_text() == digest:
            return folder
        shutil.rmtree(folder, ignore_errors=True)
        run(
            [sys.executable, "-m", "pip", "download", "-q", "-d", str(folder), *pip_args, *wanted],
            timeout=1800,
        )
        stamp.write_text(digest)
    return folder


def _closure(name: str) -> list[importlib.metadata.Distribution]:
    """``name``'s distribution and every one it requires here, extras included (torch
    asks for ``cuda-toolkit[cudart,…]``), markers evaluated."""
    seen: dict[str, importlib.metadata.Distribution] = {}
    extras: dict[str, set[str]] = {}
    todo: list[tuple[str, frozenset[str]]] = [(name, frozenset())]
    while todo:
        wanted, asked = todo.pop()
        key = canonicalize_name(wanted)
        if key in seen and asked <= extras[key]:
            continue
        try:
            dist = seen.get(key) or importlib.metadata.distribution(key)
        except importlib.metadata.PackageNotFoundError:
            continue  # an optional platform dependency this environment lacks
        seen[key] = dist
        extras[key] = extras.get(key, set()) | asked
        for text in dist.requires or []:
            requirement = Requirement(text)
            marker = requirement.marker
            if marker is None or any(marker.evaluate({"extra": e}) for e in {"", *asked}):
                todo.append((requirement.name, frozenset(requirement.extras)))
    return list(seen.values())


def torch_only_site(dest: Path) -> Path:
    """``dest`` holding links to torch and its requirements' files (and dist-info)."""
    dest.mkdir(parents=True, exist_ok=True)
    for dist in _closure("torch"):
        base = Path(str(dist.locate_file("")))
        for entry in dist.files or []:
            top = entry.parts[0]
            if top in ("..", "__pycache__") or top.endswith(".pth"):
                continue
            link = dest / top
            if not link.exists() and (base / top).exists():
                link.symlink_to(base / top)
    return dest


def fresh_python(path: Path, *, torch_site: Path | None = None) -> Path:
    """A new venv with pip (ensurepip: what `python -m venv` gives a user), seeing
    ``torch_site`` through a .pth file when given; returns its python. The venv's own
    copy of a distribution the torch site holds (ensurepip's setuptools 65, older than
    torch requires) is removed, as installing torch into the venv would replace it."""
    run([sys.executable, "-m", "venv", str(path)])
    python = path / "bin" / "python"
    if torch_site is not None:
        purelib = Path(
            run(
                [str(python), "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"]
            ).stdout.strip()
        )
        (purelib / "_torch_only.pth").write_text(f"{torch_site}\n")
        own = {info.name.split("-")[0].lower() for info in purelib.glob("*.dist-info")}
        shadowed = sorted(
            name
            for name in (i.name.split("-")[0].lower() for i in torch_site.glob("*.dist-info"))
            if name in own
        )
        if shadowed:
            run([str(python), "-m", "pip", "uninstall", "-q", "-y", *shadowed])
    return python


def offline_env(venv: Path, wheels: Path, **extra: str) -> dict[str, str]:
    """The environment of a command run in the activated ``venv``, pip on ``wheels``."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PTKIT_", "PIP_"))}
    # A user's shell is not inside a make: an outer `make integration`'s variables would
    # make the user's make a sub-make (which names each folder it enters).
    for name in ("PYTHONPATH", "MAKEFLAGS", "MFLAGS", "MAKELEVEL", "MAKEOVERRIDES"):
        env.pop(name, None)
    env.update(
        PATH=os.pathsep.join([str(venv / "bin"), "/usr/local/bin", "/usr/bin", "/bin"]),
        VIRTUAL_ENV=str(venv),
        PIP_NO_INDEX="1",
        PIP_FIND_LINKS=str(wheels),
        PIP_DISABLE_PIP_VERSION_CHECK="1",
    )
    env.update(extra)
    return env


def shell(
    command: str, *, env: dict[str, str], cwd: Path, timeout: float = 600
) -> subprocess.CompletedProcess[str]:
    """``command`` as a user types it (a shell line), not checked: the tests read it."""
    return subprocess.run(
        command,
        shell=True,
        env=env,
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


def _purelib(python: Path) -> Path:
    return Path(
        run(
            [str(python), "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"]
        ).stdout.strip()
    )


def torch_env(path: Path, torch_minor: str) -> Path:
    """A new venv holding torch ``torch_minor`` (.venv's 2.14 or .venv-torch213's 2.13,
    linked) and the toolkit's own dependencies, but no ptkit: installing a ptkit-built
    package from an index resolves nothing else."""
    base = Path(sys.executable) if torch_minor == "2.14" else TORCH213
    python = env_holding_packages_of(path, base)
    site, dev = _purelib(python), _purelib(Path(sys.executable))
    for entry in dev.iterdir():
        top = entry.name.split("-")[0].lower()
        if top in ("click", "elftools", "pyelftools") and not (site / entry.name).exists():
            if entry.name.endswith(".dist-info"):
                shutil.copytree(entry, site / entry.name)
            else:
                (site / entry.name).symlink_to(entry)
    return python


def build_python_213(path: Path, toolkit_wheel: Path) -> Path:
    """A venv with torch 2.13 (.venv-torch213's, through a .pth) and ptkit[build] from
    the wheelhouse: the Python that builds a torch-mode project for torch 2.13."""
    if not TORCH213.exists():
        raise AssertionError(".venv-torch213 is missing: run scripts/bootstrap (make test does)")
    python = fresh_venv(path, TORCH213)
    run([str(python), "-m", "pip", "install", "-q", "--no-index",
         "--find-links", str(wheelhouse(toolkit_wheel)), "--find-links", str(toolkit_wheel.parent),
         "ptkit[build]"], timeout=900)  # fmt: skip
    return python


def build_index(wheels: list[Path], toolkit: Path, recipes: Path, out: Path) -> dict[str, Any]:
    """``ptkit index build`` of ``wheels`` and the toolkit into ``out`` (one page per
    variant of ``recipes``); its pages by index path."""
    proc = run(
        [str(VENV_BIN / "ptkit"), "index", "build", *map(str, wheels), str(toolkit),
         "--recipes", str(recipes), "--out", str(out), "--json"],
        env=python_env(),
    )  # fmt: skip
    return {page["index_path"]: page for page in json.loads(proc.stdout)}


def serve_folder(out: Path) -> Iterator[str]:
    """``ptkit index serve`` of ``out`` on 127.0.0.1 while the caller iterates; its URL."""
    server = subprocess.Popen(
        [str(VENV_BIN / "ptkit"), "index", "serve", str(out), "--port", "0"],
        env=python_env(), stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True,
    )  # fmt: skip
    assert server.stderr is not None
    ready, _, _ = select.select([server.stderr], [], [], 30)
    assert ready, "ptkit index serve printed nothing within 30 s"
    match = re.search(r"at (http://127\.0\.0\.1:\d+)/", server.stderr.readline())
    assert match
    try:
        yield match.group(1)
    finally:
        server.terminate()
        server.wait(timeout=10)


def serve_index(wheels: list[Path], toolkit: Path, recipes: Path, out: Path) -> Iterator[str]:
    """``build_index`` then ``serve_folder``."""
    pages = build_index(wheels, toolkit, recipes, out)
    assert "cpu" in pages, pages
    yield from serve_folder(out)


def install_from_index(installer: str, python: Path, name: str, simple: str) -> str:
    """``name`` installed into ``python``'s venv by ``installer`` (pip or uv) from the
    index page ``simple`` only; what the installer said it installed."""
    if installer == "pip":
        cmd = [str(python), "-m", "pip", "install", "--no-cache-dir", "--disable-pip-version-check",
               name, "--index-url", simple]  # fmt: skip
        proc = run(cmd, env=python_env(PIP_CONFIG_FILE="/dev/null"), timeout=600)
        return next(x for x in proc.stdout.splitlines() if x.startswith("Successfully installed"))
    assert UV, "uv is not installed in the test environment (requirements/dev.txt pins it)"
    cmd = [UV, "pip", "install", "--python", str(python), "--no-cache", name, "--index-url", simple]
    return run(cmd, env=python_env(UV_NO_CONFIG="1"), timeout=600).stderr
