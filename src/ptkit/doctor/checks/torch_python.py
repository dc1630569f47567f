"""PTK1xx: torch and Python."""

from __future__ import annotations

from collections.abc import Iterator, Sequence

from ptkit.doctor.checks.advice import PYTORCH_INSTALL, recommended, torch_index_fix
from ptkit.doctor.checks.base import Problem, check
from ptkit.doctor.model import PackageFacts, PythonFacts, Severity, SmokeFacts, TorchInstall
from ptkit.hardware.facts import Machine
from ptkit.recipes.torch_builds import TorchMinor, split_label


def torch_label(torch: TorchInstall) -> str:
    return f"torch {torch.version or '(unknown version)'}"


@check(
    "PTK101",
    "torch-missing",
    Severity.ERROR,
    summary="torch is not installed",
    fix=f"install torch (pick the build at {PYTORCH_INSTALL}; `ptkit select` names the variant)",
)
def torch_missing(
    torch: TorchInstall, python: PythonFacts | None = None, machine: Machine | None = None
) -> Iterator[Problem]:
    if torch.location is not None:
        return
    where = python.executable if python else "this Python"
    choice = recommended(machine) if machine is not None else None
    fix = None
    if choice is not None and choice.torch_index_url:
        fix = (
            f"install torch for the {choice.variant} variant `ptkit select` names here: "
            f"pip install torch --index-url {choice.torch_index_url}"
        )
    yield Problem(
        f"torch is not installed for {where}: the packages built with ptkit need it "
        "(their import fails)",
        fix,
    )


@check(
    "PTK102",
    "torch-broken",
    Severity.ERROR,
    summary="torch's installed files look broken (no version file, a stray torch folder)",
    fix="reinstall it: pip install --force-reinstall torch (or remove the stray `torch` "
    "folder from PYTHONPATH/sys.path); `ptkit doctor --smoke` shows the import error",
)
def torch_broken(torch: TorchInstall) -> Iterator[Problem]:
    if torch.location is not None and torch.problems:
        yield Problem(f"torch at {torch.location} looks broken: {'; '.join(torch.problems)}")


@check(
    "PTK103",
    "torch-import-fails",
    Severity.ERROR,
    summary="`import torch` fails in the --smoke child process",
    fix="fix or reinstall torch (pip install --force-reinstall torch); run "
    "`python -c 'import torch'` to see the whole traceback",
)
def torch_import_fails(smoke: SmokeFacts) -> Iterator[Problem]:
    if not smoke.torch_imported:
        yield Problem(
            f"`import torch` failed in the --smoke child process: {smoke.error or 'no error line'}"
        )


@check(
    "PTK104",
    "torch-cpu-build-on-nvidia-gpu",
    Severity.WARNING,
    summary="a CPU build of torch on a machine with NVIDIA GPUs",
    fix=f"install torch's CUDA build (pick it at {PYTORCH_INSTALL})",
)
def torch_cpu_on_nvidia(torch: TorchInstall, machine: Machine) -> Iterator[Problem]:
    if torch.location is None or not machine.nvidia or torch.cuda or torch.hip or torch.xpu:
        return
    gpus = ", ".join(sorted({g.name for g in machine.nvidia}))
    yield Problem(
        f"{torch_label(torch)} is a CPU build but this machine has {len(machine.nvidia)} "
        f"NVIDIA GPU(s) ({gpus}): nothing runs on them",
        torch_index_fix(machine, "cu", "CUDA"),
    )


@check(
    "PTK105",
    "torch-without-rocm-on-amd-gpu",
    Severity.WARNING,
    summary="a torch without ROCm on a machine with AMD GPUs (and no NVIDIA GPU)",
    fix=f"install torch's ROCm build (pick it at {PYTORCH_INSTALL})",
)
def torch_without_rocm_on_amd(torch: TorchInstall, machine: Machine) -> Iterator[Problem]:
    if torch.location is None or not machine.amd or machine.nvidia or torch.hip:
        return
    gpus = ", ".join(sorted({f"{g.name} ({g.gfx_target})" for g in machine.amd}))
    built = "a CUDA build" if torch.cuda else "a CPU build"
    yield Problem(
        f"{torch_label(torch)} is {built}, not a ROCm build, but this machine has AMD GPU(s) "
        f"{gpus}: nothing runs on them",
        torch_index_fix(machine, "rocm", "ROCm"),
    )


@check(
    "PTK106",
    "torch-compile-unavailable",
    Severity.WARNING,
    summary="torch.compile does not run on this Python (ptkit.compile falls back to eager)",
    fix="use a Python that the installed torch's torch.compile supports (its check is quoted "
    "above), or keep ptkit.compile(), which runs the model eagerly with one warning",
)
def compile_unavailable(
    torch: TorchInstall, python: PythonFacts | None = None
) -> Iterator[Problem]:
    if torch.location is None or torch.compile_supported is not False:
        return
    version = python.version if python else "this Python"
    yield Problem(
        f"torch.compile is unavailable with {torch_label(torch)} on Python {version}: "
        f"{torch.compile_reason or 'no reason given'}"
    )


@check(
    "PTK110",
    "inductor-cannot-build-cpu-code",
    Severity.WARNING,
    summary="torch.compile runs, but Inductor cannot build C++ for CPU graphs here "
    "(no C++ compiler, or no Python.h for this Python)",
    fix="install what the finding names (e.g. `apt install g++ python3-dev`), or set CXX; "
    "until then ptkit.compile runs CPU-only models eagerly with one warning",
)
def inductor_cpu_prerequisites(torch: TorchInstall) -> Iterator[Problem]:
    if torch.location is None or not torch.compile_supported:
        return
    if torch.compile_cpu_codegen is False:
        yield Problem(torch.compile_cpu_reason or "Inductor's CPU prerequisites are missing")


@check(
    "PTK107",
    "gil-re-enabled",
    Severity.WARNING,
    summary="a free-threaded Python whose GIL is enabled at run time",
    fix="unset PYTHON_GIL / -X gil=1; run `python -X gil=0 -W default -c 'import torch'` "
    "(and your packages) to see which module re-enables it, and upgrade that module",
)
def gil_re_enabled(python: PythonFacts) -> Iterator[Problem]:
    if python.free_threaded and python.gil_enabled is True:
        yield Problem(
            f"Python {python.version} is free-threaded but the GIL is enabled at run time "
            "(PYTHON_GIL=1, -X gil=1, or an extension imported without free-threading support)"
        )


@check(
    "PTK108",
    "gil-re-enabled-by-import",
    Severity.WARNING,
    summary="a free-threaded Python whose GIL came back when torch and the packages built "
    "with ptkit were imported (--smoke)",
    fix="run `python -X gil=0 -W default -c 'import torch, <package>'`: the RuntimeWarning "
    "names the module; upgrade it to a free-threaded (cp3XXt) build",
)
def gil_re_enabled_by_import(python: PythonFacts, smoke: SmokeFacts) -> Iterator[Problem]:
    if not python.free_threaded or not smoke.torch_imported or smoke.gil_enabled is not True:
        return
    if python.gil_enabled is True:
        return  # already PTK107: enabled before torch came in
    yield Problem(
        f"free-threaded Python {python.version}: importing torch and the packages built with "
        "ptkit in the --smoke child re-enabled the GIL (an extension module without "
        "free-threading support)"
    )


@check(
    "PTK109",
    "torch-build-for-another-torch",
    Severity.ERROR,
    summary="an installed package's torch-mode build (one wheel per torch minor) is for "
    "another torch minor than this one",
    fix="install the package's build for this torch (its version label names the torch: "
    "+cpu.torch2.13), or the torch it was built for",
)
def torch_build_for_another_torch(
    torch: TorchInstall, packages: Sequence[PackageFacts]
) -> Iterator[Problem]:
    """A torch-mode wheel is built against one torch minor's C++ API and requires it
    (``torch>=2.14,<2.15``); its version label says which (``0.3.0+cpu.torch2.14``). Read
    from the installed metadata and the loader's decisions: torch is not imported."""
    here = TorchMinor.parse(torch.version) if torch.location and torch.version else None
    if here is None:
        return  # torch missing or broken: PTK101/PTK102
    for package in packages:
        public, _, label = package.version.partition("+")
        base, built_for = split_label(label)
        if built_for is None or built_for == here:
            continue
        distribution = package.distribution or package.name
        exact = sorted({lib.torch_built_with for lib in package.libraries if lib.torch_built_with})
        built = f", built with torch {', '.join(exact)}" if exact else ""
        skipped = [
            f"the loader skips {lib.library}: {lib.reason}"
            for lib in package.libraries
            if lib.status != "loaded"
        ]
        loader = "; ".join(skipped) if skipped else "its libraries still load here"
        yield Problem(
            f"{distribution} {package.version} is the build for torch {built_for}{built} "
            f"(it requires {built_for.requirement}), but this is {torch_label(torch)}: {loader}",
            f"install its build for torch {here}: pip install --force-reinstall --no-deps "
            f"'{distribution}=={public}+{base}.{here.label}' --index-url <its index>/{base}/simple "
            f"(`ptkit select --source <project> --index-url <its index>` prints it), or go "
            f"back to torch {built_for}: pip install 'torch=={built_for}.*'",
        )
