"""ptkit.runtime.profile() and apply_profile() on this machine (CPU only, installed wheel)."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import torch
import torch._inductor.config as inductor_config
from support import run

import ptkit
import ptkit.runtime.distributed
import ptkit.runtime.graphs
import ptkit_ops  # noqa: F401  (its import loads the libraries the profile routes)
from ptkit.runtime.compiling import compile_support


@pytest.fixture
def inductor_config_restored() -> Iterator[None]:
    saved = inductor_config.get_config_copy()
    yield
    inductor_config.load_config(saved)


def test_profile_gathers_every_part_and_agrees_with_each_api(native_cpu_loaded: None) -> None:
    profile = ptkit.runtime.profile()
    data = profile.to_json()
    assert json.loads(json.dumps(data)) == data  # plain JSON
    assert data["torch"] == torch.__version__
    assert [d["type"] for d in data["devices"]] == ["cpu"]
    assert data["compile"] == compile_support().to_json()
    assert data["graphs"] == {"mode": "eager", "reason": ptkit.runtime.graphs.capture_plan()[1]}
    assert data["distributed"]["backend"] == "gloo"
    assert data["distributed"] == ptkit.runtime.distributed.distributed_backend_plan().to_json()
    assert data["recommended_gemm_backends"] == "ATEN,CPP"
    nvgemm = next(b for b in data["gemm_backends"] if b["name"] == "NVGEMM")
    assert nvgemm == {
        "name": "NVGEMM",
        "recommended": False,
        "reason": "no NVIDIA GPU (cutlass.operators kernels)",
    }
    assert data["ops"] == [r.to_json() for r in ptkit.runtime.explain()]
    assert {r["implementation"] for r in data["ops"] if r["device_type"] == "cpu"} == {"native"}


def test_apply_profile_sets_the_gemm_backends_and_nothing_else(
    inductor_config_restored: None,
) -> None:
    inductor_config.max_autotune_gemm_backends = "ATEN,TRITON,CPP"
    before = inductor_config.get_config_copy()
    chosen = ptkit.runtime.apply_profile()
    after = inductor_config.get_config_copy()
    assert chosen == "ATEN,CPP" == inductor_config.max_autotune_gemm_backends
    changed = {k for k in before if before[k] != after[k]}
    assert changed == {"max_autotune_gemm_backends"}


def test_profile_command_prints_text_and_json() -> None:
    text = run([sys.executable, "-m", "ptkit", "profile"], cwd=Path("/")).stdout
    assert "torch.compile: yes" in text and "distributed: gloo" in text and "+ CPP" in text
    data = json.loads(
        run([sys.executable, "-m", "ptkit", "profile", "--json"], cwd=Path("/")).stdout
    )
    assert data["recommended_gemm_backends"] == "ATEN,CPP"
