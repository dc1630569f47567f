"""The release audit of a finished wheel: what ``ptkit build`` checks before it publishes.

A ptkit wheel must install on every CPython and every torch >= its target, on every
Linux its platform tag claims, and carry exactly the GPU code its manifests promise.
So, for the wheel as a whole and for each native library inside it:

* the tag is ``py3-none-<platform>``, the same in the file name and in ``WHEEL``
  (a tag relabelled by hand shows up as a mismatch);
* every DT_NEEDED is on an allow-list: torch (``libtorch_cpu``, ``libtorch_cuda``,
  ``libc10``), the GPU runtime torch has already loaded (``libcudart.so.<N>``,
  ``libamdhip64.so.<N>``, ``libsycl.so.<N>``) and the C/C++ runtime; nothing else,
  so no library would be missing on a user's machine;
* no libpython or libtorch_python, and no torch C++ symbol outside ``torch::stable``
  (:mod:`ptkit.release.audit`); no RPATH into the build machine;
* the highest GLIBC / GLIBCXX / CXXABI / GCC symbol version each library requires is
  allowed by the wheel's manylinux tag, per the policy table auditwheel ships;
* each manifest's sha256 is that of the file in the wheel, and the GPU code inside a
  library is the manifest's (:mod:`ptkit.release.fatbin`, :mod:`ptkit.release.offload`).

Every problem names the file, the cause and the fix. Needs ``pyelftools`` and
``packaging``; the manylinux check needs ``auditwheel`` (the policy table).
"""

from __future__ import annotations

import dataclasses
import hashlib
import importlib.util
import json
import re
import tempfile
import zipfile
from email.parser import Parser
from pathlib import Path

from ptkit.loading.manifest import MANIFEST_SUFFIX, Manifest, ManifestError, read_manifest
from ptkit.release import fatbin, offload
from ptkit.release.audit import FORBIDDEN_NEEDED, audit_elf

__all__ = [
    "ALLOWED_NEEDED",
    "LibraryAudit",
    "WheelAudit",
    "audit_wheel",
    "load_manylinux_policy",
    "required_symbol_versions",
]

# DT_NEEDED a ptkit library may have: torch and its GPU runtime come from the process
# that imported torch, the rest from the C/C++ runtime every manylinux system has.
ALLOWED_NEEDED = (
    re.compile(r"^libtorch_cpu\.so$"),
    re.compile(r"^libtorch_cuda\.so$"),
    re.compile(r"^libc10\.so$"),
    re.compile(r"^libcudart\.so\.\d+$"),
    re.compile(r"^libamdhip64\.so\.\d+$"),
    re.compile(r"^libsycl\.so\.\d+$"),
    re.compile(r"^lib(c|m|dl|rt|pthread)\.so\.\d+$"),
    re.compile(r"^libstdc\+\+\.so\.6$"),
    re.compile(r"^libgcc_s\.so\.1$"),
    re.compile(r"^ld-linux(-x86-64|-aarch64)?\.so\.\d+$"),
    re.compile(r"^ld64\.so\.\d+$"),
)

_NATIVE = re.compile(r"\.so(\.\d+)*$")
_MANYLINUX = re.compile(r"^(manylinux_(\d+)_(\d+))_(\w+)$")
_LEGACY_MANYLINUX = {"manylinux1": "manylinux_2_5", "manylinux2010": "manylinux_2_12"}
_LEGACY_MANYLINUX["manylinux2014"] = "manylinux_2_17"
_TOOLCHAIN_FIX = (
    "build in the manylinux image of the tag you need (cibuildwheel does), or let "
    "auditwheel choose the tag (`ptkit build` does)"
)


@dataclasses.dataclass(frozen=True)
class LibraryAudit:
    """One native library of the wheel: what it links and the newest symbol versions."""

    name: str
    needed: tuple[str, ...]
    # Per version prefix (GLIBC, GLIBCXX, CXXABI, GCC): the highest version required.
    highest_versions: dict[str, str]
    gpu_targets: tuple[str, ...] = ()

    def summary(self) -> str:
        versions = ", ".join(f"{k}_{v}" for k, v in sorted(self.highest_versions.items()))
        gpu = f"; GPU code {', '.join(self.gpu_targets)}" if self.gpu_targets else ""
        return f"{self.name}: links {', '.join(self.needed) or '-'}; needs {versions or '-'}{gpu}"


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


def _version_key(version: str) -> tuple[int, ...]:
    """``2.2.5`` < ``2.34``; non-numeric parts (``TM_1``) sort first."""
    return tuple(int(p) if p.isdigit() else -1 for p in re.split(r"[._]", version))


def required_symbol_versions(library: Path) -> dict[str, set[str]]:
    """``{soname: {"GLIBC_2.34", …}}`` from the library's version needs (.gnu.version_r).

    The dynamic loader is left out, as auditwheel does: its versions follow glibc's.
    """
    from elftools.elf.elffile import ELFFile
    from elftools.elf.gnuversions import GNUVerNeedSection

    found: dict[str, set[str]] = {}
    with library.open("rb") as f:
        for section in ELFFile(f).iter_sections():
            if not isinstance(section, GNUVerNeedSection):
                continue
            for verneed, auxiliaries in section.iter_versions():
                soname = str(verneed.name)
                if soname.startswith("ld-linux") or soname.startswith("ld64.so"):
                    continue
                found.setdefault(soname, set()).update(str(aux.name) for aux in auxiliaries)
    return found


def _highest_by_prefix(versions: dict[str, set[str]]) -> dict[str, str]:
    highest: dict[str, str] = {}
    for names in versions.values():
        for name in names:
            prefix, _, version = name.partition("_")
            if not version or prefix not in {"GLIBC", "GLIBCXX", "CXXABI", "GCC"}:
                continue
            if prefix not in highest or _version_key(version) > _version_key(highest[prefix]):
                highest[prefix] = version
    return highest


def _policy_file() -> Path | None:
    spec = importlib.util.find_spec("auditwheel")
    if spec is None or not spec.submodule_search_locations:
        return None
    path = Path(next(iter(spec.submodule_search_locations))) / "policy" / "manylinux-policy.json"
    return path if path.is_file() else None


def load_manylinux_policy(path: Path | None = None) -> dict[str, dict[str, dict[str, set[str]]]]:
    """``{policy name: {arch: {prefix: {version, …}}}}`` from auditwheel's policy table.

    The table is auditwheel's own, so the audit and the repair agree on what each
    manylinux tag allows; raises FileNotFoundError when auditwheel is not installed.
    """
    source = path or _policy_file()
    if source is None:
        raise FileNotFoundError(
            "auditwheel's manylinux-policy.json not found: pip install auditwheel "
            "(requirements/dev.txt pins it)"
        )
    table: dict[str, dict[str, dict[str, set[str]]]] = {}
    for entry in json.loads(source.read_text(encoding="utf-8")):
        by_arch = entry.get("symbol_versions", {})
        table[entry["name"]] = {
            arch: {prefix: set(versions) for prefix, versions in prefixes.items()}
            for arch, prefixes in by_arch.items()
        }
        for alias in entry.get("aliases", []):
            table[alias] = table[entry["name"]]
    return table


def _manylinux_problems(
    library: str,
    versions: dict[str, set[str]],
    platform: str,
    policy: dict[str, dict[str, dict[str, set[str]]]],
) -> list[str]:
    """Symbol versions ``library`` requires that ``platform``'s policy does not allow."""
    match = _MANYLINUX.match(platform)
    legacy = platform.split("_", 1)
    if match:
        name, arch = match.group(1), match.group(4)
    elif legacy[0] in _LEGACY_MANYLINUX and len(legacy) == 2:
        name, arch = _LEGACY_MANYLINUX[legacy[0]], legacy[1]
    else:
        return []
    allowed = policy.get(name, {}).get(arch)
    if allowed is None:
        return [
            f"{library}: no manylinux policy for {platform} in auditwheel's table: update "
            "auditwheel, or repair to a tag it knows"
        ]
    problems = []
    for soname, names in sorted(versions.items()):
        for full in sorted(names, key=lambda n: _version_key(n.partition("_")[2])):
            prefix, _, version = full.partition("_")
            if prefix in allowed and version not in allowed[prefix]:
                newest = max(allowed[prefix], key=_version_key)
                problems.append(
                    f"{library} needs {full} ({soname}), which {platform} does not allow "
                    f"(it allows up to {prefix}_{newest}): {_TOOLCHAIN_FIX}"
                )
    return problems


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
            f"{sorted(declared)}: the wheel was renamed by hand; let auditwheel repair set the tag"
        )
    return tuple(sorted({t.platform for t in tags})), problems


def _needed_problems(name: str, needed: tuple[str, ...]) -> list[str]:
    problems = []
    for lib in needed:
        if any(p.match(lib) for p in FORBIDDEN_NEEDED):
            continue  # audit_elf reports these with their own reason
        if not any(p.match(lib) for p in ALLOWED_NEEDED):
            problems.append(
                f"{name} links {lib}, which is neither torch, the GPU runtime torch loads, nor "
                "the C/C++ runtime: users would not have it; link it statically or drop the "
                "dependency"
            )
    return problems


def _by_arch(targets: set[str]) -> list[str]:
    """sm_90 before sm_100: numeric order."""
    return sorted(targets, key=lambda t: (int("".join(c for c in t if c.isdigit()) or 0), t))


def _gpu_check(manifest: Manifest, cuobjdump: str | None) -> tuple[tuple[str, ...], list[str]]:
    """The GPU targets inside the library against its manifest (CUDA and HIP)."""
    library = manifest.library_path
    if manifest.backend == "cuda":
        tool = fatbin.find_cuobjdump(cuobjdump)
        if tool is None:
            return (), [
                f"{manifest.library}: cuobjdump not found, the fatbinary cannot be checked: "
                "pip install nvidia-cuda-cuobjdump, or set PTKIT_CUOBJDUMP"
            ]
        try:
            found = fatbin.list_cuda_targets(library, tool)
            problems = fatbin.check_manifest(manifest.path, tool)
        except RuntimeError as exc:
            return (), [f"{manifest.library}: {exc}"]
        targets = tuple(_by_arch(found.sass) + _by_arch(found.ptx))
        return targets, [f"{p}: rebuild; the arch list was lost on the way" for p in problems]
    if manifest.backend == "hip":
        try:
            gfx = tuple(offload.list_hip_targets(library))
            problems = offload.check_manifest(manifest.path)
        except (OSError, offload.OffloadError) as exc:
            return (), [f"{manifest.library}: {exc}"]
        return gfx, [f"{p}: rebuild; the target list was lost on the way" for p in problems]
    return (), []


def _audit_library(
    path: Path,
    manifest: Manifest | None,
    platforms: tuple[str, ...],
    policy: dict[str, dict[str, dict[str, set[str]]]] | None,
    cuobjdump: str | None,
) -> tuple[LibraryAudit, list[str]]:
    from elftools.common.exceptions import ELFError

    name = path.name
    try:
        elf = audit_elf(path)
        versions = required_symbol_versions(path)
    except (ELFError, OSError, ValueError) as exc:
        problem = f"{name}: not a readable ELF library ({exc}): the wheel is corrupt; rebuild it"
        return LibraryAudit(name, (), {}), [problem]
    problems = list(elf.problems) + _needed_problems(name, elf.needed)
    for entry in elf.rpath:
        for item in entry.split(":"):
            if item and not item.startswith("$ORIGIN"):
                problems.append(
                    f"{name} has RPATH {item}, a path on the build machine: torch's libraries "
                    'must come from the process that imported torch; set INSTALL_RPATH ""'
                )
    if policy is not None:
        for platform in platforms:
            problems += _manylinux_problems(name, versions, platform, policy)
    gpu: tuple[str, ...] = ()
    if manifest is not None:
        gpu, gpu_problems = _gpu_check(manifest, cuobjdump)
        problems += gpu_problems
    return LibraryAudit(name, elf.needed, _highest_by_prefix(versions), gpu), problems


def _read_manifests(native: list[Path]) -> tuple[dict[str, Manifest], list[str]]:
    """Manifests by library file name (with its folder), and the problems reading them."""
    manifests: dict[str, Manifest] = {}
    problems = []
    for path in native:
        if not path.name.endswith(MANIFEST_SUFFIX):
            continue
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
            problems.append(
                f"{manifest.library}: sha256 {digest} but {path.name} says {manifest.sha256}: "
                "the library changed after the manifest was written (a repair that patched it, "
                "a hand edit); rebuild, and repair with the torch and GPU runtimes excluded"
            )
    return manifests, problems


def audit_wheel(
    wheel: Path,
    *,
    cuobjdump: str | None = None,
    policy_file: Path | None = None,
) -> WheelAudit:
    """Audit ``wheel`` (see the module docstring); ``problems`` empty means releasable."""
    platforms, problems = _check_tags(wheel)
    notes: list[str] = []
    policy = None
    if any(p.startswith("manylinux") for p in platforms):
        try:
            policy = load_manylinux_policy(policy_file)
        except FileNotFoundError as exc:
            problems.append(f"the manylinux symbol versions cannot be checked: {exc}")
    elif platforms:
        notes.append(
            f"platform {'.'.join(platforms)} is not manylinux: symbol versions not checked"
        )
    libraries = []
    with tempfile.TemporaryDirectory() as tmp, zipfile.ZipFile(wheel) as archive:
        # All of it: a manifest may describe a file that is not a shared library (.metallib).
        archive.extractall(tmp)
        names = [
            n
            for n in archive.namelist()
            if _NATIVE.search(n) or n.endswith(MANIFEST_SUFFIX) or n.endswith(".dylib")
        ]
        native = sorted(Path(tmp, n) for n in names)
        manifests, manifest_problems = _read_manifests(native)
        problems += manifest_problems
        for path in native:
            if path.name.endswith(MANIFEST_SUFFIX):
                continue
            manifest = manifests.get(str(path))
            if manifest is None:
                problems.append(
                    f"{path.name} has no manifest: the loader will not load it (a library "
                    "auditwheel grafted?); exclude it from the repair or install it with "
                    "ptkit_install_kernel_library"
                )
            if path.read_bytes()[:4] != b"\x7fELF":
                notes.append(f"{path.name} is not ELF: link and symbol checks skipped")
                continue
            library, library_problems = _audit_library(path, manifest, platforms, policy, cuobjdump)
            libraries.append(library)
            problems += library_problems
    return WheelAudit(wheel, platforms, tuple(libraries), tuple(problems), tuple(notes))
