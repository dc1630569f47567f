"""``python -m ptkit_ops.demo``: where each op runs here, then each op natively and against
its reference, with the time of one call."""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from typing import Any

import torch

import ptkit.runtime
import ptkit_ops


def main() -> int:
    print(
        f"ptkit-ops {ptkit_ops.__version__} on torch {torch.__version__} "
        f"(Python {sys.version.split()[0]})"
    )
    for d in ptkit.runtime.load_decisions("ptkit_ops"):
        print(f"  {d.library}: {d.status.value}: {d.reason}")
    print()
    print(ptkit.runtime.format_explain("ptkit_ops"))
    print()
    torch.manual_seed(0)
    hidden = 4096
    cases: dict[
        str, tuple[Callable[..., torch.Tensor], Callable[..., torch.Tensor], tuple[Any, ...]]
    ]
    cases = {
        "rms_norm": (
            ptkit_ops.rms_norm,
            ptkit_ops.rms_norm_reference,
            (
                torch.randn(8, hidden, dtype=torch.bfloat16),
                torch.randn(hidden, dtype=torch.bfloat16),
            ),
        ),
        "fused_linear": (
            ptkit_ops.fused_linear,
            ptkit_ops.fused_linear_reference,
            (
                torch.randn(4, 1, hidden, dtype=torch.bfloat16),
                torch.randn(hidden, hidden, dtype=torch.bfloat16) / 64,
                torch.randn(hidden, dtype=torch.bfloat16),
                "silu",
            ),
        ),
        "silu_and_mul": (
            ptkit_ops.silu_and_mul,
            ptkit_ops.silu_and_mul_reference,
            (torch.randn(8, 2 * hidden, dtype=torch.bfloat16),),
        ),
    }
    print(f"{'op':<14}{'shape (bf16)':<22}{'max |native - reference|':<26}{'time':>10}")
    for name, (op, reference, args) in cases.items():
        op(*args)  # warm-up
        start = time.perf_counter()
        out = op(*args)
        elapsed = time.perf_counter() - start
        err = (out.float() - reference(*args).float()).abs().max().item()
        shape = "x".join(str(s) for s in args[0].shape)
        print(f"{name:<14}{shape:<22}{err:<26.3g}{elapsed * 1e6:>8.0f} us")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
