"""Shared helpers for ptkit's tests: tolerances, subprocesses, fresh environments."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch

REPO = Path(__file__).resolve().parents[1]
# Where scripts/bootstrap records each part it left out (for want of disk, or to another turn
# of the slowest tests: tests/turns.py), with the reason.
BOOTSTRAP_SKIPPED = REPO / "build" / "bootstrap" / "skipped"
DTYPES = (torch.float32, torch.float16, torch.bfloat16)

# Unit roundoff of each dtype (half an ulp at 1.0).
UNIT_ROUNDOFF = {torch.float32: 2.0**-24, torch.float16: 2.0**-11, torch.bfloat16: 2.0**-8}


def skip_if_bootstrap_left_out(part: str) -> None:
    """Skips the calling test, with scripts/bootstrap's reason, where bootstrap left ``part``
    (``.venv-torch210``, ``.roots/sid-python3.15`` …) out: the disk had no room, or the test
    that needs it runs in another turn."""
    record = BOOTSTRAP_SKIPPED / part
    if record.is_file():
        with record.open(encoding="utf-8", errors="replace") as f:
            pytest.skip(f.read(2000).strip())


def assert_matches(
    native: torch.Tensor,
    reference: torch.Tensor,
    dtype: torch.dtype,
    *,
    bound: torch.Tensor | None = None,
) -> None:
    """Native vs reference: a few ulps of the output dtype, plus an optional per-element
    bound for results whose accumulation order legitimately differs (GEMV)."""
    assert native.shape == reference.shape, (
        f"shape {tuple(native.shape)} != {tuple(reference.shape)}"
    )
    assert native.dtype == reference.dtype == dtype
    a, b = native.double(), reference.double()
    u = UNIT_ROUNDOFF[dtype]
    allowed = 4 * u * b.abs() + 64 * u * 2.0**-10 + (bound.double() if bound is not None else 0)
    both_nan = a.isnan() & b.isnan()
    bad = ~both_nan & ~((a - b).abs() <= allowed) & ~((a == b) & a.isinf())
    if bad.any():
        i = int(bad.flatten().nonzero()[0])
        raise AssertionError(
            f"{int(bad.sum())} of {a.numel()} elements differ; first at flat index {i}: "
            f"native {a.flatten()[i].item()!r}, reference {b.flatten()[i].item()!r}, "
            f"allowed {allowed.flatten()[i].item() if allowed.numel() > 1 else allowed!r}"
        )


def linear_error_bound(
    x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None
) -> torch.Tensor:
    """Elementwise bound on |native - reference| for act(x @ w.T + b).

    Both sides accumulate in fp32 in different orders (error ~ sqrt(K) * u32 * sum|x w|);
    the reference also rounds the GEMM result to the input dtype before the
    activation (<= one ulp of the dtype of sum|x w|).
    """
    dtype = x.dtype
    k = x.shape[-1]
    mag = x.abs().double() @ weight.abs().double().T
    if bias is not None:
        mag = mag + bias.abs().double()
    fp32_order = 16 * UNIT_ROUNDOFF[torch.float32] * max(k, 1) ** 0.5 * mag
    pre_rounding = 2 * UNIT_ROUNDOFF[dtype] * mag if dtype != torch.float32 else 0
    return fp32_order + pre_rounding


def rms_norm_error_bound(reference: torch.Tensor) -> torch.Tensor:
    """The mean of squares is an fp32 sum of `cols` terms in a different order on each
    side: a relative error of about sqrt(cols) * u32 in every output of the row."""
    cols = reference.shape[-1] if reference.dim() else 1
    return reference.abs().double() * 8 * UNIT_ROUNDOFF[torch.float32] * max(cols, 1) ** 0.5


def silu_error_bound(reference: torch.Tensor) -> torch.Tensor:
    """The native kernels evaluate exp() with their own vectorised polynomial (a few
    fp32 ulps) where torch uses SLEEF: allow 8 more fp32 ulps of the result."""
    return reference.abs().double() * 8 * UNIT_ROUNDOFF[torch.float32]


def copy_working_tree(root: Path) -> Path:
    """The working tree's files (tracked and untracked, not ignored), copied to ``root``:
    a build from it cannot see an edit made meanwhile, nor write into the checkout."""
    listed = run(["git", "-C", str(REPO), "ls-files", "-co", "--exclude-standard", "-z"])
    for name in filter(None, listed.stdout.split("\0")):
        if (REPO / name).is_file():
            (root / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(REPO / name, root / name)
    return root


def run(
    cmd: list[str],
    *,
    env: dict[str, str] | None = None,
    cwd: Path | None = None,
    timeout: float = 600,
) -> subprocess.CompletedProcess[str]:
    """Run a command; on failure the assertion shows the command and its whole output."""
    full_env = {**os.environ, **(env or {})}
    proc = subprocess.run(
        cmd, env=full_env, cwd=cwd, text=True, capture_output=True, timeout=timeout, check=False
    )
    assert proc.returncode == 0, (
        f"command failed with exit code {proc.returncode}: {' '.join(map(str, cmd))}\n"
        f"--- stdout ---\n{proc.stdout}\n--- stderr ---\n{proc.stderr}"
    )
    return proc


# The environment in each Debian root of scripts/bootstrap's (make_root).
ROOT_BASE = "/opt/venv"


def run_suite_in_root(
    root: Path, script: str, wheels: tuple[Path, ...], **env: str
) -> tuple[dict[str, object], str]:
    """Runs ``script`` (bash) in ``root``, a Debian root of scripts/bootstrap's, through
    scripts/in-root with ``env`` plus REPO and BASE (the root's environment). The script
    prints a check's JSON line, then ``== tests``, then a pytest run's output. Returns the
    JSON and pytest's summary line, after asserting that nothing failed."""
    skip_if_bootstrap_left_out(str(root.relative_to(REPO)))
    if not (root / ROOT_BASE.lstrip("/") / "pyvenv.cfg").is_file():  # its python links in the root
        pytest.fail(f"{root} is missing: run scripts/bootstrap (make test does)")
    if os.geteuid() != 0 or shutil.which("unshare") is None:
        pytest.fail(f"{root} runs through chroot: run the tests as root")
    for wheel in wheels:  # the root sees this checkout only
        assert REPO in wheel.parents, f"{wheel} is outside {REPO}, which the root cannot see"
    settings = {**env, "REPO": str(REPO), "BASE": ROOT_BASE}
    proc = run(
        [str(REPO / "scripts" / "in-root"), str(root), "env",
         *(f"{key}={value}" for key, value in settings.items()), "bash", "-c", script],
        timeout=1800,
    )  # fmt: skip
    check_line, _, tests = proc.stdout.partition("== tests\n")
    out: dict[str, object] = json.loads(check_line.strip().splitlines()[-1])
    summary = tests.strip().splitlines()[-1]
    counts = {kind: int(n) for n, kind in re.findall(r"(\d+) (\w+)", summary)}
    assert not any(counts.get(k) for k in ("failed", "error", "errors")), tests[-6000:]
    assert counts.get("passed", 0) > 0, tests[-3000:]
    return out, summary


def python_env(**overrides: str) -> dict[str, str]:
    """Environment for a child Python that must import the *installed* ptkit."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PTKIT_")}
    env.pop("PYTHONPATH", None)
    env.update(overrides)
    return env


def child_python(
    code: str,
    *,
    env: dict[str, str] | None = None,
    python: str = sys.executable,
    cwd: Path | None = None,
) -> subprocess.CompletedProcess[str]:
    return run([python, "-c", code], env=env or python_env(), cwd=cwd or Path("/"))


def fresh_venv(path: Path, base_python: Path) -> Path:
    """A new venv that sees ``base_python``'s packages (torch) through a .pth file.

    pip then counts torch as installed and does not download it again.
    """
    run([sys.executable, "-m", "venv", str(path)])
    python = path / "bin" / "python"
    site = run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"]
    ).stdout.strip()
    base_site = run(
        [str(base_python), "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"]
    ).stdout.strip()
    Path(site, "_base_env.pth").write_text(base_site + "\n")
    return python


def run_op_tests(python: Path | str, **env: str) -> subprocess.CompletedProcess[str]:
    """The native-vs-reference op tests (tests/integration/test_ops.py) in another
    interpreter or environment: another torch, another wheel, another ISA level."""
    return run(
        [
            str(python),
            "-m",
            "pytest",
            "-q",
            "-p",
            "no:cacheprovider",
            str(REPO / "tests" / "integration" / "test_ops.py"),
            "-k",
            "native_matches_reference and not every_isa_level",
        ],
        cwd=REPO,
        env=python_env(**env),
    )


def cmake_configure(
    source: Path, build: Path, *args: str, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """Configure a CMake project with the venv's CMake and Ninja, without the caller's
    PTKIT_* variables; returns the finished process (not checked: tests read errors)."""
    venv_bin = Path(sys.executable).parent
    cmd = [
        str(venv_bin / "cmake"),
        "-S",
        str(source),
        "-B",
        str(build),
        "-G",
        "Ninja",
        f"-DCMAKE_MAKE_PROGRAM={venv_bin / 'ninja'}",
        f"-DPython_EXECUTABLE={sys.executable}",
        *args,
    ]
    full_env = {k: v for k, v in os.environ.items() if not k.startswith("PTKIT_")}
    full_env.update(env or {})
    return subprocess.run(
        cmd, capture_output=True, text=True, timeout=300, env=full_env, check=False
    )


def env_holding_packages_of(path: Path, base_python: Path) -> Path:
    """A new venv that already *holds* ``base_python``'s packages (torch, pip …) but not
    ptkit, for installers that read only the environment's own site-packages (uv ignores
    .pth paths).

    Each package folder is a symlink (torch is gigabytes); each ``*.dist-info`` folder is a
    real copy, because that is what installers list and what they would change.
    """
    run([sys.executable, "-m", "venv", "--without-pip", str(path)])
    python = path / "bin" / "python"
    site = Path(
        run(
            [str(python), "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"]
        ).stdout.strip()
    )
    base_site = Path(
        run(
            [str(base_python), "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"]
        ).stdout.strip()
    )
    for entry in base_site.iterdir():
        if entry.name.startswith(("ptkit", "_ptkit", "__pycache__")) or entry.suffix == ".pth":
            continue
        if entry.name.endswith(".dist-info"):
            shutil.copytree(entry, site / entry.name)
        else:
            (site / entry.name).symlink_to(entry)
    return python


def make_wheel(
    folder: Path,
    name: str,
    version: str,
    *,
    tag: str = "py3-none-any",
    filename: str | None = None,
    metadata_name: str | None = None,
    metadata_version: str | None = None,
    wheel_tags: tuple[str, ...] | None = None,
    manifest_variant: str | None = None,
    extra: dict[str, bytes] | None = None,
) -> Path:
    """A small, valid (unless told otherwise) wheel written with zipfile, for index tests
    that need wheels ptkit did not build: other projects, and deliberately broken ones."""
    import base64
    import hashlib
    import zipfile

    dist = f"{name.replace('-', '_')}-{version}.dist-info"
    files = {
        f"{name.replace('-', '_')}/__init__.py": b"",
        f"{dist}/METADATA": (
            f"Metadata-Version: 2.4\nName: {metadata_name or name}\n"
            f"Version: {metadata_version or version}\nRequires-Python: >=3.10\n"
        ).encode(),
        f"{dist}/WHEEL": (
            "Wheel-Version: 1.0\nGenerator: ptkit-tests\nRoot-Is-Purelib: true\n"
            + "".join(f"Tag: {t}\n" for t in (wheel_tags or (tag,)))
        ).encode(),
    }
    if manifest_variant is not None:
        files[f"{name.replace('-', '_')}/_native/lib.manifest.json"] = (
            f'{{"schema_version": 1, "variant": "{manifest_variant}"}}'.encode()
        )
    files.update(extra or {})
    record = []
    for entry, data in files.items():
        digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
        record.append(f"{entry},sha256={digest},{len(data)}")
    files[f"{dist}/RECORD"] = ("\n".join([*record, f"{dist}/RECORD,,"]) + "\n").encode()
    path = folder / (filename or f"{name.replace('-', '_')}-{version}-{tag}.whl")
    folder.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(path, "w") as archive:
        for entry, data in files.items():
            archive.writestr(zipfile.ZipInfo(entry, (2020, 1, 1, 0, 0, 0)), data)
    return path


def wheel_holding_library(folder: Path, library: Path, manifest: bytes, tag: str) -> Path:
    """A ptkit_ops wheel tagged py3-none-``tag`` holding ``library`` and its ``manifest``
    under ptkit_ops/_native/, as a build writes them."""
    native = "ptkit_ops/_native"
    extra = {
        f"{native}/{library.name}": library.read_bytes(),
        f"{native}/{library.stem}.manifest.json": manifest,
    }
    return make_wheel(folder, "ptkit-ops", "0.1.0", tag=f"py3-none-{tag}", extra=extra)


def ptkit_from_source(*args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    """``python -m ptkit <args>`` from this checkout's src/ (not an installed ptkit)."""
    return subprocess.run(
        [sys.executable, "-m", "ptkit", *args],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(REPO / "src")},
        check=False,
        timeout=timeout,
    )


def cpu_lacks(level: str) -> tuple[str, ...]:
    """The CPU flags of ISA ``level`` (``x86-64-v3``) this machine lacks, by ptkit's own
    tables (the loader's REQUIRES_ISA rule); empty when it runs the level."""
    from ptkit.platforms import this_cpu
    from ptkit.platforms.required_isa import missing_cpu_flags, required_isa

    cpu = this_cpu()
    return missing_cpu_flags(required_isa(level, cpu.processor), cpu.features or ())


# out= mistakes: (op, make (positional args, out), message); the op's .out overload is
# what torch.ops.ptkit.<op>.out calls directly. CPU tensors: tests/integration/test_errors.py
# runs them as they are, tests/device/test_cuda_ops.py moves them to the GPU.
OUT_CASES = [
    (
        "rms_norm",
        lambda: ((torch.randn(2, 8), torch.randn(8), 1e-6), torch.empty(2, 7)),
        r"ptkit\.rms_norm: expected out of shape \[2, 8\], got \[2, 7\]",
    ),
    (
        "rms_norm",
        lambda: ((torch.randn(2, 8), torch.randn(8), 1e-6), torch.empty(2, 8, dtype=torch.float16)),
        r"ptkit\.rms_norm: expected out of dtype float32 \(the dtype of x\), got float16",
    ),
    (
        "silu_and_mul",
        lambda: ((torch.randn(4, 6),), torch.empty(3, 4).t()),
        r"ptkit\.silu_and_mul: expected a contiguous out, got strides \[1, 4\]: pass "
        r"out\.contiguous\(\) and copy back, or call without out=",
    ),
]
