"""Which torch.distributed backends ptkit tries, in which order, for each device
situation (``choose_backends`` is pure: no process group is created here)."""

from __future__ import annotations

import json

import pytest

from ptkit.runtime.distributed import (
    BackendChoice,
    DistributedChoice,
    choose_backends,
    distributed_backend_plan,
    init_process_group,
)

EVERYTHING = {"nccl2", "nccl", "gloo", "xccl"}


def _built(*names: str):
    return lambda backend: backend in names


# (visible accelerator device types, ROCm build, backends torch has built in)
#   -> [(backend, available)] in the order they would be tried
CASES = [
    pytest.param(
        ["cuda"],
        False,
        EVERYTHING,
        [("nccl2", True), ("nccl", True), ("gloo", True)],
        id="cuda-with-nccl2",
    ),
    pytest.param(
        ["cuda"],
        False,
        {"nccl", "gloo"},
        [("nccl2", False), ("nccl", True), ("gloo", True)],
        id="cuda-without-nccl2",
    ),
    pytest.param(
        ["cuda"],
        False,
        {"gloo"},
        [("nccl2", False), ("nccl", False), ("gloo", True)],
        id="cuda-torch-without-nccl",
    ),
    pytest.param(["cuda"], True, EVERYTHING, [("nccl", True), ("gloo", True)], id="rocm"),
    pytest.param(["cuda"], True, {"gloo"}, [("nccl", False), ("gloo", True)], id="rocm-no-rccl"),
    pytest.param(["xpu"], False, EVERYTHING, [("xccl", True), ("gloo", True)], id="xpu"),
    pytest.param(["xpu"], False, {"gloo"}, [("xccl", False), ("gloo", True)], id="xpu-no-xccl"),
    # A CUDA (or ROCm) build of torch on a machine without a GPU: nccl is built in, but
    # only the visible devices count.
    pytest.param([], False, EVERYTHING, [("gloo", True)], id="cpu-only-cuda-torch"),
    pytest.param([], True, EVERYTHING, [("gloo", True)], id="cpu-only-rocm-torch"),
    pytest.param(["cpu", "mps"], False, {"gloo"}, [("gloo", True)], id="cpu-and-mps"),
    pytest.param([], False, set(), [("gloo", False)], id="torch-without-gloo"),
    pytest.param(
        ["cuda", "xpu"],
        False,
        EVERYTHING,
        [("nccl2", True), ("nccl", True), ("gloo", True)],
        id="cuda-wins-over-xpu",
    ),
]


@pytest.mark.parametrize(("devices", "rocm", "built", "expected"), CASES)
def test_candidate_order(
    devices: list[str], rocm: bool, built: set[str], expected: list[tuple[str, bool]]
) -> None:
    choices = choose_backends(devices, _built(*built), rocm=rocm)
    assert [(c.backend, c.available) for c in choices] == expected
    assert all(c.reason for c in choices)


def test_reasons_say_why() -> None:
    (gloo,) = choose_backends([], _built("gloo"))
    assert "no GPU" in gloo.reason
    rccl = choose_backends(["cuda"], _built("nccl", "gloo"), rocm=True)[0]
    assert "RCCL" in rccl.reason
    nccl2, _, fallback = choose_backends(["cuda"], _built(*EVERYTHING))
    assert "NVIDIA GPU" in nccl2.reason and "fallback" in fallback.reason
    absent = choose_backends(["xpu"], _built("gloo"))[0]
    assert absent.backend == "xccl" and "not built into torch" in absent.reason


def test_is_available_that_raises_means_unavailable() -> None:
    def picky(backend: str) -> bool:
        if backend == "nccl2":
            raise RuntimeError("unknown backend nccl2")
        return True

    choices = choose_backends(["cuda"], picky)
    assert [(c.backend, c.available) for c in choices] == [
        ("nccl2", False),
        ("nccl", True),
        ("gloo", True),
    ]


def test_plan_on_this_machine_has_gloo_first_available() -> None:
    """This machine has no GPU (torch may still be a CUDA build): gloo, because no GPU."""
    import torch

    if torch.cuda.is_available() or (hasattr(torch, "xpu") and torch.xpu.is_available()):
        pytest.skip("an accelerator is visible: the CPU-only plan does not apply")
    plan = distributed_backend_plan()
    assert plan.device_types == ()
    assert plan.backend == "gloo"
    assert "no GPU" in plan.reason
    assert [c.backend for c in plan.candidates] == ["gloo"]
    doc = json.loads(json.dumps(plan.to_json()))
    assert doc["backend"] == "gloo" and doc["candidates"][0]["available"] is True


def test_choice_to_json() -> None:
    choice = DistributedChoice("gloo", (("nccl", "failed: ValueError: no GPUs"),), "fallback")
    assert json.loads(json.dumps(choice.to_json())) == {
        "backend": "gloo",
        "reason": "fallback",
        "tried": [{"backend": "nccl", "why": "failed: ValueError: no GPUs"}],
    }


def test_backend_and_candidates_together_are_refused() -> None:
    with pytest.raises(ValueError, match=r"init_process_group: expected backend= or candidates="):
        init_process_group(backend="gloo", candidates=[BackendChoice("gloo", "test")])


def test_no_available_candidate_is_refused_before_any_rendezvous() -> None:
    unavailable = [BackendChoice("nccl", "not built", available=False)]
    with pytest.raises(RuntimeError, match=r"expected at least one available backend.*nccl"):
        init_process_group(candidates=unavailable)
