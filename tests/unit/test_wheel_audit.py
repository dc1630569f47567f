"""The release audit's rules (ptkit.release.wheel_audit, ptkit.release.elf_audit) on real
files: small libraries compiled here with gcc, each breaking one rule, in wheels written
here. No built wheel is needed (the built cpu wheel's own audit is in
tests/integration/test_wheel.py)."""

from __future__ import annotations

import hashlib
import json
import platform
import subprocess
import zipfile
from pathlib import Path

import pytest

from ptkit.release.elf_audit import audit_elf, load_manylinux_policy, required_symbol_versions
from ptkit.release.wheel_audit import audit_wheel

ARCH = platform.machine()
PACKAGE = "ptkit_ops"


def _manifest(library: str, data: bytes, backend: str = "cpu", **changes: object) -> bytes:
    """A valid manifest describing ``library`` (its sha256) for ``backend``."""
    manifest = {
        "schema_version": 1,
        "package": PACKAGE,
        "namespace": "ptkit",
        "library": library,
        "backend": backend,
        "variant": "cpu",
        "toolkit": {"name": "gnu", "version": "12.2.0"},
        "targets": {"isa": ["default"]},
        "dropped_targets": [],
        "torch": {"target_version": "2.10", "built_with": "2.14.1"},
        "platform": f"linux-{ARCH}",
        "ops": {"rms_norm": ["float32"]},
        "sha256": hashlib.sha256(data).hexdigest(),
    }
    manifest.update(changes)
    return json.dumps(manifest).encode()


def _wheel(
    folder: Path,
    files: dict[str, bytes],
    *,
    platform_tag: str = f"manylinux_2_36_{ARCH}",
    file_tag: str | None = None,
) -> Path:
    """A wheel holding ``files`` under ptkit_ops/_native/, tagged py3-none-<platform_tag>.

    ``file_tag`` renames the file only (WHEEL keeps py3-none-<platform_tag>).
    """
    tag = f"py3-none-{platform_tag}"
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{PACKAGE}-0.1.0+cpu-{file_tag or tag}.whl"
    with zipfile.ZipFile(path, "w") as z:
        z.writestr(f"{PACKAGE}/__init__.py", "")
        for name, data in files.items():
            z.writestr(f"{PACKAGE}/_native/{name}", data)
        z.writestr(
            f"{PACKAGE}-0.1.0+cpu.dist-info/WHEEL",
            f"Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: false\nTag: {tag}\n",
        )
        z.writestr(
            f"{PACKAGE}-0.1.0+cpu.dist-info/METADATA",
            f"Metadata-Version: 2.1\nName: {PACKAGE}\nVersion: 0.1.0+cpu\n",
        )
    return path


def _library(
    folder: Path,
    name: str,
    source: str = "int ptkit_test_f(void) { return 1; }\n",
    *,
    links: tuple[Path, ...] = (),
    flags: tuple[str, ...] = (),
    compiler: str = "gcc",
) -> Path:
    """A shared library compiled here; ``links`` become its DT_NEEDED (by their soname)."""
    src = folder / f"{name}.{'c' if compiler == 'gcc' else 'cpp'}"
    src.write_text(source)
    out = folder / name
    cmd = [compiler, "-shared", "-fPIC", "-o", str(out), str(src), f"-Wl,-soname,{name}"]
    cmd += ["-Wl,--no-as-needed", *map(str, links), *flags]
    subprocess.run(cmd, check=True, capture_output=True, text=True)
    return out


@pytest.fixture
def torch_stubs(tmp_path: Path) -> tuple[Path, ...]:
    """Stand-ins for the torch libraries a CPU kernel library links."""
    stubs = tmp_path / "stubs"
    stubs.mkdir()
    return tuple(_library(stubs, name) for name in ("libtorch_cpu.so", "libc10.so"))


def _library_wheel(
    folder: Path, library: Path, backend: str = "cpu", **kwargs: str | object
) -> Path:
    data = library.read_bytes()
    manifest = {k: v for k, v in kwargs.items() if k not in ("platform_tag", "file_tag")}
    tags = {k: str(v) for k, v in kwargs.items() if k in ("platform_tag", "file_tag")}
    return _wheel(
        folder,
        {
            library.name: data,
            "test.manifest.json": _manifest(library.name, data, backend, **manifest),
        },
        **tags,
    )


def test_a_library_of_torch_and_the_c_runtime_passes(
    tmp_path: Path, torch_stubs: tuple[Path, ...]
) -> None:
    library = _library(tmp_path, "libptkit_cpu.so", links=torch_stubs)
    result = audit_wheel(_library_wheel(tmp_path / "wheel", library))
    assert result.problems == (), result.format()
    (lib,) = result.libraries
    assert lib.name == "libptkit_cpu.so"
    assert {"libtorch_cpu.so", "libc10.so"} <= set(lib.needed)
    assert "GLIBC" in lib.highest_versions
    assert "libptkit_cpu.so: links libtorch_cpu.so, libc10.so" in lib.summary()


def test_symbol_versions_are_read_per_library(tmp_path: Path) -> None:
    library = _library(
        tmp_path,
        "libcxx.so",
        '#include <string>\nextern "C" int f(const char* s) { return std::string(s).size(); }\n',
        compiler="g++",
    )
    versions = required_symbol_versions(library)
    assert any(v.startswith("GLIBCXX_") for v in versions["libstdc++.so.6"])
    assert any(v.startswith("GLIBC_") for v in versions["libc.so.6"])
    assert not any(name.startswith("ld-linux") for name in versions)


def test_policy_table_is_auditwheels_own() -> None:
    policy = load_manylinux_policy()
    glibc_2_28 = policy["manylinux_2_28"]["x86_64"]["GLIBC"]
    assert "2.28" in glibc_2_28 and "2.29" not in glibc_2_28
    assert policy["manylinux2014"] is policy["manylinux_2_17"]


def test_a_glibc_symbol_newer_than_the_tag_fails_and_the_right_tag_passes(tmp_path: Path) -> None:
    """arc4random is new in glibc 2.36: manylinux_2_35 must reject it, manylinux_2_36 not."""
    library = _library(
        tmp_path,
        "libnew.so",
        "#include <stdlib.h>\nunsigned ptkit_test_random(void) { return arc4random(); }\n",
    )
    assert "GLIBC_2.36" in required_symbol_versions(library)["libc.so.6"]
    rejected = audit_wheel(
        _library_wheel(tmp_path / "old", library, platform_tag=f"manylinux_2_35_{ARCH}")
    )
    assert any(
        "libnew.so needs GLIBC_2.36 (libc.so.6)" in p
        and f"manylinux_2_35_{ARCH} does not allow" in p
        and "allows up to GLIBC_2.35" in p
        and "manylinux image" in p
        for p in rejected.problems
    ), rejected.format()
    assert audit_wheel(_library_wheel(tmp_path / "new", library)).problems == ()


def test_libpython_and_unknown_libraries_are_rejected(tmp_path: Path) -> None:
    python = _library(tmp_path, "libpython3.11.so.1.0")
    other = _library(tmp_path, "libfoo.so.1")
    library = _library(tmp_path, "libbad.so", links=(python, other))
    problems = audit_wheel(_library_wheel(tmp_path / "wheel", library)).problems
    assert any(
        "links libpython3.11.so.1.0 (DT_NEEDED): the wheel would run on one Python only, and "
        "auditwheel's repair drops the entry" in p
        for p in problems
    )
    assert any(
        "links libfoo.so.1, which is neither what torch provides to cpu code" in p for p in problems
    )
    assert len(problems) == 2, problems


def test_a_gpu_runtime_is_allowed_to_its_backend_only(tmp_path: Path) -> None:
    """The backends' one table: a HIP library may link libamdhip64 (torch's ROCm build
    loads it), a CPU library may not, and neither may link the CUDA runtime."""
    runtimes = tuple(
        _library(tmp_path, name)
        for name in ("libtorch_cpu.so", "libtorch_hip.so", "libc10_hip.so", "libamdhip64.so.5")
    )
    library = _library(tmp_path, "libptkit_hip.so", links=runtimes)
    hip = audit_wheel(_library_wheel(tmp_path / "hip", library, "hip", targets={"gfx": []}))
    assert hip.problems == (), hip.format()
    cpu = audit_wheel(_library_wheel(tmp_path / "cpu", library, "cpu"))
    assert sorted(p.split(",")[0] for p in cpu.problems) == [
        "libptkit_hip.so links libamdhip64.so.5",
        "libptkit_hip.so links libc10_hip.so",
        "libptkit_hip.so links libtorch_hip.so",
    ]
    cudart = _library(tmp_path, "libcudart.so.13")
    mixed = _library(tmp_path, "libmixed.so", links=(*runtimes, cudart))
    problems = audit_wheel(
        _library_wheel(tmp_path / "mixed", mixed, "hip", targets={"gfx": []})
    ).problems
    assert [p.split(",")[0] for p in problems] == ["libmixed.so links libcudart.so.13"]


# Torch C++ symbols of three namespaces (as torch's classic C++ API names them) and one of
# torch::stable's header-only helpers.
CLASSIC_SOURCE = (
    "void _ZN3c106detail14torchCheckFailEv(void);\n"
    "void _ZN3c1010TensorType3getEv(void);\n"
    "void _ZN2at4_ops10mul_Scalar4callEv(void);\n"
    "void _ZN5torch7Library4_defEv(void);\n"
    "void _ZN5torch6stable6detail4callEv(void);\n"
    "void f(void) { _ZN3c106detail14torchCheckFailEv(); _ZN3c1010TensorType3getEv();\n"
    "  _ZN2at4_ops10mul_Scalar4callEv(); _ZN5torch7Library4_defEv();\n"
    "  _ZN5torch6stable6detail4callEv(); }\n"
)


def test_torch_cxx_symbols_outside_the_stable_abi_are_one_summary(tmp_path: Path) -> None:
    library = _library(tmp_path, "libunstable.so", CLASSIC_SOURCE)
    assert "_ZN3c106detail14torchCheckFailEv" in audit_elf(library).undefined
    (problem,) = audit_wheel(_library_wheel(tmp_path / "wheel", library)).problems
    assert problem.startswith(
        "libunstable.so needs 4 torch C++ symbols outside the stable ABI (2 c10::, 1 at::, "
        "1 torch::; first: "
    )
    # Demangled (binutils' c++filt), the first few only.
    assert "at::_ops::mul_Scalar::call()" in problem and "and 1 more" in problem
    assert problem.endswith(
        "it uses torch's classic C++ API. Fix: build it in the torch mode "
        "(ptkit_add_kernel_library(… ABI torch): one wheel per torch minor), or port it to the "
        "stable ABI (torch/csrc/stable/; ptkit's docs/porting.md)"
    )


def test_a_torch_mode_library_is_entitled_to_torchs_cxx_symbols_and_libraries(
    tmp_path: Path,
) -> None:
    stubs = tmp_path / "stubs"
    stubs.mkdir()
    torch = tuple(_library(stubs, n) for n in ("libtorch_cpu.so", "libc10.so", "libtorch.so"))
    library = _library(tmp_path, "libclassic.so", CLASSIC_SOURCE, links=torch)
    classic = {"target_version": "2.14", "built_with": "2.14.1+cu130", "abi": "torch"}
    result = audit_wheel(_library_wheel(tmp_path / "wheel", library, torch=classic))
    assert result.problems == (), result.format()
    # Python stays out in both modes.
    python = _library(tmp_path, "libtorch_python.so")
    tied = _library(tmp_path, "libtied.so", CLASSIC_SOURCE, links=(*torch, python))
    (problem,) = audit_wheel(_library_wheel(tmp_path / "tied", tied, torch=classic)).problems
    assert problem.startswith("libtied.so links libtorch_python.so (DT_NEEDED), torch's Python")


def test_pythons_c_api_and_a_module_init_are_named(tmp_path: Path) -> None:
    """What a setup.py-built _C.abi3.so has: Python's symbols undefined (they resolve in the
    Python process only) and PyInit_<name> exported."""
    source = (
        "void* PyModule_Create2(void*, int);\nvoid _Py_Dealloc(void*);\n"
        "void* PyInit__C(void) { _Py_Dealloc(0); return PyModule_Create2(0, 1013); }\n"
    )
    library = _library(tmp_path, "_C.abi3.so", source)
    elf = audit_elf(library)
    assert [p.split(":")[0] for p in elf.python_problems] == [
        "_C.abi3.so needs 2 symbols of Python's C API or torch's Python bindings "
        "(PyModule_Create2, _Py_Dealloc)",
        "_C.abi3.so exports PyInit__C",
    ]
    assert all("TORCH_LIBRARY (ABI torch" in p for p in elf.python_problems)
    # The audit reports them too, whatever the library's ABI mode.
    problems = audit_wheel(_library_wheel(tmp_path / "wheel", library)).problems
    assert len(problems) == 2 and problems[0].startswith("_C.abi3.so needs 2 symbols")


def test_an_rpath_into_the_build_machine_is_rejected(tmp_path: Path) -> None:
    library = _library(tmp_path, "librpath.so", flags=("-Wl,-rpath,/opt/build/lib",))
    problems = audit_wheel(_library_wheel(tmp_path / "wheel", library)).problems
    assert len(problems) == 1 and "RPATH /opt/build/lib" in problems[0]
    origin = _library(tmp_path, "liborigin.so", flags=("-Wl,-rpath,$ORIGIN",))
    assert audit_wheel(_library_wheel(tmp_path / "origin", origin)).problems == ()


def test_a_manifest_sha256_that_is_not_the_librarys_fails(tmp_path: Path) -> None:
    library = _library(tmp_path, "libptkit_cpu.so")
    data = library.read_bytes()
    manifest = _manifest(library.name, data, sha256="0" * 64)
    wheel = _wheel(tmp_path / "wheel", {library.name: data, "m.manifest.json": manifest})
    (problem,) = audit_wheel(wheel).problems
    assert "libptkit_cpu.so: sha256" in problem and f"says {'0' * 64}" in problem
    assert "rebuild" in problem


def test_a_library_without_manifest_and_a_manifest_without_library_fail(tmp_path: Path) -> None:
    data = _library(tmp_path, "libptkit_cpu.so").read_bytes()
    wheel = _wheel(
        tmp_path / "wheel",
        {"libptkit_cpu.so": data, "orphan.manifest.json": _manifest("libgone.so", data)},
    )
    problems = audit_wheel(wheel).problems
    assert any("libptkit_cpu.so has no manifest" in p for p in problems)
    assert any("describes libgone.so, which the wheel does not hold" in p for p in problems)


def test_a_hip_manifest_must_match_the_offload_bundles(tmp_path: Path) -> None:
    """A library without a .hip_fatbin section under a manifest promising gfx90a."""
    library = _library(tmp_path, "libptkit_hip.so")
    wheel = _library_wheel(
        tmp_path / "wheel",
        library,
        "hip",
        targets={"gfx": ["gfx90a"]},
        toolkit={"name": "hip", "version": "5.2"},
    )
    result = audit_wheel(wheel)
    assert any(
        "AMD GPU code in libptkit_hip.so: []; manifest says ['gfx90a']" in p
        for p in result.problems
    ), result.format()


def test_tags_must_be_py3_none_and_match_the_wheel_file(tmp_path: Path) -> None:
    library = _library(
        tmp_path,
        "libptkit_cpu.so",
        "#include <stdlib.h>\nunsigned ptkit_test_random(void) { return arc4random(); }\n",
    )
    data = library.read_bytes()
    files = {library.name: data, "m.manifest.json": _manifest(library.name, data)}
    cpython = _wheel(tmp_path / "abi", files, file_tag=f"cp311-cp311-manylinux_2_36_{ARCH}")
    assert any("is not py3-none-<platform>" in p for p in audit_wheel(cpython).problems)
    relabelled = _wheel(tmp_path / "renamed", files, file_tag=f"py3-none-manylinux_2_17_{ARCH}")
    problems = audit_wheel(relabelled).problems
    assert any("renamed by hand" in p for p in problems)
    # And the symbol versions are checked against the tag in the name.
    assert any(f"manylinux_2_17_{ARCH} does not allow" in p for p in problems)


def test_a_linux_tag_is_noted_not_checked(tmp_path: Path) -> None:
    library = _library(tmp_path, "libptkit_cpu.so")
    result = audit_wheel(_library_wheel(tmp_path / "wheel", library, platform_tag=f"linux_{ARCH}"))
    assert result.problems == ()
    assert any("is not manylinux" in n for n in result.notes)


@pytest.mark.parametrize("truncate", [64, 5000])
def test_a_corrupt_library_is_a_problem_not_a_traceback(tmp_path: Path, truncate: int) -> None:
    source = "int a[4096] = {1};\nint f(void) { return a[7]; }\n"
    data = _library(tmp_path, "libptkit_cpu.so", source).read_bytes()[:truncate]
    wheel = _wheel(
        tmp_path / "wheel",
        {"libptkit_cpu.so": data, "m.manifest.json": _manifest("libptkit_cpu.so", data)},
    )
    problems = audit_wheel(wheel).problems
    assert any("not a readable ELF library" in p for p in problems), problems


# --- the platform of the wheel's tag ------------------------------------------------


@pytest.mark.parametrize(
    ("platform_tag", "library", "binary_format"),
    [
        ("macosx_14_0_arm64", "libptkit_cpu.dylib", "Mach-O"),
        ("win_amd64", "ptkit_cpu.dll", "PE"),
    ],
)
def test_a_macos_or_windows_wheel_is_audited_in_its_format(
    tmp_path: Path, platform_tag: str, library: str, binary_format: str
) -> None:
    """The tag's platform picks the reader; a file it cannot read is a problem, never a
    pass (real dylibs and DLLs: tests/unit/test_macho_audit.py, test_pe_audit.py)."""
    data = b"MZ not a library: no header the reader knows"
    wheel = _wheel(
        tmp_path,
        {library: data, "m.manifest.json": _manifest(library, data)},
        platform_tag=platform_tag,
    )
    (problem,) = audit_wheel(wheel).problems
    assert problem.startswith(f"{library}: not a readable {binary_format} library (")
    assert problem.endswith("the wheel is corrupt; rebuild it")


def test_a_pure_wheel_passes_without_native_libraries_and_fails_with_one(tmp_path: Path) -> None:
    """The toolkit wheel is py3-none-any: a native library in it would be a mistake."""
    pure = _wheel(tmp_path / "pure", {}, platform_tag="any")
    assert audit_wheel(pure).problems == ()
    data = _library(tmp_path, "libptkit_cpu.so").read_bytes()
    native = _wheel(tmp_path / "native", {"libptkit_cpu.so": data}, platform_tag="any")
    (problem,) = audit_wheel(native).problems
    assert "libptkit_cpu.so is a native library (ELF)" in problem
    assert "whose tag says it runs anywhere" in problem


def test_another_platforms_library_and_an_unknown_tag_are_problems(tmp_path: Path) -> None:
    library = _library(tmp_path, "libptkit_cpu.so")
    data = library.read_bytes()
    files = {library.name: data, "m.manifest.json": _manifest(library.name, data)}
    mixed = _wheel(tmp_path / "mixed", {**files, "ptkit_cpu.dll": b"MZ"})
    (problem,) = audit_wheel(mixed).problems
    assert "ptkit_cpu.dll is a windows library (PE) in a linux wheel" in problem
    unknown = _wheel(tmp_path / "unknown", files, platform_tag="freebsd_14_0_amd64")
    (problem,) = audit_wheel(unknown).problems
    assert "platform tag freebsd_14_0_amd64 is of no platform ptkit knows" in problem


def test_a_hash_mismatch_the_repair_caused_says_what_it_changed(tmp_path: Path) -> None:
    """auditwheel's marks in a repaired wheel: a library grafted into ptkit_ops.libs/ and
    named by the kernel library's DT_NEEDED, an $ORIGIN RPATH; or the RPATH alone, what it
    leaves when it removed libpython's DT_NEEDED. Never a bare hash mismatch then."""
    grafted = _library(tmp_path, "libfoo-1a2b3c4d.so.1")
    library = _library(
        tmp_path,
        "libptkit_cpu.so",
        links=(grafted,),
        flags=("-Wl,-rpath,$ORIGIN/../../ptkit_ops.libs",),
    )
    wheel = _library_wheel(tmp_path / "wheel", library, sha256="0" * 64)
    with zipfile.ZipFile(wheel, "a") as archive:
        archive.write(grafted, "ptkit_ops.libs/libfoo-1a2b3c4d.so.1")
    changed = [p for p in audit_wheel(wheel).problems if "changed after" in p]
    assert changed == [
        "libptkit_cpu.so changed after test.manifest.json was written: auditwheel's repair "
        "changed it: it grafted libfoo-1a2b3c4d.so.1 into the wheel and rewrote its DT_NEEDED "
        "and RPATH ($ORIGIN/../../ptkit_ops.libs) to them, because the library links a library "
        "that is neither torch's nor the C/C++ runtime. Fix: link that library statically or "
        "drop the dependency"
    ]
    (tmp_path / "alone").mkdir()
    alone = _library(tmp_path / "alone", "libptkit_cpu.so", flags=("-Wl,-rpath,$ORIGIN/../x.libs",))
    (problem,) = audit_wheel(_library_wheel(tmp_path / "w2", alone, sha256="0" * 64)).problems
    assert "it set RPATH $ORIGIN/../x.libs and grafted nothing" in problem
    assert "(libpython): the unrepaired library links Python" in problem


def _pinned_wheel(folder: Path, library: Path, requires: str | None, **manifest: object) -> Path:
    """``_library_wheel``'s wheel, its METADATA with ``Requires-Dist: <requires>``."""
    wheel = _library_wheel(folder, library, **manifest)
    rewritten = folder / "pinned" / wheel.name
    rewritten.parent.mkdir()
    with zipfile.ZipFile(wheel) as source, zipfile.ZipFile(rewritten, "w") as target:
        for info in source.infolist():
            data = source.read(info)
            if info.filename.endswith("METADATA") and requires:
                data += f"Requires-Dist: {requires}\n".encode()
            target.writestr(info, data)
    return rewritten


CLASSIC_214 = {"target_version": "2.14", "built_with": "2.14.1+cu130", "abi": "torch"}


@pytest.mark.parametrize(
    ("requires", "problem", "note"),
    [
        ("torch>=2.14,<2.15", None, None),
        ("torch==2.14.*", None, None),
        (
            "torch>=2.10",
            "requires torch>=2.10, but its torch-mode libraries load into torch 2.14 only: pin "
            "torch>=2.14,<2.15",
            None,
        ),
        ("torch>=2.13,<2.14", "requires torch<2.14,>=2.13, but its torch-mode libraries", None),
        (None, None, "its torch-mode libraries load into torch 2.14 only, and its metadata does not pin torch"),
    ],
)  # fmt: skip
def test_a_torch_mode_wheel_pins_its_torch_minor(
    tmp_path: Path, requires: str | None, problem: str | None, note: str | None
) -> None:
    library = _library(tmp_path, "libclassic.so")
    result = audit_wheel(_pinned_wheel(tmp_path / "w", library, requires, torch=CLASSIC_214))
    if problem is None:
        assert result.problems == (), result.format()
    else:
        (found,) = result.problems
        assert problem in found, found
    assert (
        any(note in n for n in result.notes) if note else not any("pin" in n for n in result.notes)
    )


def test_a_wheel_of_torch_mode_libraries_of_two_minors_is_refused(tmp_path: Path) -> None:
    one = _library(tmp_path, "libone.so")
    two = _library(tmp_path, "libtwo.so")
    classic_213 = {"target_version": "2.13", "built_with": "2.13.0+cpu", "abi": "torch"}
    wheel = _wheel(
        tmp_path / "wheel",
        {
            one.name: one.read_bytes(),
            "one.manifest.json": _manifest(one.name, one.read_bytes(), torch=CLASSIC_214),
            two.name: two.read_bytes(),
            "two.manifest.json": _manifest(two.name, two.read_bytes(), torch=classic_213),
        },
    )
    (problem,) = audit_wheel(wheel).problems
    assert (
        "built for different torch minors (libtwo.so (torch 2.13), libone.so (torch 2.14))"
        in problem
    )
