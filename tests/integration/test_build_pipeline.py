"""`ptkit build`'s five stages on the cpu variant: the whole pipeline into a temporary
dist/, two clean builds giving the same bytes, a failing stage that leaves dist/
untouched, and the smoke test the pipeline and cibuildwheel run.

The builds run from a snapshot of the working tree (so an edit made meanwhile cannot
make the two builds differ) with SOURCE_DATE_EPOCH set as `ptkit build` sets it. Two
cold cpu builds (about 40 s each on two cores) are the cost; cu13 is measured by hand.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import zipfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from support import REPO, copy_working_tree, python_env, run

from ptkit.recipes.model import Recipe, load_recipe
from ptkit.release import pipeline
from ptkit.release.pipeline import BuildError, PipelineResult

pytestmark = pytest.mark.integration


def _git(*args: str) -> str:
    return run(["git", "-C", str(REPO), *args]).stdout


@pytest.fixture(scope="module")
def epoch() -> Iterator[str]:
    value = _git("log", "-1", "--format=%ct").strip()
    saved = os.environ.get("SOURCE_DATE_EPOCH")
    os.environ["SOURCE_DATE_EPOCH"] = value
    yield value
    if saved is None:
        os.environ.pop("SOURCE_DATE_EPOCH", None)
    else:
        os.environ["SOURCE_DATE_EPOCH"] = saved


@pytest.fixture(scope="module")
def source(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The working tree's files (tracked and untracked, not ignored), copied once."""
    return copy_working_tree(tmp_path_factory.mktemp("source"))


@pytest.fixture(scope="module")
def cpu(source: Path) -> Recipe:
    return load_recipe("cpu", source / "recipes")


@pytest.fixture(scope="module")
def full_run(
    source: Path, epoch: str, tmp_path_factory: pytest.TempPathFactory
) -> tuple[PipelineResult, list[str], Path]:
    """All five stages of the cpu variant into a temporary dist/."""
    work = tmp_path_factory.mktemp("full")
    lines: list[str] = []
    result = pipeline.run_pipeline(
        "cpu", repo=source, dist=work / "dist", build_root=work / "build", echo=lines.append
    )
    return result, lines, work


def _members(wheel: Path) -> dict[str, str]:
    with zipfile.ZipFile(wheel) as z:
        return {n: hashlib.sha256(z.read(n)).hexdigest() for n in z.namelist()}


def test_the_pipeline_runs_five_stages_into_dist(
    full_run: tuple[PipelineResult, list[str], Path],
) -> None:
    result, lines, work = full_run
    text = "\n".join(lines)
    for i, stage in enumerate(pipeline.STAGES, start=1):
        assert f"[{i}/5] {stage} …" in lines, text
        assert any(line.startswith(f"[{i}/5] {stage} ok in ") for line in lines), text
    assert set(result.durations) == set(pipeline.STAGES)
    # The wheel: repaired to a manylinux tag auditwheel chose, in dist/cpu/ and nowhere else.
    assert result.platform.startswith("manylinux_"), result.platform
    assert result.wheel.parent == work / "dist" / "cpu"
    assert [p.name for p in result.wheel.parent.iterdir()] == [result.wheel.name]
    assert result.sha256 == hashlib.sha256(result.wheel.read_bytes()).hexdigest()
    assert f"-py3-none-{result.platform}.whl" in result.wheel.name
    assert not (work / "build" / "pipeline-cpu").exists()  # the scratch folder is gone
    # The stages said what they did.
    assert "SOURCE_DATE_EPOCH=" in lines[0]
    assert "cpu      built" in text
    assert "torch and GPU runtimes excluded" in text
    assert "libptkit_cpu.so: links libtorch_cpu.so" in text
    assert "ptkit-ops smoke test passed" in text
    assert "python -m ptkit_ops.smoke" in text  # the recipe's [release] test-command
    # The compiler cache's statistics, or that there is none.
    (build_line,) = [line for line in lines if line.startswith("[1/5] build ok")]
    assert " misses (" in build_line or "no compiler cache" in build_line, build_line


def test_two_clean_builds_give_the_same_bytes(
    full_run: tuple[PipelineResult, list[str], Path],
    source: Path,
    cpu: Recipe,
    epoch: str,
    tmp_path: Path,
) -> None:
    """A second build in an empty build folder, with an empty compiler cache of its own,
    repaired like the first: the released wheel must not depend on where or when."""
    first = full_run[0]
    built = pipeline.build_wheel(
        cpu, repo=source, build_root=tmp_path / "build", out_dir=tmp_path / "wheel"
    )
    assert "0 hits" in built.cache or "sccache" not in built.cache
    second = pipeline.repair_wheel(
        built.wheel,
        recipe=cpu,
        out_dir=tmp_path / "repaired",
        env={"SOURCE_DATE_EPOCH": epoch},
    )
    assert second.wheel.name == first.wheel.name
    a, b = _members(first.wheel), _members(second.wheel)
    differing = sorted(n for n in a.keys() | b.keys() if a.get(n) != b.get(n))
    assert differing == [], f"members that differ between two clean builds: {differing}"
    assert hashlib.sha256(second.wheel.read_bytes()).hexdigest() == first.sha256


def _break_manifest(wheel: Path, out: Path) -> Path:
    """A copy of ``wheel`` whose CPU manifest carries a wrong sha256."""
    broken = out / wheel.name
    with zipfile.ZipFile(wheel) as src, zipfile.ZipFile(broken, "w", zipfile.ZIP_DEFLATED) as dst:
        for info in src.infolist():
            data = src.read(info)
            if info.filename.endswith("ptkit_cpu.manifest.json"):
                manifest = json.loads(data)
                manifest["sha256"] = "0" * 64
                data = json.dumps(manifest).encode()
            dst.writestr(info, data)
    return broken


def _snapshot(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in folder.rglob("*") if p.is_file()}


def test_a_failed_audit_names_the_stage_and_leaves_dist_untouched(
    full_run: tuple[PipelineResult, list[str], Path], source: Path, cpu: Recipe, tmp_path: Path
) -> None:
    dist = tmp_path / "dist"
    (dist / "cpu").mkdir(parents=True)
    (dist / "cpu" / "ptkit_ops-0.0.9+cpu-py3-none-any.whl").write_bytes(b"the previous release")
    before = _snapshot(dist)
    (tmp_path / "broken").mkdir()
    broken = _break_manifest(full_run[0].wheel, tmp_path / "broken")
    lines: list[str] = []
    with pytest.raises(BuildError) as caught:
        pipeline.finish_wheel(
            broken, cpu, repo=source, dist=dist, scratch=tmp_path / "scratch", echo=lines.append
        )
    error = caught.value
    assert error.stage == "audit"
    message = str(error)
    assert message.startswith("ptkit build: stage 'audit' failed for variant cpu: 1 problem")
    assert "libptkit_cpu.so: sha256" in message and f"says {'0' * 64}" in message
    assert "Fix: " in message
    assert f"Nothing was written to {dist / 'cpu'}." in message
    assert _snapshot(dist) == before
    assert any(line.startswith("[2/5] repair ok") for line in lines)
    assert not any(line.startswith(("[4/5]", "[5/5]")) for line in lines)


def test_cli_failure_exits_1_naming_the_stage_and_writes_nothing(tmp_path: Path) -> None:
    """A stage's BuildError reaches the user as its own message (exit 1), not as an
    internal error: a recipe that exists but does not load fails stage 1."""
    project = tmp_path / "project"
    (project / "recipes").mkdir(parents=True)
    recipe = (REPO / "recipes" / "cpu.toml").read_text()
    (project / "recipes" / "cpu.toml").write_text(recipe + "\n[nosuch]\nkey = 1\n")
    proc = subprocess.run(
        [sys.executable, "-m", "ptkit", "build", "--variant", "cpu",
         "--source", str(project), "--dist", str(tmp_path / "dist"),
         "--build-root", str(tmp_path / "build")],
        capture_output=True, text=True, timeout=300, env=python_env(), check=False,
    )  # fmt: skip
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "Traceback" not in proc.stderr and "internal error" not in proc.stderr
    assert proc.stderr.startswith("ptkit build: stage 'build' failed for variant cpu: recipe:")
    assert "nosuch" in proc.stderr
    assert f"Fix: correct {project / 'recipes' / 'cpu.toml'} as the message says" in proc.stderr
    assert f"Nothing was written to {tmp_path / 'dist' / 'cpu'}." in proc.stderr
    assert not (tmp_path / "dist").exists()


def test_an_unknown_variant_is_a_usage_error_with_a_suggestion(
    source: Path, tmp_path: Path
) -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "ptkit", "build", "--variant", "cu31",
         "--source", str(source), "--dist", str(tmp_path / "dist")],
        capture_output=True, text=True, timeout=300, env=python_env(), check=False,
    )  # fmt: skip
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "(did you mean 'cu13'?)" in proc.stderr


def test_source_date_epoch_defaults_to_the_last_commit(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("SOURCE_DATE_EPOCH", raising=False)
    assert pipeline.source_date_epoch(REPO) == _git("log", "-1", "--format=%ct").strip()
    monkeypatch.setenv("SOURCE_DATE_EPOCH", "315532800")
    assert pipeline.source_date_epoch(REPO) == "315532800"


def test_compiler_cache_choice(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """requirements/dev.txt installs both: auto picks ccache (it wraps nvcc 13.5 too)."""
    monkeypatch.delenv("SCCACHE_DIR", raising=False)
    monkeypatch.delenv("CCACHE_DIR", raising=False)
    assert pipeline.find_compiler_cache(tmp_path, choice="none") is None
    auto = pipeline.find_compiler_cache(tmp_path)
    assert auto is not None and auto.kind == "ccache", auto
    assert f"cmake.define.CMAKE_CUDA_COMPILER_LAUNCHER={auto.tool}" in auto.cmake_defines()
    cache = pipeline.find_compiler_cache(tmp_path, choice="sccache")
    assert cache is not None and cache.kind == "sccache"
    assert cache.env["SCCACHE_DIR"] == str((tmp_path / "sccache").resolve())
    defines = cache.cmake_defines()
    assert f"cmake.define.CMAKE_CXX_COMPILER_LAUNCHER={cache.tool}" in defines
    assert f"cmake.define.CMAKE_CUDA_COMPILER_LAUNCHER={cache.tool}" in defines
    # sccache <= 0.17 cannot wrap nvcc >= 13.3: C++ stays cached, CUDA compiles uncached.
    version = subprocess.run(
        [cache.tool, "--version"], capture_output=True, text=True, check=True
    ).stdout.split()[1]
    if tuple(int(p) for p in version.split(".")[:2]) < (0, 18):
        new_nvcc = pipeline.find_compiler_cache(tmp_path, choice="sccache", nvcc=(13, 5))
        assert new_nvcc is not None and not new_nvcc.cuda
        assert "cmake.define.CMAKE_CUDA_COMPILER_LAUNCHER=" in new_nvcc.cmake_defines()
        assert "mozilla/sccache#2722" in new_nvcc.note


def _smoke(**env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "ptkit_ops.smoke"],
        capture_output=True, text=True, timeout=300, cwd="/", env=python_env(**env), check=False,
    )  # fmt: skip


def test_smoke_passes_on_the_installed_wheel() -> None:
    proc = _smoke()
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "libptkit_cpu.so" in proc.stdout and "loaded" in proc.stdout
    for check in ("rms_norm", "fused_linear M=1", "fused_linear M=33", "silu_and_mul"):
        for dtype in ("torch.float32", "torch.bfloat16"):
            assert f"{check} {dtype}" in proc.stdout
    assert "ptkit-ops smoke test passed" in proc.stdout


def test_smoke_fails_when_the_cpu_library_does_not_load() -> None:
    proc = _smoke(PTKIT_DISABLE_NATIVE="cpu")
    assert proc.returncode == 1
    assert "FAILED: the CPU library did not load" in proc.stderr
