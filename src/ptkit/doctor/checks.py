"""``ptkit doctor``'s checks: small units, facts in, findings out.

Each ``Check`` has a stable ID (never reused, never renumbered), a default severity,
the ``Facts`` fields it ``needs`` and a function of the facts. ``run_checks`` skips a
check whose facts are missing (its probe failed or was not run) and says which fact,
so a check body may assume its needs are there. IDs by group:

- ``PTK1xx`` torch and Python; ``PTK2xx`` drivers and devices; ``PTK3xx`` the
  installed ptkit (variant, libraries, the ``--smoke`` run); ``PTK4xx`` shared
  libraries and packages; ``PTK9xx`` the doctor's own probes.

Device coverage uses the loader's rule modules (``ptkit.backends.cuda``,
``hip_targets``, ``xpu_targets``) on the installed manifests' targets, and the variant
to recommend comes from ``ptkit.selection`` (what ``ptkit select`` says): neither rule
is re-implemented here. Standard library only, valid on CPython 3.10; no torch.
"""

from __future__ import annotations

import difflib
import functools
import re
from collections.abc import Callable, Iterable, Sequence
from pathlib import PurePath

from ptkit.backends import Device, backend_for_device_kind, version_pair
from ptkit.backends.cuda import min_driver_branch
from ptkit.doctor.model import (
    Check,
    Facts,
    Finding,
    LibraryFacts,
    PackageFacts,
    Severity,
    TorchInstall,
)
from ptkit.hardware.facts import Machine

__all__ = [
    "CHECKS",
    "UnknownCheckError",
    "check_by_id",
    "resolve_ids",
    "run_checks",
]

PYTORCH_INSTALL = "https://pytorch.org/get-started/locally/"
THEROCK_INDEX = "https://rocm.nightlies.amd.com/v2/<gfx family>/"


class UnknownCheckError(ValueError):
    """``--select``/``--ignore`` named a check that does not exist."""


# --- helpers shared by the checks -------------------------------------------------------


def _torch_installed(torch: TorchInstall) -> bool:
    return torch.location is not None


def _torch_backend(torch: TorchInstall) -> str:
    """The accelerator backend torch was built for: hip, cuda, xpu or cpu."""
    if torch.hip:
        return "hip"
    if torch.cuda:
        return "cuda"
    if torch.xpu:
        return "xpu"
    return "cpu"


def _torch_label(torch: TorchInstall) -> str:
    return f"torch {torch.version or '(unknown version)'}"


def _package_label(package: PackageFacts) -> str:
    variant = f", variant {package.variant}" if package.variant else ""
    return f"{package.name} {package.version}{variant}"


@functools.lru_cache(maxsize=4)  # several checks ask; the recipes are read once
def _recommended(machine: Machine) -> tuple[str, str | None] | None:
    """What ``ptkit select`` recommends here: (variant, torch index URL); None when the
    recipes cannot be read (the fix then names the command instead of its answer)."""
    try:
        from ptkit.selection import load_all_recipes, recipes_dir, select_variant

        selection = select_variant(
            machine, load_all_recipes(recipes_dir()), index_url=None, environ={}
        )
    except Exception:  # a broken recipe folder must not break an unrelated check
        return None
    return selection.variant, selection.torch_index_url


def _select_fix(machine: Machine) -> str:
    choice = _recommended(machine)
    if choice is None:
        return "install the variant that `ptkit select` names for this machine"
    return (
        f"install the {choice[0]} variant of ptkit, which `ptkit select` names for this "
        "machine (`ptkit select --index-url <index>` prints the pip/uv commands)"
    )


def _torch_index_fix(machine: Machine, kind: str, label: str) -> str:
    """Install torch's ``label`` build, from the torch index of the variant ``ptkit select``
    names when that index is one of ``kind`` (``cu``, ``rocm``)."""
    choice = _recommended(machine)
    url = choice[1] if choice and choice[1] and "download.pytorch.org" in choice[1] else None
    if url and f"/{kind}" in url:
        return (
            f"install torch's {label} build: pip install --force-reinstall torch --index-url {url}"
        )
    return f"install torch's {label} build (pick it at {PYTORCH_INSTALL})"


# --- 1xx: torch and Python --------------------------------------------------------------


def _torch_missing(facts: Facts) -> list[Finding]:
    assert facts.torch is not None
    if _torch_installed(facts.torch):
        return []
    python = facts.python.executable if facts.python else "this Python"
    fix = (
        f"install torch (pick the build at {PYTORCH_INSTALL}; `ptkit select` names ptkit's variant)"
    )
    choice = _recommended(facts.machine) if facts.machine is not None else None
    if choice is not None and choice[1]:
        fix = (
            f"install torch for the {choice[0]} variant `ptkit select` names here: "
            f"pip install torch --index-url {choice[1]}"
        )
    return [
        Finding(
            "PTK101",
            Severity.ERROR,
            f"torch is not installed for {python}: ptkit's ops need it (import ptkit fails)",
            fix,
        )
    ]


def _torch_broken(facts: Facts) -> list[Finding]:
    torch = facts.torch
    assert torch is not None
    if not _torch_installed(torch) or not torch.problems:
        return []
    return [
        Finding(
            "PTK102",
            Severity.ERROR,
            f"torch at {torch.location} looks broken: {'; '.join(torch.problems)}",
            "reinstall it: pip install --force-reinstall torch (or remove the stray `torch` "
            "folder from PYTHONPATH/sys.path); `ptkit doctor --smoke` shows the import error",
        )
    ]


def _torch_import_fails(facts: Facts) -> list[Finding]:
    smoke = facts.smoke
    assert smoke is not None
    if smoke.torch_imported:
        return []
    return [
        Finding(
            "PTK103",
            Severity.ERROR,
            f"`import torch` failed in the --smoke child process: {smoke.error or 'no error line'}",
            "fix or reinstall torch (pip install --force-reinstall torch); run "
            "`python -c 'import torch'` to see the whole traceback",
        )
    ]


def _torch_cpu_on_nvidia(facts: Facts) -> list[Finding]:
    torch, machine = facts.torch, facts.machine
    assert torch is not None
    assert machine is not None
    if not _torch_installed(torch) or not machine.nvidia or _torch_backend(torch) != "cpu":
        return []
    gpus = ", ".join(sorted({g.name for g in machine.nvidia}))
    return [
        Finding(
            "PTK104",
            Severity.WARNING,
            f"{_torch_label(torch)} is a CPU build but this machine has "
            f"{len(machine.nvidia)} NVIDIA GPU(s) ({gpus}): nothing runs on them",
            _torch_index_fix(machine, "cu", "CUDA"),
        )
    ]


def _torch_without_rocm_on_amd(facts: Facts) -> list[Finding]:
    torch, machine = facts.torch, facts.machine
    assert torch is not None
    assert machine is not None
    if not _torch_installed(torch) or not machine.amd or machine.nvidia or torch.hip:
        return []
    gpus = ", ".join(sorted({f"{g.name} ({g.gfx_target})" for g in machine.amd}))
    built = "a CUDA build" if torch.cuda else "a CPU build"
    return [
        Finding(
            "PTK105",
            Severity.WARNING,
            f"{_torch_label(torch)} is {built}, not a ROCm build, but this machine has "
            f"AMD GPU(s) {gpus}: nothing runs on them",
            _torch_index_fix(machine, "rocm", "ROCm"),
        )
    ]


def _compile_unavailable(facts: Facts) -> list[Finding]:
    torch = facts.torch
    assert torch is not None
    if not _torch_installed(torch) or torch.compile_supported is not False:
        return []
    python = facts.python.version if facts.python else "this Python"
    return [
        Finding(
            "PTK106",
            Severity.WARNING,
            f"torch.compile is unavailable with {_torch_label(torch)} on Python {python}: "
            f"{torch.compile_reason or 'no reason given'}",
            "use a Python that torch.compile supports (e.g. CPython 3.13.3+ or 3.12), or keep "
            "ptkit.compile(), which runs the model eagerly with one warning",
        )
    ]


def _gil_re_enabled(facts: Facts) -> list[Finding]:
    python = facts.python
    assert python is not None
    if not python.free_threaded or python.gil_enabled is not True:
        return []
    return [
        Finding(
            "PTK107",
            Severity.WARNING,
            f"Python {python.version} is free-threaded but the GIL is enabled at run time "
            "(PYTHON_GIL=1, -X gil=1, or an extension imported without free-threading support)",
            "unset PYTHON_GIL / -X gil=1; run `python -X gil=0 -W default -c 'import torch, "
            "ptkit'` to see which module re-enables it, and upgrade that module",
        )
    ]


def _gil_re_enabled_by_import(facts: Facts) -> list[Finding]:
    python, smoke = facts.python, facts.smoke
    assert python is not None
    assert smoke is not None
    if not python.free_threaded or not smoke.torch_imported or smoke.gil_enabled is not True:
        return []
    if python.gil_enabled is True:
        return []  # already PTK107: enabled before torch came in
    return [
        Finding(
            "PTK108",
            Severity.WARNING,
            f"free-threaded Python {python.version}: importing torch and ptkit in the --smoke "
            "child re-enabled the GIL (an extension module without free-threading support)",
            "run `python -X gil=0 -W default -c 'import torch, ptkit'`: the RuntimeWarning names "
            "the module; upgrade it to a free-threaded (cp3XXt) build",
        )
    ]


# --- 2xx: drivers and devices -----------------------------------------------------------


def _driver_too_old(facts: Facts) -> list[Finding]:
    torch, machine = facts.torch, facts.machine
    assert torch is not None
    assert machine is not None
    if not _torch_installed(torch) or _torch_backend(torch) != "cuda" or not machine.nvidia:
        return []
    need_cuda = version_pair(torch.cuda)
    if need_cuda is None:
        return []
    branch = min_driver_branch(need_cuda[0])
    need = f"driver >= {branch}" if branch else f"a driver for CUDA {need_cuda[0]}.x"
    # CUDA's minor-version compatibility: any 13.x runtime runs on a 13.0 driver.
    have = machine.cuda_driver_version
    if machine.nvidia_driver is None and have is None:
        return [
            Finding(
                "PTK201",
                Severity.ERROR,
                f"{_torch_label(torch)} needs CUDA {torch.cuda} but no NVIDIA driver is loaded "
                f"for the {len(machine.nvidia)} NVIDIA GPU(s) (no /proc/driver/nvidia/version)",
                f"install the NVIDIA driver ({need}) and reboot or load the nvidia module",
            )
        ]
    if have is None or have[0] >= need_cuda[0]:
        return []
    return [
        Finding(
            "PTK201",
            Severity.ERROR,
            f"NVIDIA driver {machine.nvidia_driver or '?'} supports CUDA {have[0]}.{have[1]} "
            f"(from {machine.cuda_driver_source or 'unknown'}), but {_torch_label(torch)} "
            f"needs CUDA {torch.cuda}: torch.cuda.is_available() is False",
            f"upgrade the NVIDIA driver to {need}, or install a torch built for CUDA "
            f"{have[0]}.x ({PYTORCH_INSTALL})",
        )
    ]


def _coverage(
    kind: str, device: Device, libraries: Sequence[LibraryFacts], machine: Machine
) -> tuple[bool, str] | None:
    """Whether one of ``libraries`` runs on ``device``, by the loader's rules; None when it
    cannot be known (an unknown compute capability: PTK902 shows why)."""
    backend = backend_for_device_kind(kind)
    mine = [lib for lib in libraries if lib.backend == backend.name]
    if not mine:
        return False, f"it has no {_BACKEND_NAMES[backend.name]} library"
    if backend.name == "cuda" and device.arch is None:
        return None
    hows = []
    for lib in mine:
        result = backend.coverage(
            device,
            lib.targets,
            toolkit_version=version_pair(lib.toolkit),
            driver_version=machine.cuda_driver_version,
        )
        if result.covered:
            return True, result.how
        hows.append(f"{lib.library}: {result.how}")
    return False, "; ".join(hows)


def _device_not_covered(facts: Facts) -> list[Finding]:
    machine, packages = facts.machine, facts.packages
    assert machine is not None
    assert packages is not None
    devices: list[tuple[str, str, Device]] = [
        *(
            (
                f"nvidia:{g.index}",
                f"{g.name}, {g.arch or 'sm_?'}",
                Device(f"nvidia:{g.index}", g.name, g.arch),
            )
            for g in machine.nvidia
        ),
        *(
            (
                f"amd:{g.node}",
                f"{g.name}, {g.gfx_target}",
                Device(f"amd:{g.node}", g.name, g.gfx_target),
            )
            for g in machine.amd
        ),
        # Only Intel GPUs of a family torch's XPU build supports count (as in ptkit select).
        *(
            (
                f"intel:{i}",
                f"{g.name}, {g.family}",
                Device(f"intel:{i}", g.name, g.family, g.pci_device_id),
            )
            for i, g in enumerate(machine.intel)
            if g.family
        ),
        *(
            (f"apple:{i}", g.chip, Device(f"apple:{i}", g.chip, None))
            for i, g in enumerate(machine.apple)
        ),
    ]
    findings = []
    for package in packages:
        if not package.libraries:
            continue  # PTK301 says so for ptkit; no native code means nothing to cover
        # One finding per package and reason, listing the devices it applies to.
        uncovered: dict[str, list[str]] = {}
        for label, what, gpu in devices:
            result = _coverage(label.split(":")[0], gpu, package.libraries, machine)
            if result is not None and not result[0]:
                uncovered.setdefault(result[1], []).append(f"{label} ({what})")
        for how, labels in uncovered.items():
            findings.append(
                Finding(
                    "PTK202",
                    Severity.WARNING,
                    f"{', '.join(labels)} not covered by the installed {_package_label(package)}"
                    f" ({how}): its ops run their reference implementation there",
                    _select_fix(machine)
                    if package.name == "ptkit"
                    else f"install the {package.name} build for this GPU",
                )
            )
    return findings


# --- 3xx: the installed ptkit -----------------------------------------------------------


def _ptkit_no_native(facts: Facts) -> list[Finding]:
    packages = facts.packages
    assert packages is not None
    return [
        Finding(
            "PTK301",
            Severity.WARNING,
            f"{_package_label(p)} at {p.location} has no native library (no *.manifest.json "
            "in ptkit/_native/): every op runs its reference implementation",
            "install a built ptkit wheel (pip install --force-reinstall ptkit from your index); "
            "a source checkout on PYTHONPATH has no native library",
        )
        for p in packages
        if p.name == "ptkit" and not p.libraries
    ]


_BACKEND_NAMES = {"cuda": "CUDA", "hip": "ROCm/HIP", "xpu": "XPU", "cpu": "CPU", "metal": "Metal"}


def _variant_mismatch(facts: Facts) -> list[Finding]:
    torch, packages = facts.torch, facts.packages
    assert torch is not None
    assert packages is not None
    if not _torch_installed(torch):
        return []
    have = _torch_backend(torch)
    findings = []
    for package in packages:
        for lib in package.libraries:
            problem = None
            if lib.backend in ("cuda", "hip", "xpu") and lib.backend != have:
                problem = (
                    f"{lib.library} is a {_BACKEND_NAMES[lib.backend]} library but "
                    f"{_torch_label(torch)} is a {_BACKEND_NAMES[have]} build"
                )
            elif lib.backend in ("cuda", "hip"):
                runtime = torch.cuda if lib.backend == "cuda" else torch.hip
                built, runs = version_pair(lib.toolkit), version_pair(runtime)
                if built and runs and built[0] != runs[0]:
                    name = _BACKEND_NAMES[lib.backend]
                    problem = (
                        f"{lib.library} was built with {name} {built[0]}.{built[1]} but "
                        f"{_torch_label(torch)} uses {name} {runtime}: the major versions differ"
                    )
            if problem:
                findings.append(
                    Finding(
                        "PTK302",
                        Severity.ERROR,
                        f"{_package_label(package)} does not match torch: {problem}; the "
                        "loader skips it and the reference serves",
                        "install the ptkit variant for this torch (or the torch this variant "
                        "was built for); `ptkit select` names the variant for this machine",
                    )
                )
    return findings


def _library_failed(facts: Facts) -> list[Finding]:
    packages = facts.packages
    assert packages is not None
    return [
        Finding(
            "PTK303",
            Severity.ERROR,
            f"{_package_label(p)}: the loader would fail {lib.library} ({lib.backend}): "
            f"{lib.reason}",
            f"reinstall it: pip install --force-reinstall --no-deps '{p.name}=={p.version}'",
        )
        for p in packages
        for lib in p.libraries
        if lib.status == "failed"
    ]


def _library_skipped(facts: Facts) -> list[Finding]:
    packages, torch = facts.packages, facts.torch
    assert packages is not None
    assert torch is not None
    if not _torch_installed(torch) or torch.problems:
        return []  # every library is skipped then: PTK101/PTK102 say why, once
    return [
        Finding(
            "PTK304",
            Severity.INFO,
            f"{_package_label(p)}: {lib.library} ({lib.backend}) is skipped here: {lib.reason}",
            "nothing to do if this is expected (e.g. PTKIT_DISABLE_NATIVE, no such device); "
            "otherwise see the other findings and `ptkit explain`",
        )
        for p in packages
        for lib in p.libraries
        if lib.status == "skipped"
    ]


def _smoke_mismatch(facts: Facts) -> list[Finding]:
    smoke = facts.smoke
    assert smoke is not None
    findings = []
    for row in smoke.rows:
        if row.ok:
            continue
        error = "n/a" if row.max_error is None else f"{row.max_error:.3g}"
        findings.append(
            Finding(
                "PTK305",
                Severity.ERROR,
                f"--smoke: {row.op} on {row.device} ({row.dtype}, {row.implementation}) does "
                f"not match the reference: max |error| {error}"
                + (f"; {row.problem}" if row.problem else ""),
                "report it with `ptkit doctor --smoke --json` attached; meanwhile "
                f"PTKIT_DISABLE_NATIVE={_device_backend(row.device)} runs the reference there",
            )
        )
    return findings


def _device_backend(device: str) -> str:
    kind = device.split(":")[0]
    return {"mps": "metal", "cuda": "cuda,hip"}.get(kind, kind)


def _smoke_failed(facts: Facts) -> list[Finding]:
    smoke = facts.smoke
    assert smoke is not None
    if not smoke.torch_imported or smoke.error is None:
        return []  # PTK103 covers a failed torch import
    return [
        Finding(
            "PTK306",
            Severity.ERROR,
            f"--smoke: torch imported but the run failed: {smoke.error}",
            "run `python -c 'import ptkit'` to see the whole traceback; reinstall ptkit "
            "(pip install --force-reinstall ptkit) if it is an import error",
        )
    ]


# --- 4xx: shared libraries and packages -------------------------------------------------


def _soname_major(path: str) -> str | None:
    match = re.search(r"libcudart\.so\.(\d+)", PurePath(path).name)
    return match.group(1) if match else None


def _two_cudarts(facts: Facts) -> list[Finding]:
    torch = facts.torch
    assert torch is not None
    # Links of one copy (libcudart.so.13 -> libcudart.so.13.0.96) share a folder.
    folders: dict[str, list[str]] = {}
    for path in torch.cuda_runtimes:
        folders.setdefault(str(PurePath(path).parent), []).append(path)
    if len(folders) < 2:
        return []
    majors = {m for m in map(_soname_major, torch.cuda_runtimes) if m}
    severity = Severity.ERROR if len(majors) > 1 else Severity.WARNING
    found = "; ".join(", ".join(paths) for paths in folders.values())
    return [
        Finding(
            "PTK401",
            severity,
            f"{len(folders)} copies of libcudart (CUDA {', '.join(sorted(majors)) or '?'}) in "
            f"torch's folders and on library paths: {found}; which one loads depends on order",
            "keep the one torch ships with (its nvidia/*/lib folder): remove the other CUDA "
            "folder from LD_LIBRARY_PATH, or uninstall the extra nvidia-cuda-runtime package",
        )
    ]


def _normalize(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _rocm_placeholder(facts: Facts) -> list[Finding]:
    distributions = facts.distributions
    assert distributions is not None
    versions = {_normalize(name): version for name, version in distributions.items()}
    version = versions.get("rocm")
    if version is None or version.strip() != "0.1.0":
        return []
    return [
        Finding(
            "PTK402",
            Severity.ERROR,
            "the installed `rocm` 0.1.0 is PyPI's placeholder package, not AMD's ROCm SDK "
            "(TheRock): it holds no ROCm libraries",
            f"pip uninstall rocm && pip install 'rocm[libraries,devel]' --index-url "
            f"{THEROCK_INDEX} (TheRock's index for your GPU family)",
        )
    ]


# --- 9xx: the doctor's own probes -------------------------------------------------------


def _problem_fix(problem: str) -> str:
    text = problem.lower()
    if "nvidia-smi" in text and ("no answer" in text or "timed out" in text):
        return (
            "nvidia-smi hangs: the driver or a GPU is stuck; check `dmesg`, reset the GPU "
            "(nvidia-smi -r) or reboot; the doctor used /proc and PCI ids instead"
        )
    if "nvidia-smi" in text:
        return (
            "nvidia-smi answers garbage: check `command -v nvidia-smi` (a wrapper or stale "
            "copy on PATH?) and reinstall the NVIDIA driver utilities"
        )
    if "nvml" in text:
        return "NVML failed: reinstall nvidia-ml-py or the NVIDIA driver; check `dmesg`"
    if "no answer" in text or "timed out" in text or "timeout" in text:
        return "a probe hung: rerun with a larger --timeout, and find what blocks it"
    if "does not list it" in text or "dmesg" in text:
        return "see the kernel log (dmesg) for why the driver left the GPU out"
    return "look at the named file or command; rerun with PTKIT_DOCTOR_DEBUG=1 for details"


def _probe_failed(facts: Facts) -> list[Finding]:
    return [
        Finding(
            "PTK901",
            Severity.WARNING,
            f"the doctor's {name} probe failed: {problem}; its facts are missing and the "
            "checks that need them were skipped",
            _problem_fix(f"{name} {problem}"),
        )
        for name, problem in sorted(facts.probe_problems.items())
    ]


def _hardware_problem(facts: Facts) -> list[Finding]:
    machine = facts.machine
    assert machine is not None
    return [
        Finding(
            "PTK902",
            Severity.WARNING,
            f"accelerator probe: {problem}",
            _problem_fix(problem),
        )
        for problem in machine.problems
    ]


# --- the registry -----------------------------------------------------------------------


def _check(
    id: str,
    name: str,
    severity: Severity,
    needs: tuple[str, ...],
    summary: str,
    run: Callable[[Facts], list[Finding]],
) -> Check:
    return Check(id=id, name=name, severity=severity, needs=needs, summary=summary, run=run)


E, W, INFO = Severity.ERROR, Severity.WARNING, Severity.INFO

CHECKS: tuple[Check, ...] = (
    _check("PTK101", "torch-missing", E, ("torch",), "torch is not installed", _torch_missing),
    _check(
        "PTK102",
        "torch-broken",
        E,
        ("torch",),
        "torch's installed files look broken (no version file, a stray torch folder)",
        _torch_broken,
    ),
    _check(
        "PTK103",
        "torch-import-fails",
        E,
        ("smoke",),
        "`import torch` fails in the --smoke child process",
        _torch_import_fails,
    ),
    _check(
        "PTK104",
        "torch-cpu-build-on-nvidia-gpu",
        W,
        ("torch", "machine"),
        "a CPU build of torch on a machine with NVIDIA GPUs",
        _torch_cpu_on_nvidia,
    ),
    _check(
        "PTK105",
        "torch-without-rocm-on-amd-gpu",
        W,
        ("torch", "machine"),
        "a torch without ROCm on a machine with AMD GPUs (and no NVIDIA GPU)",
        _torch_without_rocm_on_amd,
    ),
    _check(
        "PTK106",
        "torch-compile-unavailable",
        W,
        ("torch",),
        "torch.compile does not run on this Python (ptkit.compile falls back to eager)",
        _compile_unavailable,
    ),
    _check(
        "PTK107",
        "gil-re-enabled",
        W,
        ("python",),
        "a free-threaded Python whose GIL is enabled at run time",
        _gil_re_enabled,
    ),
    _check(
        "PTK108",
        "gil-re-enabled-by-import",
        W,
        ("python", "smoke"),
        "a free-threaded Python whose GIL came back when torch and ptkit were imported (--smoke)",
        _gil_re_enabled_by_import,
    ),
    _check(
        "PTK201",
        "nvidia-driver-too-old",
        E,
        ("torch", "machine"),
        "the NVIDIA driver is missing or older than torch's CUDA needs",
        _driver_too_old,
    ),
    _check(
        "PTK202",
        "device-not-covered",
        W,
        ("machine", "packages"),
        "a GPU that the installed ptkit's libraries do not cover (their targets, the loader's rules)",
        _device_not_covered,
    ),
    _check(
        "PTK301",
        "ptkit-without-native-library",
        W,
        ("packages",),
        "the installed ptkit has no native library (a source checkout?)",
        _ptkit_no_native,
    ),
    _check(
        "PTK302",
        "variant-torch-mismatch",
        E,
        ("torch", "packages"),
        "a ptkit library's backend or CUDA/HIP major differs from torch's (cu13 wheel, ROCm torch)",
        _variant_mismatch,
    ),
    _check(
        "PTK303",
        "library-failed",
        E,
        ("packages",),
        "a native library the loader would fail (sha256 mismatch, unreadable manifest …)",
        _library_failed,
    ),
    _check(
        "PTK304",
        "library-skipped",
        INFO,
        ("packages", "torch"),
        "a native library the loader skips here, with the reason",
        _library_skipped,
    ),
    _check(
        "PTK305",
        "smoke-mismatch",
        E,
        ("smoke",),
        "--smoke: an op on a device does not match the reference",
        _smoke_mismatch,
    ),
    _check(
        "PTK306",
        "smoke-failed",
        E,
        ("smoke",),
        "--smoke: torch imported but ptkit's import or the run failed",
        _smoke_failed,
    ),
    _check(
        "PTK401",
        "multiple-cuda-runtimes",
        W,
        ("torch",),
        "more than one libcudart in torch's folders and on library paths",
        _two_cudarts,
    ),
    _check(
        "PTK402",
        "rocm-placeholder-package",
        E,
        ("distributions",),
        "PyPI's placeholder rocm==0.1.0 instead of AMD's TheRock SDK",
        _rocm_placeholder,
    ),
    _check(
        "PTK901",
        "probe-failed",
        W,
        (),
        "one of the doctor's probes failed or timed out",
        _probe_failed,
    ),
    _check(
        "PTK902",
        "hardware-probe-problem",
        W,
        ("machine",),
        "the accelerator probes hit a problem (nvidia-smi hung or printed garbage …)",
        _hardware_problem,
    ),
)

_BY_ID = {check.id: check for check in CHECKS}
_BY_NAME = {check.name: check for check in CHECKS}


def check_by_id(check_id: str) -> Check:
    return _BY_ID[check_id]


def resolve_ids(names: Iterable[str]) -> tuple[str, ...]:
    """IDs (``PTK101``, any case) or names (``torch-missing``), also comma lists, as IDs;
    an unknown one raises ``UnknownCheckError`` with a did-you-mean and the valid IDs."""
    ids: list[str] = []
    for raw in names:
        for item in (part.strip() for part in raw.split(",")):
            if not item:
                continue
            if item.upper() in _BY_ID:
                ids.append(item.upper())
            elif item.lower() in _BY_NAME:
                ids.append(_BY_NAME[item.lower()].id)
            else:
                candidates = [*_BY_ID, *_BY_NAME]
                close = difflib.get_close_matches(item.upper(), list(_BY_ID), n=1)
                close = close or difflib.get_close_matches(item.lower(), candidates, n=1)
                hint = f" (did you mean {close[0]}?)" if close else ""
                raise UnknownCheckError(
                    f"ptkit doctor: unknown check {item!r}{hint}; valid checks: "
                    f"{', '.join(_BY_ID)} (`ptkit doctor --list-checks` describes them)"
                )
    return tuple(dict.fromkeys(ids))


def run_checks(
    facts: Facts, select: Sequence[str] = (), ignore: Sequence[str] = ()
) -> tuple[list[Finding], list[tuple[str, str]]]:
    """The findings of every check (``select``: only these; ``ignore``: not these), and
    the checks skipped as (ID, the missing fact). Unknown IDs raise ``UnknownCheckError``.

    A check that raises is a bug in the doctor: the exception propagates (``run_doctor``
    turns it into exit code 2 with one line naming the check)."""
    chosen = set(resolve_ids(select)) if select else set(_BY_ID)
    chosen -= set(resolve_ids(ignore))
    findings: list[Finding] = []
    skipped: list[tuple[str, str]] = []
    for check in CHECKS:
        if check.id not in chosen:
            continue
        missing = next((need for need in check.needs if getattr(facts, need, None) is None), None)
        if missing is not None:
            skipped.append((check.id, missing))
            continue
        try:
            findings.extend(check.run(facts))
        except Exception as exc:
            raise CheckCrashed(check.id, check.name, exc) from exc
    return findings, skipped


class CheckCrashed(RuntimeError):
    """A check raised: a bug in ``ptkit doctor``, named by the check."""

    def __init__(self, check_id: str, name: str, exc: Exception) -> None:
        super().__init__(f"check {check_id} ({name}) raised {type(exc).__name__}: {exc}")
        self.check_id = check_id
