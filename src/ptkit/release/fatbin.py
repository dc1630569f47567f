"""What GPU code a CUDA library really carries, from ``cuobjdump``, against its manifest.

Standard library only: the CMake install step runs it (``python -m ptkit.release.fatbin
check <manifest> --cuobjdump <path>``, ``PYTHONPATH`` at the package that holds the CMake
files) before ptkit is installed, and a mismatch fails the build. ``ptkit inspect`` and
the release audit use the same functions.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

from ptkit.backends import BACKENDS
from ptkit.backends.toolchain_cache import dev_toolchain_paths

__all__ = ["FatbinTargets", "find_cuobjdump", "list_cuda_targets"]

# "ELF file    1: libptkit_cuda.1.sm_90.cubin" / "PTX file    1: libptkit_cuda.1.sm_120.ptx";
# the CUDA backend says which names are targets.
_ENTRY = re.compile(r"^(ELF|PTX) file\s+\d+:\s+\S*?\.([a-z]+_[0-9a-z]+)\.(?:cubin|ptx)\s*$")


class FatbinTargets:
    """SASS (``sm_XY``) and PTX (``compute_XY``) targets found in a library."""

    def __init__(self, sass: set[str], ptx: set[str]) -> None:
        self.sass = sass
        self.ptx = ptx

    def __repr__(self) -> str:
        return f"FatbinTargets(sass={sorted(self.sass)}, ptx={sorted(self.ptx)})"


def find_cuobjdump(hint: str | None = None) -> str | None:
    """``hint``, else the cuobjdump beside each nvcc the CUDA backend finds
    (``PTKIT_CUDA_ROOT``, pip's ``nvidia-cuda-cuobjdump`` on ``sys.path``, ptkit's
    toolchain cache, a checkout's ``.toolchains/*``), else PATH's."""
    if hint and Path(hint).is_file():
        return hint
    paths = [*sys.path, *dev_toolchain_paths()]
    for candidate in BACKENDS["cuda"].toolkit_candidates(os.environ, paths):
        tool = candidate.root / "bin" / "cuobjdump"
        if tool.is_file():
            return str(tool)
    return shutil.which("cuobjdump")


def list_cuda_targets(library: Path, cuobjdump: str) -> FatbinTargets:
    proc = subprocess.run(
        [cuobjdump, "--list-elf", "--list-ptx", str(library)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    if proc.returncode != 0 and "does not contain device code" not in proc.stderr:
        raise RuntimeError(f"{cuobjdump} failed on {library}: {proc.stderr.strip()}")
    sass, ptx = set(), set()
    for line in proc.stdout.splitlines():
        match = _ENTRY.match(line.strip())
        if match and BACKENDS["cuda"].target_problem(match.group(2)) is None:
            kind, arch = match.groups()
            if kind == "ELF":
                sass.add(arch)
            else:
                ptx.add(arch.replace("sm_", "compute_"))
    return FatbinTargets(sass, ptx)


def check_manifest(manifest_path: Path, cuobjdump: str) -> list[str]:
    """Problems where the library's fatbinary and its manifest disagree."""
    manifest = json.loads(manifest_path.read_text())
    library = manifest_path.parent / manifest["library"]
    found = list_cuda_targets(library, cuobjdump)
    want_sass = set(manifest["targets"].get("sass", []))
    want_ptx = set(manifest["targets"].get("ptx", []))
    problems = []
    if found.sass != want_sass:
        problems.append(
            f"SASS in {library.name}: {sorted(found.sass)}; manifest says {sorted(want_sass)}"
        )
    if found.ptx != want_ptx:
        problems.append(
            f"PTX in {library.name}: {sorted(found.ptx)}; manifest says {sorted(want_ptx)}"
        )
    return problems


def _main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="fatbin.py")
    sub = parser.add_subparsers(dest="command", required=True)
    check = sub.add_parser("check", help="compare a CUDA library's fatbinary with its manifest")
    check.add_argument("manifest", type=Path)
    check.add_argument("--cuobjdump")
    args = parser.parse_args(argv)
    tool = find_cuobjdump(args.cuobjdump)
    if tool is None:
        from ptkit.release.toolchains import cuobjdump_missing

        print(cuobjdump_missing(), file=sys.stderr)
        return 2
    problems = check_manifest(args.manifest, tool)
    if problems:
        print("\n".join(problems), file=sys.stderr)
        return 1
    m = json.loads(args.manifest.read_text())
    print(
        f"fatbinary audit: {m['library']} holds SASS {', '.join(m['targets']['sass'])}; "
        f"PTX {', '.join(m['targets']['ptx']) or 'none'} (as in its manifest)"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(_main(sys.argv[1:]))
