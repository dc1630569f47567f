"""ptkit's toolchain cache (ptkit.backends.toolchain_cache) as every caller sees it: where
it is, what counts as a complete toolchain, the CUDA backend's candidates taking it, the
pipeline preferring the recipe's own, the messages naming `ptkit toolchain install`, and
the build prerequisites (ptkit.release.pipeline.prerequisites) held equal to the toolkit's
`build` extra. Toolchains here are laid out by hand (what pip would install, and the
metadata written by the installer's own writer); the real install is
tests/integration/test_toolchain.py."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest
from packaging.requirements import Requirement

from ptkit.backends import BACKENDS
from ptkit.backends.toolchain_cache import (
    CachedToolchain,
    ToolchainSpec,
    cache_root,
    cached_toolchains,
    find_cached,
    metadata,
)
from ptkit.recipes.model import load_recipe
from ptkit.release.pipeline import BuildError, cuda_toolkit, prerequisites
from ptkit.release.toolchains import (
    ToolchainError,
    cuobjdump_missing,
    install_command,
    install_toolchain,
    toolchain_spec,
    toolkit_install_command,
)

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

REPO = Path(__file__).resolve().parents[2]
SRC = REPO / "src"
CU13 = load_recipe("cu13", REPO / "recipes")
CUDA = BACKENDS["cuda"]


def _cache(tmp_path: Path) -> dict[str, str]:
    return {"PTKIT_CACHE_DIR": str(tmp_path / "cache"), "PATH": ""}


def _lay_out(spec: ToolchainSpec, environ: dict[str, str], *, complete: bool = True) -> Path:
    """A toolchain as pip leaves it (nvidia/cu13/bin/nvcc in the venv's site-packages),
    with the installer's metadata when ``complete``; returns the nvcc."""
    folder = spec.path(environ)
    nvcc = folder / "lib" / "python3.11" / "site-packages" / "nvidia" / "cu13" / "bin" / "nvcc"
    nvcc.parent.mkdir(parents=True)
    nvcc.write_text("#!/bin/sh\n")
    nvcc.chmod(0o755)
    if complete:
        made = CachedToolchain(folder, spec, ("nvidia-cuda-nvcc==13.5.37",), "2026-01-01")
        (folder / "toolchain.json").write_text(json.dumps(metadata(made)))
    return nvcc


def _spec(
    version: str = "13.5", packages: tuple[str, ...] = ("nvidia-cuda-nvcc==13.5.*",)
) -> ToolchainSpec:
    return ToolchainSpec("cuda", version, "cuda", packages)


# --- where the cache is ---------------------------------------------------------------


def test_the_cache_is_ptkit_cache_dir_else_the_users_cache_folder(tmp_path: Path) -> None:
    assert cache_root({"PTKIT_CACHE_DIR": str(tmp_path)}) == tmp_path
    if sys.platform.startswith("linux"):
        assert cache_root({"HOME": "/home/u"}) == Path("/home/u/.cache/ptkit")
        assert cache_root({"HOME": "/home/u", "XDG_CACHE_HOME": "/x"}) == Path("/x/ptkit")


def test_a_toolchain_is_one_per_toolkit_version_and_packages() -> None:
    spec = toolchain_spec(CU13)
    assert spec is not None
    assert (spec.name, spec.version, spec.backend) == ("cuda", "13.5", "cuda")
    assert spec.packages == CU13.toolkit.packages
    assert spec.key.startswith("cuda-13.5-") and len(spec.key) == len("cuda-13.5-") + 12
    # The package list decides (its order does not); another list is another toolchain.
    reordered = ToolchainSpec("cuda", "13.5", "cuda", tuple(reversed(spec.packages)))
    assert reordered.key == spec.key
    assert _spec(packages=spec.packages[:1]).key != spec.key
    assert toolchain_spec(load_recipe("cpu", REPO / "recipes")) is None


def test_a_recipe_whose_backend_the_cache_does_not_serve_says_where_its_toolkit_goes() -> None:
    rocm = load_recipe("rocm7.14", REPO / "recipes")
    with pytest.raises(ToolchainError) as caught:
        toolchain_spec(rocm)
    assert "the hip backend finds it beside the build Python" in caught.value.cause
    assert caught.value.fix == f"install it into the build Python: {rocm.toolkit.pip_install}"


# --- what counts ----------------------------------------------------------------------


def test_only_complete_toolchains_of_this_platform_are_listed(tmp_path: Path) -> None:
    env = _cache(tmp_path)
    assert cached_toolchains(env) == []  # no cache folder yet
    old, new = _spec("13.0"), _spec("13.5")
    _lay_out(old, env)
    _lay_out(new, env)
    half = _spec("13.6")
    _lay_out(half, env, complete=False)  # pip was killed: no toolchain.json
    partial = env["PTKIT_CACHE_DIR"] + "/toolchains/.partial-" + new.key + "-abc"
    Path(partial).mkdir()
    listed = cached_toolchains(env)
    assert [t.spec.version for t in listed] == ["13.5", "13.0"]  # newest first
    assert find_cached(half, env) is None and find_cached(new, env) is not None
    # A toolchain made on another platform (a shared home folder) is not this machine's.
    other = json.loads((new.path(env) / "toolchain.json").read_text())
    other["platform"] = "macosx-14.0-arm64"
    (new.path(env) / "toolchain.json").write_text(json.dumps(other))
    assert find_cached(new, env) is None
    assert sysconfig.get_platform() != other["platform"]


def test_the_cuda_candidates_take_the_cache_after_the_build_pythons_path(tmp_path: Path) -> None:
    env = _cache(tmp_path)
    cached = _lay_out(_spec(), env)
    site = tmp_path / "site"
    on_path = site / "nvidia" / "cu13" / "bin" / "nvcc"
    on_path.parent.mkdir(parents=True)
    on_path.write_text("")
    candidates = CUDA.toolkit_candidates(env, [str(site)])
    assert [c.compiler for c in candidates] == [on_path, cached]
    assert candidates[1].source == f"ptkit toolchain cache ({cached.parents[3]})"
    # Only the cache: the build takes it.
    found = CUDA.find_toolkit(env, [])
    assert found is not None and found.compiler == cached
    # A cached toolchain also on the search paths is one candidate, said as the cache's.
    (twice,) = CUDA.toolkit_candidates(env, [str(cached.parents[3])])
    assert twice.source.startswith("ptkit toolchain cache (")
    # PTKIT_CUDA_ROOT names one: that one or none.
    (named,) = CUDA.toolkit_candidates({**env, "PTKIT_CUDA_ROOT": "/opt/x"}, [])
    assert named.explicit and named.compiler == Path("/opt/x/bin/nvcc")


def test_the_build_prefers_the_recipes_own_toolchain(tmp_path: Path) -> None:
    """A cache holding a newer CUDA too must not hand the cu13 recipe (13.5) another one."""
    env = _cache(tmp_path)
    own = _lay_out(toolchain_spec(CU13) or _spec(), env)
    _lay_out(_spec("13.9"), env)
    project = tmp_path / "project"
    project.mkdir()
    paths = cuda_toolkit.search_paths(project, CU13, env)
    assert paths[0] == str(own.parents[3])
    found = cuda_toolkit.find_cuda_toolkit(project, CU13, env)
    assert found is not None and found.compiler == own
    # The project's .toolchains/<variant> (ptkit's own scripts/bootstrap) comes first.
    local = project / ".toolchains" / "cu13" / "lib" / "python3.12" / "site-packages"
    local_nvcc = local / "nvidia" / "cu13" / "bin" / "nvcc"
    local_nvcc.parent.mkdir(parents=True)
    local_nvcc.write_text("")
    assert cuda_toolkit.search_paths(project, CU13, env)[0] == str(local)
    found = cuda_toolkit.find_cuda_toolkit(project, CU13, env)
    assert found is not None and found.compiler == local_nvcc


# --- the messages ----------------------------------------------------------------------


def test_the_messages_name_ptkit_toolchain_install() -> None:
    assert install_command("cu13") == "ptkit toolchain install cu13"
    assert install_command("cu13", Path("/p q")) == "ptkit toolchain install cu13 --source '/p q'"
    # The library's CUDA major picks ptkit's own recipe of that major.
    assert toolkit_install_command("cuda", "13.5.37") == "ptkit toolchain install cu13"
    assert toolkit_install_command("cuda", None) == "ptkit toolchain install cu13"
    assert toolkit_install_command("hip", "7.14") is None  # TheRock: not the cache's
    message = cuobjdump_missing("13.5.37")
    assert message.startswith("cuobjdump not found (looked beside the CUDA toolkits ptkit finds")
    assert "ptkit's toolchain cache" in message
    assert "Fix: `ptkit toolchain install cu13` (the CUDA toolkit with its cuobjdump" in message
    assert "or set PTKIT_CUOBJDUMP" in message
    assert "pip install nvidia-cuda" not in message


def test_the_toolkit_search_text_names_the_cache() -> None:
    assert "ptkit's toolchain cache (ptkit toolchain install)" in CUDA.toolkit_search
    assert [name for name, b in BACKENDS.items() if b.cached_toolkits] == ["cuda"]
    proc = subprocess.run(
        [sys.executable, "-m", "ptkit.backends", "list"],
        env={**os.environ, "PYTHONPATH": str(SRC)},
        capture_output=True,
        text=True,
        check=True,
    )
    assert "CACHED=cuda" in proc.stdout.splitlines()


def test_an_unwritable_cache_is_said_with_the_variable_that_moves_it(tmp_path: Path) -> None:
    blocked = tmp_path / "file"
    blocked.write_text("not a folder")
    with pytest.raises(ToolchainError) as caught:
        install_toolchain(_spec(), environ={"PTKIT_CACHE_DIR": str(blocked)}, echo=print)
    assert caught.value.cause.startswith(f"cannot write ptkit's toolchain cache {blocked}")
    assert caught.value.fix == "set PTKIT_CACHE_DIR to a folder you can write"


def test_a_cached_toolchain_is_returned_without_installing(tmp_path: Path) -> None:
    env = _cache(tmp_path)
    _lay_out(_spec(), env)
    lines: list[str] = []
    done = install_toolchain(_spec(), environ=env, python="/nonexistent/python", echo=lines.append)
    assert done.path == _spec().path(env) and lines == []


# --- build prerequisites ---------------------------------------------------------------


def test_the_build_extra_is_what_the_stages_check() -> None:
    pyproject = tomllib.loads((REPO / "toolkit" / "pyproject.toml").read_text())
    extra = pyproject["project"]["optional-dependencies"]["build"]
    expected = [
        f"{p.requirement}; sys_platform == '{p.platform}'" if p.platform else p.requirement
        for p in prerequisites.BUILD_EXTRA
    ]
    assert [str(Requirement(r)) for r in extra] == [str(Requirement(r)) for r in expected]


def test_this_environment_has_every_prerequisite() -> None:
    """The dev environment (requirements/dev.txt) holds the extra and torch."""
    from ptkit.release.pipeline.run import STAGES

    assert prerequisites.missing_prerequisites(STAGES, REPO) == []


def test_a_missing_project_build_requirement_is_named_with_the_one_command(tmp_path: Path) -> None:
    (tmp_path / "pyproject.toml").write_text(
        "[build-system]\n"
        'requires = ["scikit-build-core>=1.1", "ptkit>=0.1.0,<0.2", "torch>=2.10",\n'
        '  "no-such-package-ptkit-test>=1", "other-os-only; sys_platform == \'plan9\'"]\n'
    )
    missing = prerequisites.missing_prerequisites(("build",), tmp_path)
    assert [(m.requirement, m.found, m.in_extra) for m in missing] == [
        ("no-such-package-ptkit-test>=1", "not installed", False)
    ]
    command = prerequisites.install_command(missing)
    assert command.endswith(" -m pip install 'no-such-package-ptkit-test>=1'")
    with pytest.raises(BuildError) as caught:
        prerequisites.check_prerequisites("cpu", ("build",), tmp_path)
    message = str(caught.value)
    assert message.startswith(
        "ptkit build: stage 'prerequisites' failed for variant cpu: this Python"
    )
    assert (
        "  - no-such-package-ptkit-test>=1 (the project's [build-system] requires): not installed"
        in message
    )
    assert f"Fix: {command}" in message
    # The extra's own tools, when missing, are one `pip install 'ptkit[build]'`.
    extra_missing = prerequisites.Missing("cmake>=3.26", "stage build", "not installed", True)
    assert prerequisites.install_command([extra_missing]).endswith("-m pip install 'ptkit[build]'")
    assert prerequisites.install_command().endswith("-m pip install 'ptkit[build]'")


# --- the CLI's error boundary knows the errors by their defining module ------------------


def test_every_expected_error_names_a_class_that_exists() -> None:
    import importlib

    from ptkit.cli.failures import EXPECTED_ERRORS

    for name in EXPECTED_ERRORS:
        module, _, attribute = name.rpartition(".")
        cls = getattr(importlib.import_module(module), attribute)
        assert f"{cls.__module__}.{cls.__qualname__}" == name, name


# --- ptkit build installs a missing toolkit (ptkit.release.pipeline.provision) -----------


def test_the_build_installs_no_toolkit_when_it_finds_one(tmp_path: Path) -> None:
    from ptkit.release.pipeline.provision import provision_toolkit

    env = _cache(tmp_path)
    _lay_out(toolchain_spec(CU13) or _spec(), env)
    lines: list[str] = []
    assert provision_toolkit(CU13, tmp_path, environ=env, echo=lines.append) is None
    assert lines == []
    cpu = load_recipe("cpu", REPO / "recipes")
    assert (
        provision_toolkit(cpu, tmp_path, environ=_cache(tmp_path / "x"), echo=lines.append) is None
    )
    assert lines == []


def test_a_failed_toolkit_install_stops_the_build_unless_the_backend_may_be_missing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Here the venv cannot be made (no such Python): the stage 'toolkit' error with its
    fix; with --allow-missing-backend the build goes on without it, saying so."""
    from ptkit.release import toolchains
    from ptkit.release.pipeline.provision import provision_toolkit

    env = _cache(tmp_path)
    monkeypatch.setattr(toolchains.sys, "executable", str(tmp_path / "no-python"))
    lines: list[str] = []
    with pytest.raises(BuildError) as caught:
        provision_toolkit(CU13, tmp_path, environ=env, echo=lines.append)
    assert caught.value.stage == "toolkit"
    assert "could not make the toolchain's venv" in caught.value.cause
    assert caught.value.fix.startswith("install Python's venv module")
    spec = toolchain_spec(CU13)
    assert spec is not None
    assert lines[0] == (
        "ptkit build cu13: installing the recipe's toolkit, CUDA 13.5 (nvidia-cuda-nvcc==13.5.* "
        "nvidia-cuda-runtime==13.5.* nvidia-cuda-crt==13.5.* nvidia-cuda-cccl==13.* "
        f"nvidia-cuda-cuobjdump==13.5.*), into ptkit's toolchain cache {spec.path(env)} (once "
        "for every project, never into torch's environment), because no nvcc was found "
        f"({CUDA.toolkit_search})"
    )
    assert list((tmp_path / "cache" / "toolchains").iterdir()) == []  # nothing half-made
    lines.clear()
    assert provision_toolkit(CU13, tmp_path, environ=env, echo=lines.append, required=False) is None
    assert lines[-1].startswith("ptkit build cu13: no toolkit (")
    assert lines[-1].endswith("; building without it as asked")
