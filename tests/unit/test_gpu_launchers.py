"""The launcher contract (gpu/include/ptkit/gpu/launchers.h) is kept by every GPU tree.

The SYCL tree cannot be compiled on a machine without icpx, so a launcher added to the
contract but not to xpu/ would only fail at link time on an Intel machine: this reads
the sources instead and checks that each tree defines every declared function, with the
declared return type.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
CONTRACT = REPO / "gpu" / "include" / "ptkit" / "gpu" / "launchers.h"
TREES = {
    "cuda": [REPO / "cuda" / "kernels" / "kernels.cu", REPO / "cuda" / "stream.cpp"],
    "hip": [REPO / "hip" / "kernels" / "kernels.hip", REPO / "gpu" / "current_stream.cpp"],
    "xpu": [REPO / "xpu" / "kernels" / "kernels.cpp", REPO / "gpu" / "current_stream.cpp"],
}
_DECLARATION = re.compile(r"^(\w+) (\w+)\((.*)\);$", re.M)


def _declared() -> dict[str, str]:
    return {name: returns for returns, name, _ in _DECLARATION.findall(CONTRACT.read_text())}


def test_the_contract_declares_the_launchers() -> None:
    assert {"launch_rms_norm", "launch_gemv", "gemv_runs_on", "current_stream"} <= set(_declared())


@pytest.mark.parametrize("tree", sorted(TREES))
def test_every_tree_defines_every_declared_function(tree: str) -> None:
    text = "\n".join(p.read_text() for p in TREES[tree])
    missing = [
        f"{returns} {name}(…)"
        for name, returns in _declared().items()
        if not re.search(rf"^{returns} {name}\([^;]*\) {{", text, re.M)
    ]
    assert not missing, f"{tree} does not define {', '.join(missing)}"


def test_launch_shapes_come_from_the_devices_warp_size() -> None:
    """No GPU here: the sources are read. Each tree sizes its warp-based launches from what
    the device reports (CUDA and HIP: the warp size attribute, cached per device; SYCL: the
    GEMV's required sub-group of 16, checked against the device's sizes before launch), and
    no CUDA launch spells a warp as a literal 32 threads."""
    cuda = TREES["cuda"][0].read_text()
    assert "cudaDevAttrWarpSize" in cuda
    launches = re.findall(r"<<<([^>]*)>>>", cuda)
    warp_launches = [args for args in launches if "warps" in args or "kRmsWarpsPerBlock" in args]
    assert warp_launches and all("warp_size" in args for args in warp_launches), warp_launches
    assert not [args for args in launches if re.search(r",\s*32\s*\*", args)], launches
    hip = TREES["hip"][0].read_text()
    assert "hipDeviceAttributeWarpSize" in hip
    assert re.search(r"gemv_kernel<T>, dim3\(blocks_for\(a\.n, waves_per_block\(\)\)\)", hip)
    xpu = TREES["xpu"][0].read_text()
    assert "[[sycl::reqd_sub_group_size(kSubGroup)]]" in xpu
    assert "get_info<sycl::info::device::sub_group_sizes>()" in xpu
