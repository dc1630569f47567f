"""Device tests: they need an NVIDIA GPU and the cu13 wheel installed
(scripts/device-check does both on the GPU machine). Without a GPU they are skipped,
with the reason, so that `make test` on a CPU machine stays green and honest."""

from __future__ import annotations

import pytest
import torch


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if torch.cuda.is_available():
        return
    skip = pytest.mark.skip(
        reason="no CUDA device visible: run scripts/device-check on a GPU machine"
    )
    for item in items:
        if "device" in item.nodeid.split("::")[0]:
            item.add_marker(skip)
