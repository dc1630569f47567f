"""The release audit of a finished wheel: what ``ptkit build`` checks before it publishes.

A ptkit wheel must install on every CPython and every torch >= its target, on every
system its platform tag claims, and carry exactly the GPU code its manifests promise.
The platform of the wheel's tag (:mod:`ptkit.platforms`) says which files are native
libraries and how they are audited. For the wheel as a whole:

* the tag is ``py3-none-<platform>``, the same in the file name and in ``WHEEL`` (a tag
  relabelled by hand shows up as a mismatch), and every platform tag is of one platform;
* a ``py3-none-any`` wheel (the toolkit) holds no native library, and a platform's wheel
  none of another platform's;
* the ``torch``-mode libraries (:mod:`ptkit.torch_abi`) of a wheel are built for one
  torch minor, and the wheel's ``Requires-Dist: torch`` (where it has one) allows that
  minor and no other: pip must not put the wheel beside a torch its loader refuses; a
  torch-mode wheel with no such pin gets a note;
* every native library has a manifest, and each manifest's sha256 is that of the file
  in the wheel; where it is not and the repair left its marks (an ``$ORIGIN`` RPATH,
  DT_NEEDED entries naming libraries it grafted into ``<dist>.libs/``), the problem says
  what the repair changed and why, not only that the hashes differ.

For each native library, the audit of its platform's binary format, each with the
rules every format shares (:mod:`ptkit.release.linkage`: Python ties, the torch ABI of
its manifest's ``torch.abi``, links that are neither torch's nor the system's): ELF
(Linux) in :mod:`ptkit.release.elf_audit` (RPATH, manylinux symbol versions), Mach-O
(macOS) in :mod:`ptkit.release.macho_audit` (LC_RPATH, minimum macOS and architectures
against the tag), PE (Windows) in :mod:`ptkit.release.pe_audit` (machine type). A
library of a format with no audit is reported as a problem ("not audited"), never passed
unchecked. The GPU code inside a library is compared with its manifest
(:mod:`ptkit.release.fatbin`, :mod:`ptkit.release.offload`).

Every problem names the file, the cause and the fix. Needs ``packaging``; the ELF audit
needs ``pyelftools`` and, for manylinux tags, ``auditwheel`` (the policy table); the
Mach-O audit ``macholib``, the PE audit ``pefile``.
"""

from __future__ import annotations

import dataclasses
import hashlib
import re
import tempfile
import zipfile
from email.parser import Parser
from pathlib import Path

from ptkit.loading import namespaces
from ptkit.loading.manifest import MANIFEST_SUFFIX, Manifest, ManifestError, read_manifest
from ptkit.platforms import PLATFORMS, Platform, platform_for_wheel_tag
from ptkit.release import elf_audit, fatbin, macho_audit, offload, pe_audit
from ptkit.release.torch_libraries import all_torch_libraries, torch_libraries
from ptkit.torch_abi import DEFAULT_ABI, PORTING_GUIDE

__all__ = [
    "LibraryAudit",
    "WheelAudit",
    "audit_native_library",
    "audit_wheel",
    "by_arch",
    "not_audited",
    "repair_marks",
    "wheel_platform",
]


@dataclasses.dataclass(frozen=True)
class LibraryAudit:
    """One native library of the wheel: what it links, and what it needs of the system."""

    name: str
    needed: tuple[str, ...]
    """DT_NEEDED (ELF), LC_LOAD_DYLIB (Mach-O), the imported DLLs (PE)."""
    # Per version prefix (GLIBC, GLIBCXX, CXXABI, GCC): the highest version required (ELF).
    highest_versions: dict[str, str]
    gpu_targets: tuple[str, ...] = ()
    binary_format: str = "ELF"
    minimum_os: str = ""
    """The oldest macOS it loads on (Mach-O: LC_BUILD_VERSION minos); "" elsewhere."""
    architectures: tuple[str, ...] = ()
    """Mach-O: its slices (arm64); PE: its machine (AMD64); ELF: not read."""

    def summary(self) -> str:
        gpu = f"; GPU code {', '.join(self.gpu_targets)}" if self.gpu_targets else ""
        links = ", ".join(self.needed) or "-"
        arch = f"; {', '.join(self.architectures)}" if self.architectures else ""
        if self.binary_format == "Mach-O":
            return f"{self.name}: links {links}; macOS {self.minimum_os or '?'}+{arch}{gpu}"
        if self.binary_format == "PE":
            return f"{self.name}: imports {links}{arch}{gpu}"
        versions = ", ".join(f"{k}_{v}" for k, v in sorted(self.highest_versions.items()))
        return f"{self.name}: links {links}; needs {versions or '-'}{gpu}"


@dataclasses.dataclass(frozen=True)
class WheelAudit:
    wheel: Path
    platforms: tuple[str, ...]
    libraries: tuple[LibraryAudit, ...]
    problems: tuple[str, ...]
    notes: tuple[str, ...] = ()

    @property
    def ok(self) -> bool:
        return not self.problems

    def format(self) -> str:
        lines = [f"{self.wheel.name}: platform {'.'.join(self.platforms)}"]
        lines += [f"  {lib.summary()}" for lib in self.libraries]
        lines += [f"  note: {n}" for n in self.notes]
        lines += [f"  PROBLEM: {p}" for p in self.problems] or ["  audit: ok"]
        return "\n".join(lines)


def _metadata(archive: zipfile.ZipFile) -> str:
    """The wheel's ``*.dist-info/METADATA`` ("" when it has none)."""
    names = [n for n in archive.namelist() if n.endswith(".dist-info/METADATA")]
    return archive.read(names[0]).decode("utf-8", "replace") if len(names) == 1 else ""


def _check_tags(wheel: Path) -> tuple[tuple[str, ...], list[str]]:
    """The wheel's platform tags, and problems with its ``py3-none-<platform>`` tag."""
    from packaging.utils import InvalidWheelFilename, parse_wheel_filename

    try:
        _, _, _, tags = parse_wheel_filename(wheel.name)
    except InvalidWheelFilename as exc:
        return (), [f"{wheel.name}: not a wheel file name ({exc}): build it with `ptkit build`"]
    problems = []
    for tag in sorted(tags, key=str):
        if (tag.interpreter, tag.abi) != ("py3", "none"):
            problems.append(
                f"{wheel.name}: tag {tag} is not py3-none-<platform>: the native libraries "
                'have no Python ABI; keep wheel.py-api = "py3" in pyproject.toml'
            )
    with zipfile.ZipFile(wheel) as archive:
        infos = [n for n in archive.namelist() if n.endswith(".dist-info/WHEEL")]
        text = archive.read(infos[0]).decode("utf-8") if len(infos) == 1 else ""
    declared = set(Parser().parsestr(text).get_all("Tag") or [])
    if declared != {str(t) for t in tags}:
        problems.append(
            f"{wheel.name}: the file name's tags {sorted(map(str, tags))} differ from WHEEL's "
            f"{sorted(declared)}: the wheel was renamed by hand; let the repair tool set the tag"
        )
    return tuple(sorted({t.platform for t in tags})), problems


def wheel_platform(name: str, platforms: tuple[str, ...]) -> tuple[Platform | None, list[str]]:
    """The platform of a wheel's platform tags (None for ``any``), or the problem."""
    if not platforms or platforms == ("any",):
        return None, []
    found = {tag: platform_for_wheel_tag(tag) for tag in platforms}
    unknown = sorted(tag for tag, platform in found.items() if platform is None)
    if unknown:
        return None, [
            f"{name}: platform tag {', '.join(unknown)} is of no platform ptkit knows "
            f"({', '.join(PLATFORMS)}): build it with `ptkit build` or cibuildwheel"
        ]
    distinct = {platform.name: platform for platform in found.values() if platform is not None}
    if len(distinct) > 1:
        return None, [
            f"{name}: its platform tags {', '.join(platforms)} are of several systems "
            f"({', '.join(sorted(distinct))}): one wheel per platform"
        ]
    return next(iter(distinct.values())), []


def not_audited(name: str, platform: Platform) -> str:
    """The problem of a library whose binary format has no audit yet."""
    return (
        f"{name}: not audited: {platform.binary_format} audit is not implemented yet, so its "
        f"links, symbols and minimum {platform.name} version are unchecked; a wheel with it "
        "is not releasable until ptkit.release audits that format (docs/architecture.md)"
    )


def by_arch(targets: set[str]) -> list[str]:
    """sm_90 before sm_100: numeric order."""
    return sorted(targets, key=lambda t: (int("".join(c for c in t if c.isdigit()) or 0), t))


def _gpu_check(manifest: Manifest, cuobjdump: str | None) -> tuple[tuple[str, ...], list[str]]:
    """The GPU targets inside the library against its manifest (CUDA and HIP)."""
    library = manifest.library_path
    if manifest.backend == "cuda":
        tool = fatbin.find_cuobjdump(cuobjdump)
        if tool is None:
            from ptkit.release.toolchains import cuobjdump_missing

            missing = cuobjdump_missing(manifest.toolkit.get("version"))
            return (), [f"{manifest.library}: the fatbinary cannot be checked: {missing}"]
        try:
            found = fatbin.list_cuda_targets(library, tool)
            problems = fatbin.check_manifest(manifest.path, tool)
        except RuntimeError as exc:
            return (), [f"{manifest.library}: {exc}"]
        targets = tuple(by_arch(found.sass) + by_arch(found.ptx))
        return targets, [f"{p}: rebuild; the arch list was lost on the way" for p in problems]
    if manifest.backend == "hip":
        try:
            gfx = tuple(offload.list_hip_targets(library))
            problems = offload.check_manifest(manifest.path)
        except (OSError, offload.OffloadError) as exc:
            return (), [f"{manifest.library}: {exc}"]
        return gfx, [f"{p}: rebuild; the target list was lost on the way" for p in problems]
    return (), []


# A file auditwheel grafted: <dist>.libs/<soname with a hash>.
_GRAFTED = re.compile(r"(^|/)[^/]+\.libs/[^/]+$")


def repair_marks(library: Path, names: list[str]) -> str:
    """What a repair visibly changed in ``library`` of a wheel whose entries are ``names``,
    and why, or "" when it left no mark: DT_NEEDED entries naming libraries grafted into
    ``<dist>.libs/`` (the library links one that is neither torch's nor the C runtime),
    an ``$ORIGIN`` RPATH with nothing grafted (auditwheel removed a DT_NEEDED the policy
    forbids: libpython)."""
    from elftools.common.exceptions import ELFError

    try:
        elf = elf_audit.audit_elf(library)
    except (ELFError, OSError, ValueError):
        return ""  # not readable: the library's own audit says so
    grafted = {Path(name).name for name in names if _GRAFTED.search(name)}
    replaced = [lib for lib in elf.needed if lib in grafted]
    origin = [
        item for entry in elf.rpath for item in entry.split(":") if item.startswith("$ORIGIN")
    ]
    if replaced:
        return (
            f"auditwheel's repair changed it: it grafted {', '.join(replaced)} into the wheel "
            f"and rewrote its DT_NEEDED and RPATH ({', '.join(origin) or 'none'}) to them, "
            "because the library links a library that is neither torch's nor the C/C++ "
            "runtime. Fix: link that library statically or drop the dependency"
        )
    if origin:
        return (
            f"auditwheel's repair changed it: it set RPATH {', '.join(origin)} and grafted "
            "nothing, which is what it does when it removes a DT_NEEDED the manylinux policy "
            "forbids (libpython): the unrepaired library links Python. Fix: no Python in a "
            f"kernel library ({PORTING_GUIDE}); `ptkit build` says so before the repair"
        )
    return ""


def _read_manifests(paths: list[Path], names: list[str]) -> tuple[dict[str, Manifest], list[str]]:
    """Manifests by library file name (with its folder), and the problems reading them."""
    manifests: dict[str, Manifest] = {}
    problems = []
    for path in paths:
        try:
            manifest = read_manifest(path)
        except ManifestError as exc:
            problems.append(f"{exc}: the loader would refuse it; rebuild the wheel")
            continue
        manifests[str(manifest.library_path)] = manifest
        if not manifest.library_path.is_file():
            problems.append(
                f"{path.name} describes {manifest.library}, which the wheel does not hold: "
                "rebuild; the install step lost the library"
            )
            continue
        digest = hashlib.sha256(manifest.library_path.read_bytes()).hexdigest()
        if digest != manifest.sha256:
            marks = repair_marks(manifest.library_path, names)
            problems.append(
                f"{manifest.library} changed after {path.name} was written: {marks}"
                if marks
                else f"{manifest.library}: sha256 {digest} but {path.name} says "
                f"{manifest.sha256}: the library changed after the manifest was written (a "
                "hand edit, a tool that patched it); rebuild, and repair with the torch and "
                "GPU runtimes excluded"
            )
    return manifests, problems


def _torch_pin(
    manifests: dict[str, Manifest], metadata: str, wheel: str
) -> tuple[list[str], list[str]]:
    """Problems and notes of a wheel's torch-mode libraries against each other and against
    its ``Requires-Dist: torch``."""
    from packaging.requirements import InvalidRequirement, Requirement

    minors = {
        (m.torch_target_version, m.library) for m in manifests.values() if m.torch_abi == "torch"
    }
    if not minors:
        return [], []
    wanted = sorted({minor for minor, _ in minors})
    if len(wanted) > 1:
        listed = ", ".join(f"{lib} (torch {a}.{b})" for (a, b), lib in sorted(minors))
        return [
            f"{wheel}: its torch-mode libraries are built for different torch minors ({listed}): "
            "no torch loads them all; build every library of a wheel with one torch"
        ], []
    major, minor = wanted[0]
    pins = []
    for text in Parser().parsestr(metadata).get_all("Requires-Dist") or []:
        try:
            requirement = Requirement(text)
        except InvalidRequirement:
            continue
        if requirement.name == "torch" and requirement.marker is None:
            pins.append(requirement)
    built = f"{major}.{minor}"
    if not pins:
        return [], [
            f"its torch-mode libraries load into torch {built} only, and its metadata does not "
            "pin torch: pip may install it beside another torch, where the loader skips them "
            '(a recipe with variant.abi = "torch" and [torch] versions pins it)'
        ]
    problems = []
    for pin in pins:
        allows_own = pin.specifier.contains(f"{built}.0")
        allows_other = pin.specifier.contains(f"{major}.{minor + 1}.0") or (
            minor > 0 and pin.specifier.contains(f"{major}.{minor - 1}.0")
        )
        if not allows_own or allows_other:
            problems.append(
                f"{wheel}: requires {pin}, but its torch-mode libraries load into torch {built} "
                f"only: pin torch>={built},<{major}.{minor + 1} (the build of a torch-mode "
                "recipe does)"
            )
    return problems, []


def _misplaced(names: list[str], platform: Platform | None, wheel: str) -> list[str]:
    """Native libraries a wheel of ``platform`` (None: ``py3-none-any``) must not hold."""
    problems = []
    for name in names:
        if platform is not None and platform.is_native_library(name):
            continue
        other = next((p for p in PLATFORMS.values() if p.is_native_library(name)), None)
        if other is None:
            continue
        if platform is None:
            problems.append(
                f"{name} is a native library ({other.binary_format}) in {wheel}, whose tag "
                "says it runs anywhere: build it as a py3-none-<platform> wheel "
                "(`ptkit build`), or leave the library out"
            )
        else:
            problems.append(
                f"{name} is a {other.name} library ({other.binary_format}) in a "
                f"{platform.name} wheel: the loader there cannot load it; build the wheel "
                f"on {other.name}"
            )
    return problems


def audit_wheel(
    wheel: Path,
    *,
    cuobjdump: str | None = None,
    policy_file: Path | None = None,
) -> WheelAudit:
    """Audit ``wheel`` (see the module docstring); ``problems`` empty means releasable."""
    platforms, problems = _check_tags(wheel)
    platform, platform_problems = wheel_platform(wheel.name, platforms)
    problems += platform_problems
    notes: list[str] = []
    policy = None
    if platform is not None and platform.binary_format == "ELF":
        if any(elf_audit.is_manylinux(p) for p in platforms):
            try:
                policy = elf_audit.load_manylinux_policy(policy_file)
            except FileNotFoundError as exc:
                problems.append(f"the manylinux symbol versions cannot be checked: {exc}")
        else:
            notes.append(
                f"platform {'.'.join(platforms)} is not manylinux: symbol versions not checked"
            )
    libraries = []
    with tempfile.TemporaryDirectory() as tmp, zipfile.ZipFile(wheel) as archive:
        # All of it: a manifest may describe a file that is not a shared library (.metallib).
        archive.extractall(tmp)
        names = archive.namelist()
        if platform is not None or platforms == ("any",):  # else: the tag's problem says it
            problems += _misplaced(names, platform, wheel.name)
        manifests, manifest_problems = _read_manifests(
            sorted(Path(tmp, n) for n in names if n.endswith(MANIFEST_SUFFIX)), names
        )
        problems += manifest_problems
        problems += namespaces.duplicate_definitions(manifests.values())
        pin_problems, pin_notes = _torch_pin(manifests, _metadata(archive), wheel.name)
        problems += pin_problems
        notes += pin_notes
        if platform is not None:
            native = sorted(Path(tmp, n) for n in names if platform.is_native_library(n))
            for path in native:
                library, library_problems = _audit_library(
                    path, manifests.get(str(path)), platform, platforms, policy, cuobjdump
                )
                if library is not None:
                    libraries.append(library)
                problems += library_problems
    return WheelAudit(wheel, platforms, tuple(libraries), tuple(problems), tuple(notes))


def audit_native_library(
    path: Path,
    platform: Platform,
    platforms: tuple[str, ...],
    *,
    backend: str | None,
    abi: str = DEFAULT_ABI,
    policy: elf_audit.ManylinuxPolicy | None = None,
) -> tuple[LibraryAudit | None, list[str], bool]:
    """Every rule of ``platform``'s binary format for the library at ``path`` of a wheel
    tagged ``platforms`` (none: a lone file, whose tag rules are skipped): the summary
    (None for a format with no audit), the problems, and whether the file was readable.
    ``backend`` None: unknown (no manifest), which may link every backend's torch
    libraries. ``ptkit inspect`` reports these problems too."""
    patterns = (
        torch_libraries(backend, platform.name, abi)
        if backend is not None
        else all_torch_libraries(platform.name)
    )
    shown = backend if backend is not None else "any backend"
    if platform.binary_format == "ELF":
        elf = elf_audit.audit_elf_library(
            path,
            backend=shown,
            torch_patterns=patterns,
            platforms=platforms,
            policy=policy,
            abi=abi,
        )
        library = LibraryAudit(path.name, elf.needed, elf.highest_versions)
        return library, list(elf.problems), elf.readable
    if platform.binary_format == "Mach-O":
        macho = macho_audit.audit_macho_library(
            path, backend=shown, torch_patterns=patterns, platforms=platforms, abi=abi
        )
        library = LibraryAudit(
            path.name, macho.needed, {}, (), "Mach-O", macho.minimum_os, macho.archs
        )
        return library, list(macho.problems), macho.readable
    if platform.binary_format == "PE":
        pe = pe_audit.audit_pe_library(
            path, backend=shown, torch_patterns=patterns, platforms=platforms, abi=abi
        )
        machine = (pe.machine,) if pe.machine else ()
        return (
            LibraryAudit(path.name, pe.needed, {}, (), "PE", "", machine),
            list(pe.problems),
            pe.readable,
        )
    return None, [not_audited(path.name, platform)], False


def _audit_library(
    path: Path,
    manifest: Manifest | None,
    platform: Platform,
    platforms: tuple[str, ...],
    policy: elf_audit.ManylinuxPolicy | None,
    cuobjdump: str | None,
) -> tuple[LibraryAudit | None, list[str]]:
    """The audit of ``platform``'s binary format, then the GPU code against the manifest."""
    problems = []
    if manifest is None:
        problems.append(
            f"{path.name} has no manifest: the loader will not load it (a library the repair "
            "grafted?); exclude it from the repair or install it with "
            "ptkit_install_kernel_library"
        )
    library, format_problems, readable = audit_native_library(
        path,
        platform,
        platforms,
        backend=manifest.backend if manifest is not None else None,
        abi=manifest.torch_abi if manifest is not None else DEFAULT_ABI,
        policy=policy,
    )
    problems += format_problems
    if library is None:
        return None, problems
    if manifest is not None and readable:
        gpu, gpu_problems = _gpu_check(manifest, cuobjdump)
        problems += gpu_problems
        library = dataclasses.replace(library, gpu_targets=gpu)
    return library, problems
