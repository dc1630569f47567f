"""Installing a recipe's pinned toolkit, or a torch-mode build's Python, into ptkit's cache.

``ptkit toolchain install <variant>`` and ``ptkit build`` (when the variant's toolkit is
missing) call :func:`install_toolchain`: a venv of its own for the recipe's ``[toolkit]
packages`` (:mod:`ptkit.backends.toolchain_cache` says where and why), never torch's
environment. The venv is made in a hidden ``.partial-<key>-…`` folder beside its final
name; pip installs the packages there with its own progress on the terminal; the
backend's compiler must then be in it; ``toolchain.json`` is written, and one rename
puts the folder into place. A failure or an interrupt removes the partial folder, so a
half-made toolchain is never used; a partial folder left by a killed process is removed
by a later install once it is a day old. Two installs of one toolchain at once both
finish: the first rename wins, the second's copy is dropped.

The venv was made under its partial name: its own console scripts (``bin/pip``) name
that folder and do not run; ``bin/python -m pip`` does, and the toolkit's binaries
(nvcc …) do not care.

:func:`install_build_environment` makes a torch-mode build's Python the same way
(:mod:`ptkit.release.build_python` says where and what it holds): ``torch==2.13.*`` and
the build's prerequisites in a venv of its own, complete once ``build-python.json`` is
written, then renamed into place. Its ``bin/python`` works from the final folder (a
venv's interpreter finds its environment from its own location, ``pyvenv.cfg``); its
console scripts, which the stages run (``auditwheel``, ``cmake``), name their
interpreter in their first line, which is rewritten from the partial folder to the
final one before the rename (:func:`_move_scripts`). Not on Windows, whose script
launchers embed the path in an executable.
"""

from __future__ import annotations

import datetime
import json
import os
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Mapping
from pathlib import Path

from ptkit.backends import BACKENDS, version_pair
from ptkit.backends.toolchain_cache import (
    METADATA_FILE,
    CachedToolchain,
    ToolchainSpec,
    find_cached,
    metadata,
    read_metadata,
    toolchains_dir,
)
from ptkit.recipes.model import Recipe
from ptkit.release.build_python import MARKER_FILE, BuildEnvironment

__all__ = [
    "ToolchainError",
    "cuobjdump_missing",
    "install_build_environment",
    "install_command",
    "install_toolchain",
    "toolchain_spec",
    "toolkit_install_command",
]

# A partial folder this old belongs to an install that was killed.
_STALE_PARTIAL_S = 24 * 3600
# The venv's own packages, not the toolkit's.
_VENV_PACKAGES = {"pip", "setuptools", "wheel"}


class ToolchainError(RuntimeError):
    """A toolchain cannot be installed: why (``cause``) and what to do (``fix``)."""

    def __init__(self, cause: str, fix: str) -> None:
        self.cause = cause
        self.fix = fix
        super().__init__(cause, fix)

    def __str__(self) -> str:
        return f"{self.cause}. Fix: {self.fix}"


def install_command(variant: str, source: Path | None = None) -> str:
    """``ptkit toolchain install cu13`` (with ``--source`` for a project's recipe): the
    one spelling every message gives."""
    argv = ["ptkit", "toolchain", "install", variant]
    if source is not None:
        argv += ["--source", str(source)]
    return shlex.join(argv)


def toolkit_install_command(backend: str, version: str | None = None) -> str | None:
    """``ptkit toolchain install <variant>`` for ptkit's own recipe of ``backend`` whose
    toolkit has the major version of ``version`` (else its newest): the fix of a message
    about a tool of that toolkit (cuobjdump) met outside a project. None when ptkit has
    no such recipe."""
    from ptkit.recipes.model import RecipeError, load_recipes
    from ptkit.selection.recipes import recipes_dir

    try:
        recipes = load_recipes(recipes_dir()).values()
    except RecipeError:
        return None
    cached = [r for r in recipes if r.backend == backend and r.toolkit.packages]
    if not cached or not BACKENDS[backend].cached_toolkits:
        return None
    wanted = version_pair(version)
    same = [
        r for r in cached if wanted and (version_pair(r.toolkit.version) or (0,))[0] == wanted[0]
    ]
    newest = max(same or cached, key=lambda r: version_pair(r.toolkit.version) or (0, 0))
    return install_command(newest.name)


def cuobjdump_missing(toolkit_version: str | None = None) -> str:
    """Why no cuobjdump was found, and the command that gets one (ptkit's toolchain of
    the CUDA major that built the library, ``toolkit_version``)."""
    install = toolkit_install_command("cuda", toolkit_version)
    fixes = [
        f"`{install}` (the CUDA toolkit with its cuobjdump, into ptkit's toolchain cache)"
        if install
        else "pip install nvidia-cuda-cuobjdump beside a CUDA toolkit",
        "set PTKIT_CUOBJDUMP to a cuobjdump",
    ]
    return (
        f"cuobjdump not found (looked beside the CUDA toolkits ptkit finds: "
        f"{BACKENDS['cuda'].toolkit_search}; .toolchains/*; then PATH). Fix: "
        f"{', or '.join(fixes)}"
    )


def toolchain_spec(recipe: Recipe) -> ToolchainSpec | None:
    """The toolchain of ``recipe``'s ``[toolkit]`` table; None when it lists no packages
    (a system toolchain: gcc, Xcode), and ``ToolchainError`` when its backend does not
    find toolkits in the cache (TheRock's ROCm SDK is found beside the build Python)."""
    toolkit = recipe.toolkit
    if not toolkit.packages:
        return None
    backend = BACKENDS[recipe.backend]
    if not backend.cached_toolkits:
        raise ToolchainError(
            f"recipe {recipe.name}'s {backend.title} toolkit is not installed into ptkit's "
            f"toolchain cache: the {backend.name} backend finds it beside the build Python "
            f"({backend.toolkit_search})",
            f"install it into the build Python: {toolkit.pip_install}",
        )
    return ToolchainSpec(
        name=toolkit.name or backend.name,
        version=toolkit.version,
        backend=backend.name,
        packages=toolkit.packages,
        index_url=toolkit.index_url,
    )


def _venv_python(folder: Path) -> Path:
    return folder / ("Scripts/python.exe" if os.name == "nt" else "bin/python")


def _remove_stale_partials(folder: Path, key: str) -> None:
    cutoff = time.time() - _STALE_PARTIAL_S
    for partial in folder.glob(f".partial-{key}-*"):
        try:
            if partial.stat().st_mtime < cutoff:
                shutil.rmtree(partial, ignore_errors=True)
        except OSError:
            continue


def _installed(site_packages: Path) -> tuple[str, ...]:
    """``name==version`` of every distribution pip put there (the venv's own excluded)."""
    found: list[str] = []
    for info in sorted(site_packages.glob("*.dist-info")):
        fields: dict[str, str] = {}
        try:
            for line in (info / "METADATA").read_text(encoding="utf-8").splitlines():
                if not line.strip():
                    break  # the headers end at the first empty line
                key, _, value = line.partition(":")
                fields.setdefault(key.strip().lower(), value.strip())
        except OSError:
            continue
        name, version = fields.get("name", ""), fields.get("version", "")
        if name and name.lower() not in _VENV_PACKAGES:
            found.append(f"{name}=={version}")
    return tuple(found)


def _run_quiet(command: list[str], what: str, fix: str) -> None:
    try:
        proc = subprocess.run(command, capture_output=True, text=True, timeout=600, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise ToolchainError(f"{what}: {exc}", fix) from exc
    if proc.returncode != 0:
        tail = " ".join((proc.stdout + proc.stderr).strip().splitlines()[-3:])
        raise ToolchainError(f"{what}: exit {proc.returncode}: {tail}", fix)


def _build(spec: ToolchainSpec, partial: Path, python: str) -> CachedToolchain:
    """The toolchain made in ``partial`` (see the module docstring), not yet in place."""
    backend = BACKENDS[spec.backend]
    _run_quiet(
        [python, "-m", "venv", str(partial)],
        f"`{python} -m venv` could not make the toolchain's venv in {partial}",
        "install Python's venv module (Debian: apt install python3-venv), or run ptkit "
        "with a Python that has it",
    )
    index = ["--index-url", spec.index_url] if spec.index_url else []
    command = [
        str(_venv_python(partial)), "-m", "pip", "install", "--disable-pip-version-check",
        *index, *spec.packages,
    ]  # fmt: skip
    # pip's own output and progress bar go to the terminal: a download of a few hundred MB.
    try:
        code = subprocess.run(command, stdin=subprocess.DEVNULL, check=False).returncode
    except OSError as exc:
        code, reason = -1, str(exc)
    else:
        reason = f"pip exited with {code}; its output is above"
    if code != 0:
        where = spec.index_url or "PyPI (or the index pip is configured with)"
        raise ToolchainError(
            f"pip could not install {' '.join(spec.packages)} from {where}: {reason}",
            "check the network and the index (pip reads PIP_INDEX_URL and PIP_FIND_LINKS "
            f"for a mirror or a folder of wheels), or {backend.toolkit_fix}",
        )
    site = CachedToolchain(partial, spec, (), "").site_packages
    if site is None or not backend.pip_compilers(site):
        raise ToolchainError(
            f"pip installed {' '.join(spec.packages)}, but no {backend.compiler_name} came "
            f"with them (looked in {partial}/lib/python*/site-packages)",
            "the recipe's [toolkit] packages must include the compiler's package",
        )
    created = datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")
    made = CachedToolchain(partial, spec, _installed(site), created)
    written = partial / f".{METADATA_FILE}.part"
    written.write_text(json.dumps(metadata(made), indent=2) + "\n", encoding="utf-8")
    os.replace(written, partial / METADATA_FILE)
    return made


def install_toolchain(
    spec: ToolchainSpec,
    *,
    environ: Mapping[str, str] | None = None,
    python: str | None = None,
    echo: Callable[[str], None] = print,
) -> CachedToolchain:
    """The toolchain of ``spec`` in the cache: the one there, else installed now (see
    the module docstring). ``python`` (default: this one) makes the venv; ``echo`` gets
    the one line that says where it goes (pip prints the rest)."""
    found = find_cached(spec, environ)
    if found is not None:
        return found
    folder = toolchains_dir(environ)
    final = spec.path(environ)
    try:
        folder.mkdir(parents=True, exist_ok=True)
        _remove_stale_partials(folder, spec.key)
        partial = Path(tempfile.mkdtemp(prefix=f".partial-{spec.key}-", dir=folder))
    except OSError as exc:
        raise ToolchainError(
            f"cannot write ptkit's toolchain cache {folder}: {exc.strerror or exc}",
            "set PTKIT_CACHE_DIR to a folder you can write",
        ) from exc
    echo(f"      pip installs into {partial}, renamed to {final} when complete")
    try:
        _build(spec, partial, python or sys.executable)
        try:
            os.rename(partial, final)
        except OSError:
            # Another install of the same toolchain finished first: use its copy.
            if find_cached(spec, environ) is None:
                raise
    except OSError as exc:
        raise ToolchainError(
            f"cannot complete the toolchain in {final}: {exc}",
            f"remove {final} if an older ptkit left it, and run the command again",
        ) from exc
    finally:
        if partial.exists():
            shutil.rmtree(partial, ignore_errors=True)
    done = read_metadata(final)
    if done is None:  # pragma: no cover - just written and renamed
        raise ToolchainError(f"{final} has no readable {METADATA_FILE}", f"remove {final}")
    return done


def _site_packages(venv: Path) -> Path | None:
    found = sorted(venv.glob("lib/python*/site-packages")) or sorted(venv.glob("Lib/site-packages"))
    return found[-1] if found else None


# pip names a console script's interpreter in its header: the first line
# (`#!<venv>/bin/python`) or, where that path is longer than the kernel's 127-byte `#!`
# limit, a `#!/bin/sh` line and an `exec '<venv>/bin/python' "$0" "$@"` line.
_SCRIPT_HEADER_LINES = 3


def _move_scripts(venv: Path, final: Path) -> None:
    """Point the console scripts of ``venv`` (``bin/*``) at the interpreter it will have
    once renamed to ``final``: ``<venv>/bin/`` in their header becomes ``<final>/bin/``
    (``final`` is shorter than the hidden partial name: a first line under the limit
    stays under it)."""
    old, new = f"{venv}/bin/".encode(), f"{final}/bin/".encode()
    for script in (venv / "bin").iterdir():
        if script.is_symlink() or not script.is_file():
            continue
        data = script.read_bytes()
        if not data.startswith(b"#!"):
            continue  # not a script
        lines = data.split(b"\n", _SCRIPT_HEADER_LINES)
        head = [line.replace(old, new) for line in lines[:_SCRIPT_HEADER_LINES]]
        script.write_bytes(b"\n".join(head + lines[_SCRIPT_HEADER_LINES:]))


def install_build_environment(
    environment: BuildEnvironment,
    *,
    python: str | None = None,
    echo: Callable[[str], None] = print,
) -> Path:
    """The Python of ``environment``: the one in the cache, else made now (see the module
    docstring) with ``python`` (default: this one). ``ToolchainError`` with the fix."""
    if environment.complete():
        return environment.python
    final = environment.path
    folder = final.parent
    key = final.name
    try:
        folder.mkdir(parents=True, exist_ok=True)
        _remove_stale_partials(folder, key)
        partial = Path(tempfile.mkdtemp(prefix=f".partial-{key}-", dir=folder))
    except OSError as exc:
        raise ToolchainError(
            f"cannot write ptkit's cache {folder}: {exc.strerror or exc}",
            "set PTKIT_CACHE_DIR to a folder you can write",
        ) from exc
    echo(f"      pip installs into {partial}, renamed to {final} when complete")
    try:
        _run_quiet(
            [python or sys.executable, "-m", "venv", str(partial)],
            f"`python -m venv` could not make the build environment in {partial}",
            "install Python's venv module (Debian: apt install python3-venv), or pass "
            "--build-python with a Python that has the torch and the build's prerequisites",
        )
        command = environment.pip_install(str(_venv_python(partial)))
        # pip's own output and progress go to the terminal: torch is hundreds of MB.
        try:
            code = subprocess.run(command, stdin=subprocess.DEVNULL, check=False).returncode
        except OSError as exc:
            code, reason = -1, str(exc)
        else:
            reason = f"pip exited with {code}; its output is above"
        if code != 0:
            where = environment.torch_index_url or "PyPI (or the index pip is configured with)"
            raise ToolchainError(
                f"pip could not install {environment.torch_requirement} (from {where}) and "
                f"the build's prerequisites: {reason}",
                "check the network and the index (pip reads PIP_INDEX_URL, PIP_EXTRA_INDEX_URL "
                "and PIP_FIND_LINKS for a mirror or a folder of wheels), or pass "
                "--build-python with a Python that has that torch and `ptkit[build]`",
            )
        site = _site_packages(partial)
        marker = {
            "torch": str(environment.torch),
            "torch_index_url": environment.torch_index_url,
            "installed": list(_installed(site)) if site else [],
            "created": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        }
        if os.name != "nt":
            _move_scripts(partial, final)
        written = partial / f".{MARKER_FILE}.part"
        written.write_text(json.dumps(marker, indent=2) + "\n", encoding="utf-8")
        os.replace(written, partial / MARKER_FILE)
        try:
            os.rename(partial, final)
        except OSError:
            # Another install of the same environment finished first: use its copy.
            if not environment.complete():
                raise
    except OSError as exc:
        raise ToolchainError(
            f"cannot complete the build environment in {final}: {exc}",
            f"remove {final} if an older ptkit left it, and run the command again",
        ) from exc
    finally:
        if partial.exists():
            shutil.rmtree(partial, ignore_errors=True)
    return environment.python
