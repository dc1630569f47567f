"""The public API of ``ptkit.runtime`` is pinned: names, signatures, record fields.

Downstream packages call ``ptkit.runtime.load_package(__name__)`` and read
``explain()`` / ``load_decisions()``; an upgrade must not break them. A failure here
means the surface changed: if the change is deliberate and compatible (a new name, a
new keyword parameter with a default, a new field at the end), update the pin below; if
it breaks callers (a removed or renamed name, parameter or field), bump
``ptkit.runtime.API_VERSION`` as well and say so in the release notes.

Also: the ``ptkit.packages`` entry-point discovery and ``load_package``'s errors, which
need no native library.
"""

from __future__ import annotations

import dataclasses
import inspect
import sys
import time
from pathlib import Path

import pytest

import ptkit.runtime
from ptkit.loading.packages import (
    PackageEntry,
    PackageLoadError,
    discover_packages,
    installed_packages,
    locate_package,
    native_dir_of,
    package_version,
)

API_VERSION = 1

# name -> str(inspect.signature(...)) for functions, the field names for dataclasses,
# the members for enums, the base class for exceptions.
FUNCTIONS: dict[str, str] = {
    "apply_profile": "(runtime_profile: 'RuntimeProfile | None' = None) -> 'str'",
    "compile_support": (
        "(*, python: 'tuple[int, int, int] | None' = None, gil_disabled: 'bool | None' = None, "
        "torch_version: 'str | None' = None, platform: 'str | None' = None, "
        "triton_available: 'bool | None' = None, device_types: 'tuple[str, ...] | None' = None, "
        "torch_root: 'Path | None' = None, cxx: \"str | Literal['find'] | None\" = 'find', "
        "python_h: 'bool | None' = None) -> 'CompileSupport'"
    ),
    "explain": "(package: 'str | None' = None) -> 'list[OpRoute]'",
    "format_explain": "(package: 'str | None' = None) -> 'str'",
    "installed_packages": "(paths: 'Sequence[str] | None' = None) -> 'dict[str, str]'",
    "load_decisions": "(package: 'str | None' = None) -> 'list[LoadDecision]'",
    "load_package": (
        "(package: 'str', *, native_dir: 'Path | None' = None, "
        "metal_binding: 'MetalBinding | None' = None, "
        "ops: 'Mapping[str, Sequence[str]] | None' = None, "
        "samples: 'Mapping[str, SampleInputs] | None' = None) -> 'PackageLoad'"
    ),
    "package_loads": "() -> 'list[PackageLoad]'",
    "profile": "() -> 'RuntimeProfile'",
    "read_manifest": "(path: 'Path') -> 'Manifest'",
}
RECORDS: dict[str, tuple[str, ...]] = {
    "LoadDecision": ("manifest_path", "status", "reason", "manifest", "details"),
    "OpRoute": ("op", "device_type", "implementation", "library", "reason", "namespace"),
    "PackageLoad": (
        "name",
        "version",
        "native_dir",
        "decisions",
        "defined_ops",
        "unavailable_ops",
    ),
    "Manifest": (
        "path",
        "package",
        "namespace",
        "library",
        "backend",
        "variant",
        "toolkit",
        "targets",
        "dropped_targets",
        "torch_target_version",
        "torch_built_with",
        "platform",
        "ops",
        "sha256",
        "registrations",
        # Added with defaults (API_VERSION stays 1): the ABI mode and the CPU requirements.
        "torch_abi",
        "torch_cxx11_abi",
        "requires_isa",
    ),
    "RuntimeSwitches": (
        "disabled_backends",
        "force_reference",
        "log_level",
        "problems",
        "cpu_isa_cap",
        "load_trace",
    ),
    "CompileSupport": (
        "supported",
        "reason",
        "gpu_codegen",
        "gpu_reason",
        "facts",
        "cpu_codegen",
        "cpu_reason",
        "checks_read",
    ),
    "RuntimeProfile": (
        "python",
        "torch",
        "platform",
        "devices",
        "compile",
        "graphs",
        "distributed",
        "gemm_backends",
        "ops",
    ),
}
ENUMS = {"LoadStatus": {"LOADED": "loaded", "SKIPPED": "skipped", "FAILED": "failed"}}
ERRORS = {
    "ManifestError": ValueError,
    "OpUnavailableError": RuntimeError,
    "PackageLoadError": ValueError,
}
METHODS = {
    ("PackageLoad", "available"): "(self, op: 'str') -> 'bool'",
    ("PackageLoad", "loaded"): "(self, backend: 'str | None' = None) -> 'bool'",
    ("PackageLoad", "to_json"): "(self) -> 'dict[str, Any]'",
    ("OpRoute", "to_json"): "(self) -> 'dict[str, str | None]'",
}


def test_api_version() -> None:
    assert ptkit.runtime.API_VERSION == API_VERSION
    assert isinstance(ptkit.runtime.API_VERSION, int)


def test_public_names_are_pinned() -> None:
    pinned = {"API_VERSION", *FUNCTIONS, *RECORDS, *ENUMS, *ERRORS}
    assert set(ptkit.runtime.__all__) == pinned, (
        "ptkit.runtime.__all__ changed: update tests/unit/test_runtime_api.py (and "
        "API_VERSION if a name was removed or renamed)"
    )
    for name in pinned:
        assert getattr(ptkit.runtime, name) is not None
        assert name in dir(ptkit.runtime)


@pytest.mark.parametrize("name", sorted(FUNCTIONS))
def test_function_signatures(name: str) -> None:
    function = getattr(ptkit.runtime, name)
    assert callable(function)
    assert str(inspect.signature(function)) == FUNCTIONS[name]


@pytest.mark.parametrize("name", sorted(RECORDS))
def test_record_fields(name: str) -> None:
    cls = getattr(ptkit.runtime, name)
    assert dataclasses.is_dataclass(cls)
    assert tuple(f.name for f in dataclasses.fields(cls)) == RECORDS[name]
    # Records are values: frozen, so a recorded decision cannot be edited by a caller.
    assert cls.__dataclass_params__.frozen  # type: ignore[attr-defined]


def test_enums_errors_and_methods() -> None:
    for name, members in ENUMS.items():
        cls = getattr(ptkit.runtime, name)
        assert {m.name: m.value for m in cls} == members
    for name, base in ERRORS.items():
        assert issubclass(getattr(ptkit.runtime, name), base)
    for (cls_name, method), signature in METHODS.items():
        assert str(inspect.signature(getattr(getattr(ptkit.runtime, cls_name), method))) == (
            signature
        )


# --- the ptkit.packages entry-point group ----------------------------------------------


def _dist(site: Path, folder: str, entry_points: str | None) -> Path:
    dist_info = site / folder
    dist_info.mkdir(parents=True)
    (dist_info / "METADATA").write_text("Metadata-Version: 2.1\nName: x\nVersion: 1\n")
    if entry_points is not None:
        (dist_info / "entry_points.txt").write_text(entry_points)
    return dist_info


def test_discovery_reads_entry_points_files(tmp_path: Path) -> None:
    first, second = tmp_path / "first", tmp_path / "second"
    _dist(
        first,
        "my_pkg-1.2.3+cu13.dist-info",
        "[console_scripts]\nmy = my_pkg.cli:main\n\n"
        "# comment\n[ptkit.packages]\nmy_pkg = my_pkg\nother = org.other:ignored [extra]\n",
    )
    _dist(first, "plain-0.1.dist-info", None)  # no entry points at all
    _dist(first, "broken.dist-info", "[ptkit.packages]\nbroken = broken\n")  # no version
    # Shadowed by the first path entry, as imports are: its entries do not count.
    _dist(second, "My.Pkg-0.9.dist-info", "[ptkit.packages]\nold = old\n")
    _dist(second, "late-2.0.dist-info", "[ptkit.packages]\nmy_pkg = late\nlate = late\n")
    paths = [str(first), str(tmp_path / "missing"), str(second)]
    entries = discover_packages(paths)
    assert [(e.name, e.module, e.distribution, e.version) for e in entries] == [
        ("my_pkg", "my_pkg", "my-pkg", "1.2.3+cu13"),
        ("other", "org.other", "my-pkg", "1.2.3+cu13"),
        ("late", "late", "late", "2.0"),
    ]
    assert isinstance(entries[0], PackageEntry)
    assert entries[0].dist_info == first / "my_pkg-1.2.3+cu13.dist-info"
    # In path order; the toolkit is no package of the group (it ships no kernels).
    assert installed_packages(paths) == {
        "my_pkg": "my_pkg",
        "other": "org.other",
        "late": "late",
    }
    assert package_version("my_pkg", paths) == "1.2.3+cu13"


def test_discovery_is_cheap() -> None:
    discover_packages()  # warm the file system cache
    start = time.perf_counter()
    for _ in range(10):
        discover_packages()
    per_call = (time.perf_counter() - start) / 10
    # About 2 ms for ~80 distributions; importlib.metadata takes 40-120 ms to import.
    assert per_call < 0.05, per_call


# --- load_package: the programmer's mistakes, and nothing else, raise -----------------


def test_unknown_package_is_an_error() -> None:
    with pytest.raises(PackageLoadError, match=r"expected an importable package named") as info:
        ptkit.runtime.load_package("ptkit_no_such_package_here")
    assert isinstance(info.value, ValueError)
    assert "ptkit.runtime.load_package" in str(info.value)
    with pytest.raises(PackageLoadError, match=r"expected the import name of a package"):
        ptkit.runtime.load_package("not a name")


def test_package_without_native_folder_is_an_error(tmp_path: Path) -> None:
    (tmp_path / "nonative_pkg").mkdir()
    (tmp_path / "nonative_pkg" / "__init__.py").write_text("")
    sys.path.insert(0, str(tmp_path))
    try:
        assert locate_package("nonative_pkg") == tmp_path / "nonative_pkg"
        with pytest.raises(PackageLoadError) as info:
            ptkit.runtime.load_package("nonative_pkg")
        message = str(info.value)
        assert str(tmp_path / "nonative_pkg" / "_native") in message
        assert "ptkit_add_kernel_library(... INSTALL_DIR nonative_pkg/_native)" in message
        with pytest.raises(PackageLoadError, match=r"got .*missing \(not a folder\)"):
            ptkit.runtime.load_package("nonative_pkg", native_dir=tmp_path / "missing")
        # Nothing was recorded for it.
        assert "nonative_pkg" not in {p.name for p in ptkit.runtime.package_loads()}
    finally:
        sys.path.remove(str(tmp_path))


def test_native_dir_of_a_dotted_name_imports_nothing(tmp_path: Path) -> None:
    native = tmp_path / "nsorg" / "inner" / "_native"
    native.mkdir(parents=True)
    # Importing nsorg would raise: locating must not run any __init__.
    (tmp_path / "nsorg" / "__init__.py").write_text("raise RuntimeError('imported')\n")
    (tmp_path / "nsorg" / "inner" / "__init__.py").write_text("")
    sys.path.insert(0, str(tmp_path))
    try:
        assert native_dir_of("nsorg.inner") == native
        assert "nsorg" not in sys.modules
    finally:
        sys.path.remove(str(tmp_path))
