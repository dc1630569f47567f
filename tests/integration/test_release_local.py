"""scripts/release-local for real: the generated ci/cibuildwheel/cpu.toml read by the real
cibuildwheel, which builds, repairs and tests ptkit-ops' cpu wheel in a podman container
made from Debian's packages (the image the script makes once and keeps; the only thing
that differs from the release workflow)."""

from __future__ import annotations

import os
import zipfile

import pytest
from support import REPO, run

pytestmark = pytest.mark.integration


def test_cibuildwheel_builds_repairs_and_tests_the_cpu_wheel_in_a_container() -> None:
    if os.geteuid() != 0:
        pytest.fail("podman runs rootful here: run the tests as root")
    # x86_64 alone: the aarch64 job (emulated, about 10 min) is scripts/release-local's own.
    proc = run(
        [
            str(REPO / "scripts" / "release-local"),
            "--variant",
            "cpu",
            "--only",
            "cp311-manylinux_x86_64",
        ],
        timeout=1800,
    )
    log = (REPO / "build" / "release-local" / "cpu-x86_64.log").read_text(errors="replace")
    # cibuildwheel's own steps, in the container, from the generated file.
    assert (
        "cibuildwheel --only cp311-manylinux_x86_64 --config-file ci/cibuildwheel/cpu.toml"
        in proc.stdout
    )
    assert "+ podman" in log and "localhost/ptkit-release-bookworm-x86_64:" in log
    assert "auditwheel repair --only-plat" in log
    assert "ptkit-ops smoke test passed" in log, log[-3000:]
    assert "1 wheel produced" in log
    (wheel,) = (REPO / "dist" / "release" / "cpu").glob("*.whl")
    # The image's glibc (Debian bookworm, 2.36) sets the tag; the workflow's image gives 2_28.
    assert wheel.name == "ptkit_ops-0.1.0+cpu-py3-none-manylinux_2_36_x86_64.whl"
    assert f"{wheel.name} (tag py3-none-manylinux_2_36_x86_64" in proc.stdout
    assert "test: ptkit-ops smoke test passed" in proc.stdout
    with zipfile.ZipFile(wheel) as archive:
        names = archive.namelist()
        wheel_file = archive.read("ptkit_ops-0.1.0+cpu.dist-info/WHEEL").decode()
    assert {
        "ptkit_ops/_native/libptkit_cpu.so",
        "ptkit_ops/_native/ptkit_cpu.manifest.json",
    } <= set(names)
    assert "Tag: py3-none-manylinux_2_36_x86_64" in wheel_file
    assert not any(".libs/" in n for n in names), "auditwheel grafted a library"
