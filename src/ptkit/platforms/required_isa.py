"""CPU instruction-set levels a whole library may require (``REQUIRES_ISA`` of
``ptkit_add_kernel_library``): its code is compiled with the level's flags everywhere, so
it may only be loaded on a CPU that has the level.

This is not the run-time choice between ISA copies (``ISA_SOURCES``, the ``IsaLevel``
table of :mod:`ptkit.platforms.base`): a library that requires ``avx512-bf16`` has no
baseline copy, and the loader skips it, with the reason, on a CPU without AVX512-BF16
(the reference, or another library, serves its ops there).

Each level says what the CPU must report (Linux ``/proc/cpuinfo`` flag names, which is
where ``Platform.cpu_features`` reads them) and the compiler flags that use it. The levels
that are also run-time choices (``x86-64-v2`` … ``v4``, ``avx512-bf16``, ``amx-bf16``)
take their compiler flags from the ``IsaLevel`` table, so the two tables cannot disagree.
Standard library only.
"""

from __future__ import annotations

import dataclasses
import difflib
from collections.abc import Iterable, Mapping

from ptkit.platforms.base import isa_levels

__all__ = ["RequiredIsa", "missing_cpu_flags", "required_isa", "required_isa_levels"]


@dataclasses.dataclass(frozen=True)
class RequiredIsa:
    """One level a library may require."""

    name: str
    """``avx512-bf16``, ``x86-64-v4``: the spelling of ``REQUIRES_ISA`` and the manifest."""
    cpu_flags: tuple[str, ...]
    """What a CPU must report to run it (``/proc/cpuinfo`` names: ``avx512_bf16``)."""
    flags: dict[str, tuple[str, ...]]
    """Compiler dialect (``gnu``, ``msvc``) -> its flags."""
    has_it: str
    """Which CPUs have it, for the loader's message."""


# The x86-64 psABI levels, in /proc/cpuinfo's names (lzcnt is "abm" there).
_X86_64_V2 = ("cx16", "lahf_lm", "popcnt", "pni", "sse4_1", "sse4_2", "ssse3")
_X86_64_V3 = (*_X86_64_V2, "abm", "avx", "avx2", "bmi1", "bmi2", "f16c", "fma", "movbe", "xsave")
_X86_64_V4 = (*_X86_64_V3, "avx512f", "avx512bw", "avx512cd", "avx512dq", "avx512vl")
_AVX512_BF16 = (*_X86_64_V4, "avx512_bf16")
# The levels of the IsaLevel table (ptkit.platforms.base), with what a CPU must report.
_X86_64_DISPATCH_LEVELS = {
    "x86-64-v2": (_X86_64_V2, "every x86-64 CPU since about 2009"),
    "x86-64-v3": (_X86_64_V3, "Intel Haswell and AMD Zen or newer"),
    "x86-64-v4": (_X86_64_V4, "Intel Skylake-SP, Ice Lake and AMD Zen 4 or newer"),
    "avx512-bf16": (_AVX512_BF16, "Intel Cooper Lake, Sapphire Rapids and AMD Zen 4 or newer"),
    "amx-bf16": ((*_AVX512_BF16, "amx_tile", "amx_bf16"), "Intel Sapphire Rapids or newer (Xeon)"),
}
# Features beyond the psABI levels that kernels commonly require. MSVC has no flag for
# most of them (its intrinsics need none): an empty tuple.
_X86_64_FEATURES = (
    RequiredIsa(
        "avx512-fp16",
        ("avx512f", "avx512bw", "avx512vl", "avx512_fp16"),
        {"gnu": ("-mavx512f", "-mavx512bw", "-mavx512vl", "-mavx512fp16"), "msvc": ("/arch:AVX512",)},
        "Intel Sapphire Rapids or newer",
    ),
    RequiredIsa(
        "avx512-vnni",
        ("avx512f", "avx512vl", "avx512_vnni"),
        {"gnu": ("-mavx512f", "-mavx512vl", "-mavx512vnni"), "msvc": ("/arch:AVX512",)},
        "Intel Cascade Lake and AMD Zen 4 or newer",
    ),
    RequiredIsa(
        "avx-vnni",
        ("avx2", "avx_vnni"),
        {"gnu": ("-mavx2", "-mavxvnni"), "msvc": ("/arch:AVX2",)},
        "Intel Alder Lake, Sapphire Rapids and AMD Zen 5 or newer",
    ),
    RequiredIsa(
        "amx-int8",
        ("amx_tile", "amx_int8"),
        {"gnu": ("-mamx-tile", "-mamx-int8"), "msvc": ()},
        "Intel Sapphire Rapids or newer (Xeon)",
    ),
)  # fmt: skip
# Arm: /proc/cpuinfo's "Features" names.
_AARCH64_DISPATCH_LEVELS = {
    "neon-bf16": (("asimd", "bf16"), "Armv8.6 CPUs and Armv8.2 ones with BF16 (Neoverse V1/N2, Graviton 3, Apple M2 or newer)"),
}  # fmt: skip
_AARCH64 = (
    RequiredIsa("dotprod", ("asimddp",), {"gnu": ("-march=armv8.2-a+dotprod",)}, "Armv8.2 CPUs with DotProd (Neoverse N1 or newer)"),
    RequiredIsa("bf16", ("bf16",), {"gnu": ("-march=armv8.6-a+bf16",)}, "Armv8.6 CPUs (Neoverse V1/N2, Graviton 3 or newer)"),
    RequiredIsa("i8mm", ("i8mm",), {"gnu": ("-march=armv8.6-a+i8mm",)}, "Armv8.6 CPUs (Neoverse V1/N2, Graviton 3 or newer)"),
    RequiredIsa("sve", ("sve",), {"gnu": ("-march=armv8.2-a+sve",)}, "Neoverse V1, Graviton 3, A64FX or newer"),
    RequiredIsa("sve2", ("sve2",), {"gnu": ("-march=armv9-a+sve2",)}, "Armv9 CPUs (Neoverse V2/N2, Graviton 4, Grace)"),
)  # fmt: skip


# MSVC builds no run-time copy of the levels above x86-64-v4 (the kernels' paths for them
# are GNU intrinsics; ptkit.platforms.base), but a whole library that requires one is
# compiled as x86-64-v4 code there: MSVC's intrinsics need no flag of their own.
_MSVC_REQUIRED = {"avx512-bf16": ("/arch:AVX512",), "amx-bf16": ("/arch:AVX512",)}


def _with_dispatch_levels(
    processor: str,
    dispatch_levels: Mapping[str, tuple[tuple[str, ...], str]],
    features: tuple[RequiredIsa, ...],
) -> tuple[RequiredIsa, ...]:
    flags = {level.name: level.flags for level in isa_levels(processor)}
    dispatch = tuple(
        RequiredIsa(name, cpu_flags, _required_flags(name, flags[name]), has_it)
        for name, (cpu_flags, has_it) in dispatch_levels.items()
    )
    return (*dispatch, *features)


def _required_flags(name: str, flags: dict[str, tuple[str, ...]]) -> dict[str, tuple[str, ...]]:
    msvc = _MSVC_REQUIRED.get(name)
    return flags if msvc is None or "msvc" in flags else {**flags, "msvc": msvc}


_X86_64 = _with_dispatch_levels("x86_64", _X86_64_DISPATCH_LEVELS, _X86_64_FEATURES)
_AARCH64_ALL = _with_dispatch_levels("aarch64", _AARCH64_DISPATCH_LEVELS, _AARCH64)
_PROCESSORS: dict[str, tuple[RequiredIsa, ...]] = {
    "x86_64": _X86_64,
    "amd64": _X86_64,
    "aarch64": _AARCH64_ALL,
    "arm64": _AARCH64_ALL,
}


def required_isa_levels(processor: str) -> dict[str, RequiredIsa]:
    """The levels a library may require on ``processor`` (CMake's ``CMAKE_SYSTEM_PROCESSOR``
    or ``platform.machine()``), by name; {} for a processor ptkit has none for."""
    return {level.name: level for level in _PROCESSORS.get(processor.lower(), ())}


def required_isa(name: str, processor: str) -> RequiredIsa:
    """The level ``name`` on ``processor``; ``ValueError`` naming the known ones (and the
    likely one) for a level that processor does not have."""
    known = required_isa_levels(processor)
    if name in known:
        return known[name]
    if not known:
        raise ValueError(
            f"REQUIRES_ISA {name}: ptkit knows no CPU ISA levels for processor {processor!r}; "
            "drop REQUIRES_ISA there (the library then loads on every CPU of it)"
        )
    close = difflib.get_close_matches(name, sorted(known), n=1)
    hint = f" (did you mean {close[0]!r}?)" if close else ""
    raise ValueError(
        f"REQUIRES_ISA {name}: not a CPU ISA level of {processor}{hint}; known: {', '.join(known)}"
    )


def missing_cpu_flags(level: RequiredIsa, features: Iterable[str]) -> tuple[str, ...]:
    """The CPU flags of ``level`` that a CPU reporting ``features`` lacks."""
    have = set(features)
    return tuple(flag for flag in level.cpu_flags if flag not in have)
