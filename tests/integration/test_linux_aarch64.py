"""Linux aarch64 for real, under emulation: Debian bookworm for arm64 in a root of its own
(.roots/bookworm-arm64, made by scripts/bootstrap with debootstrap; qemu-user-static runs its
programs through binfmt_misc), with torch 2.10.0, PyPI's CPU-only aarch64 torch.

In that root (scripts/in-root) the cpu wheel of ptkit-ops is built from this checkout by
bookworm's own GCC 12 for aarch64 (the kernels need no _Float16, which GCC 12's C++ lacks
there), through scikit-build-core and ptkit's CMake package as on any machine; the ISA levels
come from the platform module: the NEON baseline (armv8-a) and neon-bf16 (BFDOT, which qemu's
CPU has), the x86-64 levels do not apply. A
fresh venv there gets this run's toolkit and that wheel, the library loads natively (the
loader's decision, its ISA level and every op's route are checked), and ptkit's op tests
pass, at each ISA level. The loader's tests are left to this machine: each starts a Python
that imports torch (40 s each under emulation on a 2-core Zen 1; 16 of them), and what they check
is the loader's Python, the same on every platform; what is aarch64's own, the library
loading and its level, the check above covers. Times under emulation are not benchmarks (every instruction
is translated); correctness is the point. The release's aarch64 wheel (repaired, tagged
manylinux) is cibuildwheel's job: scripts/release-local and the release workflow.
"""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest
from support import REPO, run_suite_in_root

pytestmark = pytest.mark.integration

ROOT = REPO / ".roots" / "bookworm-arm64"
SUITE = ["test_ops.py"]

CHECK = r"""
import json, platform, torch, ptkit.runtime, ptkit_ops
decisions = [(d.library, d.status.value, d.reason, dict(d.details)) for d in ptkit.runtime.load_decisions("ptkit_ops")]
routes = {r.op: r.implementation for r in ptkit.runtime.explain("ptkit_ops") if r.device_type == "cpu"}
print(json.dumps({"machine": platform.machine(), "torch": torch.__version__,
                  "decisions": decisions, "routes": routes}))
"""

# In the root: the wheel built from this checkout (the build folder on the root's tmpfs: no
# aarch64 objects land in the checkout), then a venv on the root's environment (a .pth names
# its site-packages), the two wheels from their files, the check, then the tests.
SCRIPT = """
set -e
cd "$REPO"
PTKIT_VARIANT=cpu "$BASE/bin/python" -m pip wheel -q --no-build-isolation --no-deps \
  --config-settings=build-dir=/tmp/build -w "$OUT" .
python3.11 -m venv /tmp/venv
echo "$("$BASE/bin/python" -c 'import sysconfig; print(sysconfig.get_path("purelib"))')" \
  > "$(/tmp/venv/bin/python -c 'import sysconfig; print(sysconfig.get_path("purelib"))')/_base_env.pth"
/tmp/venv/bin/python -m pip install -q --no-deps "$TOOLKIT" "$OUT"/ptkit_ops-*.whl
cd /tmp && /tmp/venv/bin/python -c "$CHECK"
echo "== tests"
cd "$REPO" && /tmp/venv/bin/python -m pytest -q -p no:cacheprovider --timeout 900 $SUITE 2>&1 \
  | grep -v -e '^DEBUG ' -e '^INFO '
"""


# Under qemu every instruction is translated, so the time follows the host CPU: 643 s on a
# 2-core Zen 3, past the suite's 900 s on a 2-core Zen 1.
@pytest.mark.timeout(1800)
def test_the_cpu_wheel_builds_loads_and_passes_the_tests_on_linux_aarch64(
    toolkit_wheel: Path,
) -> None:
    out_dir = REPO / "build" / "linux-aarch64"  # the root sees this checkout only
    shutil.rmtree(out_dir, ignore_errors=True)
    out_dir.mkdir(parents=True)
    suite = " ".join(f"tests/integration/{name}" for name in SUITE)
    out, summary = run_suite_in_root(
        ROOT, SCRIPT, (toolkit_wheel,),
        TOOLKIT=str(toolkit_wheel), OUT=str(out_dir), SUITE=suite, CHECK=CHECK,
    )  # fmt: skip
    (wheel,) = out_dir.glob("ptkit_ops-*.whl")
    assert wheel.name.endswith("-py3-none-linux_aarch64.whl"), wheel.name
    assert out["machine"] == "aarch64", out
    assert str(out["torch"]).split("+")[0] == "2.10.0", out
    ((library, status, reason, details),) = out["decisions"]
    assert (library, status) == ("libptkit_cpu.so", "loaded"), reason
    assert "built with torch 2.10.0" in reason, reason
    # qemu's CPU has BF16 (getauxval's HWCAP2_BF16): the BFDOT level runs, and the op
    # tests run the NEON baseline too (test_native_matches_reference_at_every_isa_level).
    assert details["isa"] == "neon-bf16", details
    assert set(out["routes"].values()) == {"native"}, out["routes"]
    print(f"aarch64, torch {out['torch']}: {summary}")  # shown with -s
    passed = re.search(r"(\d+) passed", summary)
    assert passed and int(passed.group(1)) >= 200, summary
