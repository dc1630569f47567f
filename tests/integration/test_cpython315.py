"""CPython 3.15 for real: Debian sid's python3.15 in its own root (.roots/sid-python3.15,
made by scripts/bootstrap with debootstrap), torch 2.15.0's cp315 wheel from PyPI there, and
this run's toolkit and cpu wheel of ptkit-ops installed into a fresh venv on it.

In that root (scripts/in-root: chroot, this checkout at the same path) the library loads
natively and ptkit's own op, loader, compile, graphs, distributed and doctor tests pass under
3.15. Free-threaded 3.15t cannot be had here (Debian ships no python3.15t, and no source to
build one is reachable): the release workflow's cp315t jobs are where it is tested.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from support import REPO, run_suite_in_root

pytestmark = pytest.mark.integration

ROOT = REPO / ".roots" / "sid-python3.15"
# The test files that run there, whole (the doctor's Python 3.10 and cu13 tests included:
# they skip or run as they would anywhere).
SUITE = ["test_ops.py", "test_loader.py", "test_compile_and_graphs.py",
         "test_distributed.py", "test_doctor.py"]  # fmt: skip

CHECK = r"""
import json, sys, sysconfig, torch, ptkit.runtime, ptkit_ops
decisions = [(d.library, d.status.value, d.reason) for d in ptkit.runtime.load_decisions("ptkit_ops")]
print(json.dumps({"python": sys.version.split()[0], "gil_disabled": sysconfig.get_config_var("Py_GIL_DISABLED"),
                  "torch": torch.__version__, "ptkit_ops": ptkit_ops.__version__, "decisions": decisions}))
"""

# In the root: a venv on the root's environment (a .pth names its site-packages, so torch is
# not installed again: support.fresh_venv's way, which runs outside the root), the two
# wheels from their files, the check, then the tests. /tmp
# there is a tmpfs that ends with the command.
SCRIPT = """
set -e
python3.15 -m venv /tmp/venv
echo "$("$BASE/bin/python" -c 'import sysconfig; print(sysconfig.get_path("purelib"))')" \
  > "$(/tmp/venv/bin/python -c 'import sysconfig; print(sysconfig.get_path("purelib"))')/_base_env.pth"
/tmp/venv/bin/python -m pip install -q --no-deps "$TOOLKIT" "$WHEEL"
cd /tmp && /tmp/venv/bin/python -c "$CHECK"
echo "== tests"
cd "$REPO" && /tmp/venv/bin/python -m pytest -q -p no:cacheprovider --timeout 600 $SUITE 2>&1 \
  | grep -v -e '^DEBUG ' -e '^INFO '
"""


def test_the_cpu_wheel_loads_and_passes_the_tests_on_cpython_315(
    ptkit_wheel: Path, toolkit_wheel: Path
) -> None:
    suite = " ".join(f"tests/integration/{name}" for name in SUITE)
    out, summary = run_suite_in_root(
        ROOT, SCRIPT, (ptkit_wheel, toolkit_wheel),
        TOOLKIT=str(toolkit_wheel), WHEEL=str(ptkit_wheel), SUITE=suite, CHECK=CHECK,
    )  # fmt: skip
    assert str(out["python"]).startswith("3.15."), out
    assert out["gil_disabled"] == 0, "Debian's python3.15 has the GIL; 3.15t is not here"
    assert str(out["torch"]).split("+")[0] == "2.15.0", out
    assert out["ptkit_ops"] == "0.1.0+cpu"
    ((library, status, reason),) = out["decisions"]
    assert (library, status) == ("libptkit_cpu.so", "loaded"), reason
    print(f"CPython {out['python']}, torch {out['torch']}: {summary}")  # shown with -s
    passed = re.search(r"(\d+) passed", summary)
    assert passed and int(passed.group(1)) >= 250, summary
