"""PTK4xx: shared libraries and installed distributions beside torch."""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from pathlib import PurePath

from ptkit.doctor.checks.base import Problem, check
from ptkit.doctor.model import Severity, TorchInstall
from ptkit.doctor.probes.distributions import normalize

THEROCK_INDEX = "https://rocm.nightlies.amd.com/v2/<gfx family>/"


def _soname_major(path: str) -> str | None:
    match = re.search(r"libcudart\.so\.(\d+)", PurePath(path).name)
    return match.group(1) if match else None


@check(
    "PTK401",
    "multiple-cuda-runtimes",
    Severity.WARNING,
    summary="more than one libcudart in torch's folders and on library paths (an error when "
    "their CUDA majors differ)",
    fix="keep the one torch ships with (its nvidia/*/lib folder): remove the other CUDA "
    "folder from LD_LIBRARY_PATH, or uninstall the extra nvidia-cuda-runtime package",
)
def two_cudarts(torch: TorchInstall) -> Iterator[Problem]:
    # Links of one copy (libcudart.so.13 -> libcudart.so.13.0.96) share a folder.
    folders: dict[str, list[str]] = {}
    for path in torch.cuda_runtimes:
        folders.setdefault(str(PurePath(path).parent), []).append(path)
    if len(folders) < 2:
        return
    majors = {m for m in map(_soname_major, torch.cuda_runtimes) if m}
    found = "; ".join(", ".join(paths) for paths in folders.values())
    yield Problem(
        f"{len(folders)} copies of libcudart (CUDA {', '.join(sorted(majors)) or '?'}) in "
        f"torch's folders and on library paths: {found}; which one loads depends on order",
        severity=Severity.ERROR if len(majors) > 1 else None,
    )


@check(
    "PTK402",
    "rocm-placeholder-package",
    Severity.ERROR,
    summary="PyPI's placeholder rocm==0.1.0 instead of AMD's TheRock SDK",
    fix=f"pip uninstall rocm && pip install 'rocm[libraries,devel]' --index-url "
    f"{THEROCK_INDEX} (TheRock's index for your GPU family)",
)
def rocm_placeholder(distributions: Mapping[str, str]) -> Iterator[Problem]:
    versions = {normalize(name): version for name, version in distributions.items()}
    if versions.get("rocm", "").strip() == "0.1.0":
        yield Problem(
            "the installed `rocm` 0.1.0 is PyPI's placeholder package, not AMD's ROCm SDK "
            "(TheRock): it holds no ROCm libraries"
        )
