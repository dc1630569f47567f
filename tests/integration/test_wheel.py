"""The built cpu wheel of ptkit-ops: its tag, metadata and contents, the release audit on
it, the native library's links and symbols. The same wheel across torch 2.10 to 2.15 (and a
torch below the floor refused): tests/integration/test_torch_range.py."""

from __future__ import annotations

import hashlib
import json
import platform
import zipfile
from email.parser import Parser
from pathlib import Path

import pytest
from packaging.utils import parse_wheel_filename

from ptkit.release.elf_audit import audit_elf
from ptkit.release.wheel_audit import audit_wheel

pytestmark = pytest.mark.integration

NATIVE = "ptkit_ops/_native"


def _read(wheel: Path, suffix: str) -> bytes:
    with zipfile.ZipFile(wheel) as z:
        (name,) = [n for n in z.namelist() if n.endswith(suffix)]
        return z.read(name)


def test_wheel_tag_version_and_requirements(ptkit_wheel: Path) -> None:
    name, version, _build, tags = parse_wheel_filename(ptkit_wheel.name)
    assert name == "ptkit-ops"
    assert version.local == "cpu"
    assert {(t.interpreter, t.abi) for t in tags} == {("py3", "none")}
    assert all(t.platform.startswith("linux_") or "manylinux" in t.platform for t in tags)
    meta = Parser().parsestr(_read(ptkit_wheel, ".dist-info/METADATA").decode())
    assert set(meta.get_all("Requires-Dist")) == {"torch>=2.10", "ptkit<0.2,>=0.1.0"}
    assert meta["Requires-Python"] == ">=3.10"
    wheel_info = Parser().parsestr(_read(ptkit_wheel, ".dist-info/WHEEL").decode())
    assert wheel_info["Root-Is-Purelib"] == "false"


def test_wheel_holds_library_and_matching_manifest(ptkit_wheel: Path) -> None:
    lib = _read(ptkit_wheel, f"{NATIVE}/libptkit_cpu.so")
    manifest = json.loads(_read(ptkit_wheel, f"{NATIVE}/ptkit_cpu.manifest.json"))
    assert manifest["sha256"] == hashlib.sha256(lib).hexdigest()
    assert manifest["library"] == "libptkit_cpu.so"
    assert (manifest["package"], manifest["variant"]) == ("ptkit_ops", "cpu")
    assert manifest["toolkit"]["name"] and manifest["toolkit"]["version"]
    assert manifest["torch"]["built_with"].startswith("2.")


def test_the_built_wheel_passes_the_release_audit(ptkit_wheel: Path) -> None:
    result = audit_wheel(ptkit_wheel)
    assert result.problems == (), result.format()
    (library,) = result.libraries
    assert library.name == "libptkit_cpu.so"
    assert "libtorch_cpu.so" in library.needed
    assert set(library.highest_versions) >= {"GLIBC", "GLIBCXX"}


def _retagged(wheel: Path, folder: Path, tag: str) -> Path:
    """The wheel's native files in a wheel tagged ``tag`` (name and WHEEL alike)."""
    name = wheel.name.rsplit("-", 1)[0] + f"-{tag}.whl"
    with zipfile.ZipFile(wheel) as src, zipfile.ZipFile(folder / name, "w") as dst:
        for info in src.infolist():
            data = src.read(info)
            if info.filename.endswith(".dist-info/WHEEL"):
                text = data.decode()
                data = "".join(
                    f"Tag: py3-none-{tag}\n" if line.startswith("Tag:") else line
                    for line in text.splitlines(keepends=True)
                ).encode()
            dst.writestr(info, data)
    return folder / name


def test_a_build_on_this_glibc_is_not_manylinux_2_28(ptkit_wheel: Path, tmp_path: Path) -> None:
    """Built here (glibc 2.36, GCC 12): GLIBC_2.34 and newer GLIBCXX than manylinux_2_28
    allows, so only the release's manylinux image makes the recipe's tag."""
    wheel = _retagged(ptkit_wheel, tmp_path, f"manylinux_2_28_{platform.machine()}")
    problems = audit_wheel(wheel).problems
    assert problems
    assert all("does not allow" in p and "manylinux image" in p for p in problems), problems
    assert any("GLIBC_2.34" in p for p in problems)


def test_library_is_stable_abi_only(ptkit_wheel: Path, tmp_path: Path) -> None:
    lib = tmp_path / "libptkit_cpu.so"
    lib.write_bytes(_read(ptkit_wheel, f"{NATIVE}/libptkit_cpu.so"))
    audit = audit_elf(lib)
    assert audit.problems == []
    assert not any(n.startswith(("libpython", "libtorch_python")) for n in audit.needed)
    assert "libtorch_cpu.so" in audit.needed
    assert audit.rpath == ()  # libtorch comes from the process that imported torch
    assert any(s.startswith("aoti_torch_") for s in audit.undefined)


def test_audit_flags_unstable_torch_symbols(tmp_path: Path) -> None:
    """The audit is not vacuous: a library built against torch's C++ API fails it."""
    torch_python = Path(__import__("torch").__file__).parent / "lib" / "libtorch_python.so"
    problems = audit_elf(torch_python).problems
    assert any("outside the stable ABI" in p for p in problems)
