"""The release audit's rules (ptkit.release.wheel_audit) on real files: the installed CPU
library, and small libraries compiled here with gcc to break one rule each."""

from __future__ import annotations

import hashlib
import json
import platform
import subprocess
import zipfile
from importlib.metadata import distribution
from pathlib import Path

import pytest

from ptkit.release.wheel_audit import (
    audit_wheel,
    load_manylinux_policy,
    required_symbol_versions,
)

ARCH = platform.machine()
# The installed wheel's libraries (the suite runs against the installed ptkit).
NATIVE = Path(str(distribution("ptkit").locate_file("ptkit/_native")))
CPU_LIBRARY = NATIVE / "libptkit_cpu.so"
CPU_MANIFEST = NATIVE / "ptkit_cpu.manifest.json"


def _manifest_for(library: str, data: bytes, **changes: object) -> bytes:
    """The installed CPU manifest, describing ``library`` (with its sha256) instead."""
    manifest = json.loads(CPU_MANIFEST.read_text())
    manifest.update(library=library, sha256=hashlib.sha256(data).hexdigest(), **changes)
    return json.dumps(manifest).encode()


def _wheel(
    folder: Path,
    files: dict[str, bytes],
    *,
    platform_tag: str = f"manylinux_2_36_{ARCH}",
    file_tag: str | None = None,
) -> Path:
    """A wheel holding ``files`` under ptkit/_native/, tagged py3-none-<platform_tag>.

    ``file_tag`` renames the file only (WHEEL keeps py3-none-<platform_tag>).
    """
    tag = f"py3-none-{platform_tag}"
    path = folder / f"ptkit-0.1.0+cpu-{file_tag or tag}.whl"
    with zipfile.ZipFile(path, "w") as z:
        for name, data in files.items():
            z.writestr(f"ptkit/_native/{name}", data)
        z.writestr(
            "ptkit-0.1.0+cpu.dist-info/WHEEL",
            f"Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: false\nTag: {tag}\n",
        )
        z.writestr("ptkit-0.1.0+cpu.dist-info/METADATA", "Metadata-Version: 2.1\nName: ptkit\n")
    return path


def _gcc_library(
    folder: Path,
    name: str,
    source: str = "int ptkit_test_f(void) { return 1; }\n",
    *,
    soname: str | None = None,
    links: tuple[Path, ...] = (),
    flags: tuple[str, ...] = (),
) -> Path:
    """A shared library compiled here; ``links`` become its DT_NEEDED (by their soname)."""
    src = folder / f"{name}.c"
    src.write_text(source)
    out = folder / name
    cmd = ["gcc", "-shared", "-fPIC", "-o", str(out), str(src), f"-Wl,-soname,{soname or name}"]
    cmd += ["-Wl,--no-as-needed", *map(str, links), *flags]
    subprocess.run(cmd, check=True, capture_output=True, text=True)
    return out


def _library_wheel(folder: Path, library: Path, **kwargs: str) -> Path:
    data = library.read_bytes()
    return _wheel(
        folder,
        {library.name: data, "test.manifest.json": _manifest_for(library.name, data)},
        **kwargs,
    )


def test_the_installed_cpu_library_passes_the_audit(tmp_path: Path) -> None:
    data = CPU_LIBRARY.read_bytes()
    # The most permissive manylinux tag auditwheel knows: only the rules, not the tag, can fail.
    newest = max(
        (name for name in load_manylinux_policy() if name.startswith("manylinux_")),
        key=lambda n: tuple(int(p) for p in n.split("_")[1:]),
    )
    wheel = _wheel(
        tmp_path,
        {"libptkit_cpu.so": data, "ptkit_cpu.manifest.json": CPU_MANIFEST.read_bytes()},
        platform_tag=f"{newest}_{ARCH}",
    )
    result = audit_wheel(wheel)
    assert result.problems == (), result.format()
    (lib,) = result.libraries
    assert lib.name == "libptkit_cpu.so"
    assert "libtorch_cpu.so" in lib.needed
    assert set(lib.highest_versions) >= {"GLIBC", "GLIBCXX"}


def test_symbol_versions_are_read_per_library() -> None:
    versions = required_symbol_versions(CPU_LIBRARY)
    assert "GLIBC_2.2.5" in versions["libc.so.6"] or ARCH != "x86_64"
    assert any(v.startswith("GLIBCXX_") for v in versions["libstdc++.so.6"])
    assert not any(name.startswith("ld-linux") for name in versions)


def test_policy_table_is_auditwheels_own() -> None:
    policy = load_manylinux_policy()
    glibc_2_28 = policy["manylinux_2_28"]["x86_64"]["GLIBC"]
    assert "2.28" in glibc_2_28 and "2.29" not in glibc_2_28
    assert policy["manylinux2014"] is policy["manylinux_2_17"]


def test_a_glibc_symbol_newer_than_the_tag_fails_and_the_right_tag_passes(tmp_path: Path) -> None:
    """arc4random is new in glibc 2.36: manylinux_2_35 must reject it, manylinux_2_36 not."""
    library = _gcc_library(
        tmp_path,
        "libnew.so",
        "#include <stdlib.h>\nunsigned ptkit_test_random(void) { return arc4random(); }\n",
    )
    assert "GLIBC_2.36" in required_symbol_versions(library)["libc.so.6"]
    old = tmp_path / "old"
    old.mkdir()
    rejected = audit_wheel(_library_wheel(old, library, platform_tag=f"manylinux_2_35_{ARCH}"))
    assert any(
        "libnew.so needs GLIBC_2.36 (libc.so.6)" in p
        and f"manylinux_2_35_{ARCH} does not allow" in p
        and "allows up to GLIBC_2.35" in p
        for p in rejected.problems
    ), rejected.format()
    assert audit_wheel(_library_wheel(tmp_path, library)).problems == ()


def test_the_cpu_library_is_not_manylinux_2_28(tmp_path: Path) -> None:
    """Built on glibc 2.36 with GCC 12: GLIBC_2.34 and newer GLIBCXX than manylinux_2_28."""
    data = CPU_LIBRARY.read_bytes()
    wheel = _wheel(
        tmp_path,
        {"libptkit_cpu.so": data, "ptkit_cpu.manifest.json": CPU_MANIFEST.read_bytes()},
        platform_tag=f"manylinux_2_28_{ARCH}",
    )
    problems = audit_wheel(wheel).problems
    assert problems
    assert all("does not allow" in p and "manylinux image" in p for p in problems)
    assert any("GLIBC_2.34" in p for p in problems)


def test_libpython_and_unknown_libraries_are_rejected(tmp_path: Path) -> None:
    python = _gcc_library(tmp_path, "libpython3.11.so.1.0")
    other = _gcc_library(tmp_path, "libfoo.so.1")
    library = _gcc_library(tmp_path, "libbad.so", links=(python, other))
    problems = audit_wheel(_library_wheel(tmp_path, library)).problems
    assert any("links libpython3.11.so.1.0" in p and "one Python/torch" in p for p in problems)
    assert any("links libfoo.so.1, which is neither torch" in p for p in problems)
    assert len(problems) == 2, problems


def test_torch_and_the_gpu_runtimes_are_allowed(tmp_path: Path) -> None:
    runtimes = tuple(
        _gcc_library(tmp_path, name)
        for name in (
            "libtorch_cpu.so",
            "libtorch_cuda.so",
            "libc10.so",
            "libcudart.so.13",
            "libamdhip64.so.5",
            "libsycl.so.8",
        )
    )
    library = _gcc_library(tmp_path, "libgpu.so", links=runtimes)
    wheel_dir = tmp_path / "wheel"
    wheel_dir.mkdir()
    result = audit_wheel(_library_wheel(wheel_dir, library))
    assert result.problems == (), result.format()
    assert set(result.libraries[0].needed) >= {"libcudart.so.13", "libamdhip64.so.5"}


def test_an_rpath_into_the_build_machine_is_rejected(tmp_path: Path) -> None:
    library = _gcc_library(tmp_path, "librpath.so", flags=("-Wl,-rpath,/opt/build/lib",))
    problems = audit_wheel(_library_wheel(tmp_path, library)).problems
    assert len(problems) == 1 and "RPATH /opt/build/lib" in problems[0]


def test_a_manifest_sha256_that_is_not_the_librarys_fails(tmp_path: Path) -> None:
    data = CPU_LIBRARY.read_bytes()
    manifest = json.loads(CPU_MANIFEST.read_text())
    manifest["sha256"] = "0" * 64
    wheel = _wheel(
        tmp_path,
        {"libptkit_cpu.so": data, "ptkit_cpu.manifest.json": json.dumps(manifest).encode()},
        platform_tag=f"manylinux_2_36_{ARCH}",
    )
    (problem,) = audit_wheel(wheel).problems
    assert "libptkit_cpu.so: sha256" in problem and f"says {'0' * 64}" in problem
    assert "rebuild" in problem


def test_a_library_without_manifest_and_a_manifest_without_library_fail(tmp_path: Path) -> None:
    data = CPU_LIBRARY.read_bytes()
    wheel = _wheel(
        tmp_path,
        {"libptkit_cpu.so": data, "orphan.manifest.json": _manifest_for("libgone.so", data)},
    )
    problems = audit_wheel(wheel).problems
    assert any("libptkit_cpu.so has no manifest" in p for p in problems)
    assert any("describes libgone.so, which the wheel does not hold" in p for p in problems)


def test_a_hip_manifest_must_match_the_offload_bundles(tmp_path: Path) -> None:
    """A library without a .hip_fatbin section under a manifest promising gfx90a."""
    library = _gcc_library(tmp_path, "libptkit_hip.so")
    data = library.read_bytes()
    manifest = _manifest_for(
        "libptkit_hip.so",
        data,
        backend="hip",
        targets={"gfx": ["gfx90a"]},
        toolkit={"name": "hip", "version": "5.2"},
        torch={"target_version": "2.13", "built_with": "2.14.1"},
    )
    wheel = _wheel(tmp_path, {"libptkit_hip.so": data, "ptkit_hip.manifest.json": manifest})
    result = audit_wheel(wheel)
    assert any(
        "AMD GPU code in libptkit_hip.so: []; manifest says ['gfx90a']" in p
        for p in result.problems
    ), result.format()


def test_tags_must_be_py3_none_and_match_the_wheel_file(tmp_path: Path) -> None:
    data = CPU_LIBRARY.read_bytes()
    files = {"libptkit_cpu.so": data, "ptkit_cpu.manifest.json": CPU_MANIFEST.read_bytes()}
    abi = tmp_path / "abi"
    abi.mkdir()
    cpython = _wheel(abi, files, file_tag=f"cp311-cp311-manylinux_2_36_{ARCH}")
    problems = audit_wheel(cpython).problems
    assert any("is not py3-none-<platform>" in p for p in problems)
    relabelled = _wheel(tmp_path, files, file_tag=f"py3-none-manylinux_2_17_{ARCH}")
    problems = audit_wheel(relabelled).problems
    assert any("renamed by hand" in p for p in problems)
    # And the symbol versions are checked against the tag in the name.
    assert any(f"manylinux_2_17_{ARCH} does not allow" in p for p in problems)


def test_a_linux_tag_is_noted_not_checked(tmp_path: Path) -> None:
    data = CPU_LIBRARY.read_bytes()
    files = {"libptkit_cpu.so": data, "ptkit_cpu.manifest.json": CPU_MANIFEST.read_bytes()}
    result = audit_wheel(_wheel(tmp_path, files, platform_tag=f"linux_{ARCH}"))
    assert result.problems == ()
    assert any("is not manylinux" in n for n in result.notes)


@pytest.mark.parametrize("truncate", [64, 5000])
def test_a_corrupt_library_is_a_problem_not_a_traceback(tmp_path: Path, truncate: int) -> None:
    data = CPU_LIBRARY.read_bytes()[:truncate]
    wheel = _wheel(
        tmp_path,
        {"libptkit_cpu.so": data, "m.manifest.json": _manifest_for("libptkit_cpu.so", data)},
    )
    problems = audit_wheel(wheel).problems
    assert any("not a readable ELF library" in p for p in problems), problems
