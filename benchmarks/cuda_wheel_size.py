"""Size of the cu13 wheel and its CUDA library with and without fatbinary compression.

    python benchmarks/cuda_wheel_size.py [--out DIR]

Builds the cu13 variant twice (PTKIT_CUDA_COMPRESS_MODE = size, then none) with the
pip CUDA toolkit from scripts/bootstrap, in scratch build folders, and reports bytes.
Takes two full CUDA builds (several minutes on 2 cores); not part of the test suite.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def build(mode: str, out_dir: Path) -> Path:
    cuda_root = sorted(REPO.glob(".toolchains/cu13/lib/python*/site-packages/nvidia/cu*"))[-1]
    env = {**os.environ, "PTKIT_VARIANT": "cu13", "PTKIT_CUDA_ROOT": str(cuda_root)}
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "--no-build-isolation",
            "--no-deps",
            "-q",
            "-C",
            f"build-dir={REPO}/build/size-{mode}",
            "-C",
            f"cmake.define.PTKIT_CUDA_COMPRESS_MODE={mode}",
            "-w",
            str(out_dir),
            str(REPO),
        ],
        check=True,
        env=env,
    )
    (wheel,) = out_dir.glob("ptkit-*.whl")
    return wheel


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=REPO / "benchmarks" / "results")
    args = parser.parse_args()
    rows = {}
    for mode in ("size", "none"):
        with tempfile.TemporaryDirectory() as tmp:
            wheel = build(mode, Path(tmp))
            with zipfile.ZipFile(wheel) as z:
                lib = z.getinfo("ptkit/_native/libptkit_cuda.so")
                rows[mode] = {
                    "wheel_bytes": wheel.stat().st_size,
                    "cuda_library_bytes": lib.file_size,
                }
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "cuda_wheel_size.json").write_text(json.dumps(rows, indent=2))
    for mode, r in rows.items():
        print(
            f"--compress-mode={mode}: wheel {r['wheel_bytes'] / 1e6:.2f} MB, "
            f"libptkit_cuda.so {r['cuda_library_bytes'] / 1e6:.2f} MB"
        )


if __name__ == "__main__":
    main()
