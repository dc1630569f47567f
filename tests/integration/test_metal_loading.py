"""Metal kernels through the real loader, in a subprocess: a manifest next to the
shipped .metal source, loaded as on a Mac. This machine has no Apple GPU: only the
``TorchFacts`` below stand for one (a fake for absent hardware); the manifest, the
file, its sha256, the dispatcher registration and torch's own MPS entry point
(which raises here, as it would on a Mac whose Metal compiler rejects the source)
are real."""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path

import pytest
from support import REPO, child_python

pytestmark = pytest.mark.integration

SCRIPT = r"""
import json, sys
from pathlib import Path
import torch
import ptkit_ops
from ptkit.loading.routes import routes
from ptkit.loading.rules import TorchFacts
from ptkit.runtime.loader import load_native_libraries
from ptkit_ops._metal import metal_kernels, register_metal_kernels
from ptkit.loading.switches import RuntimeSwitches

# An Apple-silicon Mac's torch, as the loader would see it (fake: no such device here).
mac = TorchFacts(torch.__version__, cuda=None, hip=None, has_xpu=False, has_mps=True, mps_available=True)
no_mps = TorchFacts(torch.__version__, cuda=None, hip=None, has_xpu=False, has_mps=True)
manifest = Path(sys.argv[1])
skipped = load_native_libraries([manifest], facts=no_mps, metal_binding=register_metal_kernels)[0]
unbound = load_native_libraries([manifest], facts=mac)[0]
decision = load_native_libraries([manifest], facts=mac, metal_binding=register_metal_kernels)[0]
registered = torch._C._dispatch_has_kernel_for_dispatch_key("ptkit::rms_norm", "MPS")
before = metal_kernels().state
metal_kernels().library()  # the first MPS call compiles: torch.mps.compile_shader
rows = routes(["rms_norm"], "ptkit", [decision], mac, RuntimeSwitches(),
              {"mps": f"Metal kernels failed, the reference runs instead: {metal_kernels().failure}"},
              has_kernel=lambda op, key: torch._C._dispatch_has_kernel_for_dispatch_key(op, key))
print(json.dumps({
    "skipped": [skipped.status.value, skipped.reason],
    "unbound": [unbound.status.value, unbound.reason],
    "decision": [decision.status.value, decision.reason, dict(decision.details)],
    "registered": registered,
    "before": before,
    "after": metal_kernels().state,
    "mps_row": [r.to_json() for r in rows if r.device_type == "mps"],
}))
"""


def _shipped(tmp_path: Path) -> Path:
    native = tmp_path / "_native"
    native.mkdir()
    library = native / "ptkit_metal.metal"
    shutil.copy(REPO / "metal" / "ptkit_kernels.metal", library)
    manifest = native / "ptkit_metal.manifest.json"
    manifest.write_text(
        json.dumps(
            {
                "schema_version": 1,
                "package": "ptkit",
                "namespace": "ptkit",
                "library": library.name,
                "backend": "metal",
                "variant": "metal",
                "toolkit": {"name": "metal", "version": "source"},
                "targets": {"metal": ["source"]},
                "dropped_targets": [],
                "torch": {"target_version": "2.10", "built_with": "2.14.1"},
                # This machine's platform, so that only the MPS rules decide.
                "platform": "linux-x86_64",
                "ops": {
                    "rms_norm": ["float32"],
                    "fused_linear": ["float32"],
                    "silu_and_mul": ["float32"],
                },
                "sha256": hashlib.sha256(library.read_bytes()).hexdigest(),
            }
        )
    )
    return manifest


def test_metal_kernels_register_lazily_and_a_compile_failure_is_explained(tmp_path: Path) -> None:
    proc = child_python(
        SCRIPT.replace("sys.argv[1]", repr(str(_shipped(tmp_path)))),
        cwd=tmp_path,
    )
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    assert out["skipped"][0] == "skipped" and "no MPS device is available" in out["skipped"][1]
    # Metal kernels are bound in Python: a package that passes no binding cannot load them.
    assert out["unbound"][0] == "skipped" and "passes no metal_binding" in out["unbound"][1]
    assert out["decision"][0] == "loaded"
    assert out["decision"][2] == {"kernels": "compiled at first use"}
    assert out["registered"] is True
    assert out["before"] == "not compiled yet"
    assert out["after"].startswith("failed: compiling") and "ptkit_metal.metal" in out["after"]
    row = out["mps_row"][0]
    assert row["implementation"] == "reference"
    assert "Metal kernels failed, the reference runs instead: compiling" in row["reason"]


MODIFIED_SCRIPT = r"""
import json, torch, ptkit_ops
from pathlib import Path
from ptkit.loading.rules import TorchFacts
from ptkit.runtime.loader import load_native_libraries
from ptkit_ops._metal import metal_kernels, register_metal_kernels

mac = TorchFacts(torch.__version__, cuda=None, hip=None, has_xpu=False, has_mps=True, mps_available=True)
decision = load_native_libraries([Path(MANIFEST)], facts=mac, metal_binding=register_metal_kernels)[0]
print(json.dumps([decision.status.value, decision.reason, metal_kernels() is None,
                  torch._C._dispatch_has_kernel_for_dispatch_key("ptkit::rms_norm", "MPS")]))
"""


def test_a_modified_metal_source_is_not_registered(tmp_path: Path) -> None:
    manifest = _shipped(tmp_path)
    (manifest.parent / "ptkit_metal.metal").write_text("kernel void evil() {}\n")
    proc = child_python(MODIFIED_SCRIPT.replace("MANIFEST", repr(str(manifest))), cwd=tmp_path)
    status, reason, unregistered, has_kernel = json.loads(proc.stdout.strip().splitlines()[-1])
    assert status == "failed" and "does not match its manifest" in reason
    assert unregistered is True and has_kernel is False
