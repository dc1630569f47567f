"""PTK3xx: the installed packages built with ptkit (every one of the ``ptkit.packages``
entry-point group: ptkit-ops and others), their libraries, and the ``--smoke`` run.

Whether a library fits torch is the loader's rule, asked of its backend
(``Backend.built_into``, ``torch_absent_reason``, ``runtime_problem``)."""

from __future__ import annotations

from collections.abc import Iterator, Sequence

from ptkit.backends import BACKENDS, backends_for_device_type
from ptkit.doctor.checks.advice import package_fix, recommended
from ptkit.doctor.checks.base import Problem, check
from ptkit.doctor.checks.torch_python import torch_label
from ptkit.doctor.model import PackageFacts, Severity, SmokeFacts, TorchInstall
from ptkit.doctor.probes.packages import torch_facts_from
from ptkit.hardware.facts import Machine
from ptkit.loading.packages import NATIVE_FOLDER
from ptkit.selection.commands import ENV_INDEX_URL, INDEX_PLACEHOLDER, replace_command
from ptkit.selection.recipes import OPS_DISTRIBUTION, OPS_PACKAGE, SelectionError


def package_label(package: PackageFacts) -> str:
    variant = f", variant {package.variant}" if package.variant else ""
    return f"{package.name} {package.version}{variant}"


def _pip_name(package: PackageFacts) -> str:
    return package.distribution or package.name


@check(
    "PTK301",
    "package-without-native-library",
    Severity.WARNING,
    summary="an installed package built with ptkit has no native library (a source checkout?)",
    fix="install a built wheel of the package (pip install --force-reinstall <package> from "
    "its index); a source checkout on PYTHONPATH has no native library",
)
def package_without_native(
    packages: Sequence[PackageFacts], machine: Machine | None = None
) -> Iterator[Problem]:
    for package in packages:
        if package.libraries:
            continue
        source = "a source checkout on PYTHONPATH has no native library"
        if package.name == OPS_PACKAGE:
            fix = f"{package_fix(package, machine, 'this machine')}; {source}"
        else:
            fix = (
                f"install a built wheel of {_pip_name(package)} (pip install --force-reinstall "
                f"{_pip_name(package)} from its index); {source}"
            )
        yield Problem(
            f"{package_label(package)} at {package.location} has no native library (no "
            f"*.manifest.json in {package.name}/{NATIVE_FOLDER}/): every op runs its "
            "reference implementation",
            fix,
        )


@check(
    "PTK302",
    "variant-torch-mismatch",
    Severity.ERROR,
    summary="a library's backend, or its CUDA/HIP major, is not torch's (a cu13 wheel beside "
    "a ROCm torch)",
    fix="install the package's variant for this torch (or the torch its variant was built "
    "for); for ptkit-ops, `ptkit select` names the variant for this machine",
)
def variant_mismatch(
    torch: TorchInstall, packages: Sequence[PackageFacts], machine: Machine | None = None
) -> Iterator[Problem]:
    predicted = torch_facts_from(torch, None)
    if predicted is None:
        return  # torch missing or broken: PTK101/PTK102
    build = predicted[0]
    for package in packages:
        for lib in package.libraries:
            backend = BACKENDS.get(lib.backend)
            if backend is None:
                continue  # an unreadable manifest: PTK303
            if not backend.built_into(build):
                absent = backend.torch_absent_reason(build) or f"{torch_label(torch)} lacks it"
                problem = f"{lib.library} is a {backend.title} library but {absent}"
            else:
                version = (lib.toolkit or "").partition(" ")[2]
                runtime = backend.runtime_problem(version, build)
                if runtime is None:
                    continue
                problem = f"{lib.library} was {runtime}"
            yield Problem(
                f"{package_label(package)} does not match torch: {problem}; the loader skips "
                "it and the reference serves",
                package_fix(package, machine, "this torch"),
            )


@check(
    "PTK303",
    "library-failed",
    Severity.ERROR,
    summary="a native library the loader would fail (sha256 mismatch, unreadable manifest …)",
    fix="reinstall the package: pip install --force-reinstall --no-deps '<package>==<version>'",
)
def library_failed(packages: Sequence[PackageFacts]) -> Iterator[Problem]:
    for package in packages:
        for lib in package.libraries:
            if lib.status == "failed":
                yield Problem(
                    f"{package_label(package)}: the loader would fail {lib.library} "
                    f"({lib.backend}): {lib.reason}",
                    f"reinstall it: pip install --force-reinstall --no-deps "
                    f"'{_pip_name(package)}=={package.version}'",
                )


@check(
    "PTK304",
    "library-skipped",
    Severity.INFO,
    summary="a native library the loader skips here, with the reason",
    fix="nothing to do if this is expected (e.g. PTKIT_DISABLE_NATIVE, no such device); "
    "otherwise see the other findings and `ptkit explain`",
)
def library_skipped(packages: Sequence[PackageFacts], torch: TorchInstall) -> Iterator[Problem]:
    if torch.location is None or torch.problems:
        return  # every library is skipped then: PTK101/PTK102 say why, once
    for package in packages:
        for lib in package.libraries:
            if lib.status == "skipped":
                yield Problem(
                    f"{package_label(package)}: {lib.library} ({lib.backend}) is skipped "
                    f"here: {lib.reason}"
                )


@check(
    "PTK305",
    "smoke-mismatch",
    Severity.ERROR,
    summary="--smoke: an op on a device does not match its reference",
    fix="report it with `ptkit doctor --smoke --json` attached; meanwhile "
    "PTKIT_DISABLE_NATIVE=<backend> runs the reference there",
)
def smoke_mismatch(smoke: SmokeFacts) -> Iterator[Problem]:
    for row in smoke.rows:
        if row.ok:
            continue
        error = "n/a" if row.max_error is None else f"{row.max_error:.3g}"
        backends = ",".join(b.name for b in backends_for_device_type(row.device.split(":")[0]))
        yield Problem(
            f"--smoke: {row.op} on {row.device} ({row.dtype}, {row.implementation}) does not "
            f"match the reference: max |error| {error}"
            + (f"; {row.problem}" if row.problem else ""),
            "report it with `ptkit doctor --smoke --json` attached; meanwhile "
            f"PTKIT_DISABLE_NATIVE={backends or 'all'} runs the reference there",
        )


@check(
    "PTK306",
    "smoke-failed",
    Severity.ERROR,
    summary="--smoke: torch imported but the run failed",
    fix="run the import that failed (`python -c 'import <package>'`) to see the whole "
    "traceback; reinstall that package if it is an import error",
)
def smoke_failed(smoke: SmokeFacts) -> Iterator[Problem]:
    if smoke.torch_imported and smoke.error is not None:  # else PTK103: torch itself
        yield Problem(f"--smoke: torch imported but the run failed: {smoke.error}")


@check(
    "PTK307",
    "smoke-load-check-failed",
    Severity.ERROR,
    summary="--smoke: a package's libraries did not load or register their kernels as its "
    "manifests say",
    fix="reinstall the package (pip install --force-reinstall --no-deps <package>); "
    "`python -m ptkit.runtime.smoke <package>` shows every decision and kernel",
)
def smoke_load_check_failed(smoke: SmokeFacts) -> Iterator[Problem]:
    for package in smoke.packages:
        for problem in package.problems:
            yield Problem(
                f"--smoke: {package.name}: {problem}",
                "reinstall it (pip install --force-reinstall --no-deps <its distribution>); "
                f"`python -m ptkit.runtime.smoke {package.name}` shows every decision and kernel",
            )


@check(
    "PTK308",
    "variant-not-recommended",
    Severity.WARNING,
    summary=f"the installed {OPS_DISTRIBUTION} variant is not the one `ptkit select` "
    "recommends for this machine (a cu13 wheel where no NVIDIA GPU can run it)",
    fix=f"replace it with the variant `ptkit select` names: pip install --no-deps "
    f"'{OPS_DISTRIBUTION}==<version>+<variant>' --index-url <ptkit index>/<variant>/simple",
)
def variant_not_recommended(
    packages: Sequence[PackageFacts], machine: Machine, index_url: str | None = None
) -> Iterator[Problem]:
    """The answer is ``ptkit select``'s for the detected hardware (``advice.recommended``,
    without ``PTKIT_VARIANT``), never re-derived here."""
    choice = recommended(machine)
    if choice is None:
        return  # the recipes cannot be read: nothing to compare with
    for package in packages:
        if package.name != OPS_PACKAGE or package.variant not in choice.variants:
            continue  # another project's variants, or no readable variant (PTK301/PTK303)
        if package.variant == choice.variant:
            continue
        try:
            command = replace_command(index_url, choice.recipe, package.version)
        except SelectionError:  # PTKIT_INDEX_URL is not a URL: leave the root to fill in
            command = replace_command(None, choice.recipe, package.version)
            index_url = None
        where = (
            ""
            if index_url is not None
            else f" ({INDEX_PLACEHOLDER}: the root of ptkit's index; with {ENV_INDEX_URL} set "
            "the doctor fills it in)"
        )
        yield Problem(
            f"{package_label(package)} is installed, but `ptkit select` recommends the "
            f"{choice.variant} variant for this machine: {choice.reason}",
            f"replace it with the {choice.variant} variant: {command}{where}",
        )


@check(
    "PTK309",
    "op-unavailable",
    Severity.INFO,
    summary="an op of an installed package has no implementation on a device type (a "
    "CUDA-only op on CPU, or an op whose only library the loader would not load)",
    fix="nothing to do when the op is meant for other devices; otherwise the reason ends "
    "with the fix (`ptkit explain` after importing the package says what runs where)",
)
def op_unavailable(packages: Sequence[PackageFacts]) -> Iterator[Problem]:
    for package in packages:
        rows: dict[str, list[str]] = {}
        reasons: dict[str, str] = {}
        for route in package.routes:
            if route.implementation == "unavailable":
                rows.setdefault(route.op, []).append(route.device_type)
                reasons.setdefault(route.op, route.reason)
        for op, device_types in rows.items():
            yield Problem(
                f"{package_label(package)}: {op} has no implementation on "
                f"{', '.join(device_types)}: {reasons[op]}"
            )
