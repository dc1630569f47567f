"""``ptkit.graphs``: capture a function as a CUDA, ROCm or XPU graph where the inputs'
device has graph capture, and run it eagerly, with the reason recorded, where it has not.

Why: replaying a captured graph removes the per-kernel launch cost of small decode
steps, but only some devices and torch builds can capture. ``capture()`` gives one
object with one calling convention everywhere, so the same code runs on a laptop's CPU
and on a GPU server, and ``.mode`` / ``.reason`` say which one happened.

=============  =====================================================  ===============
inputs on      capture                                                ``mode``
=============  =====================================================  ===============
``cuda``       ``torch.cuda.CUDAGraph`` (NVIDIA; on a ROCm build of   ``cuda_graph``
               torch, ``torch.version.hip``, the same API records a
               HIP graph)
``xpu``        ``torch.xpu.XPUGraph``, if this torch has it           ``xpu_graph``
anything else  none: ``fn`` runs eagerly at each call (CPU, MPS,      ``eager``
               a torch without the graph class, mixed devices)
=============  =====================================================  ===============

Capture follows torch's recipe: ``warmup`` calls on a side stream (lazy initialisation,
cuBLAS workspaces, autotuning happen there, outside the graph), then one call recorded
into the graph. The example inputs are cloned into static input buffers, so the
caller's tensors stay the caller's. In eager mode ``capture()`` does not call ``fn``.

Replay contract, the same in every mode so that code tested on a CPU behaves the same
on a GPU: inputs must match the example inputs in count, shape, dtype and device
(``ValueError`` otherwise). In graph modes ``replay()`` copies them into the static
input buffers, replays, and returns the **static output buffers**, like CUDA graphs do:
the next replay overwrites them, so clone what you keep. In eager mode it returns what
``fn`` returns. Only the forward computation is captured, under the caller's grad mode;
for backward, use ``torch.cuda.make_graphed_callables``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from typing import Any, Literal

import torch

__all__ = ["CapturedGraph", "Mode", "capture", "capture_plan"]

Mode = Literal["cuda_graph", "xpu_graph", "eager"]

# Records fn into a graph: (fn, static inputs, warmup, device) -> (replay, static outputs).
_Capturer = Callable[
    [Callable[..., Any], tuple[torch.Tensor, ...], int, torch.device],
    tuple[Callable[[], None], Any],
]


@dataclasses.dataclass(frozen=True)
class _InputSpec:
    """What a replay input must match: the example input's shape, dtype and device."""

    shape: tuple[int, ...]
    dtype: torch.dtype
    device: torch.device

    @classmethod
    def of(cls, tensor: torch.Tensor) -> _InputSpec:
        return cls(tuple(tensor.shape), tensor.dtype, tensor.device)

    def describe(self) -> str:
        return f"shape {self.shape}, dtype {self.dtype}, device {self.device}"

    def to_json(self) -> dict[str, Any]:
        return {
            "shape": list(self.shape),
            "dtype": str(self.dtype).removeprefix("torch."),
            "device": str(self.device),
        }


class CapturedGraph:
    """A captured graph (``mode`` ``cuda_graph`` / ``xpu_graph``) or an eager pass-through
    (``eager``), called the same way; ``reason`` says why this mode."""

    def __init__(
        self,
        fn: Callable[..., Any],
        mode: Mode,
        reason: str,
        specs: tuple[_InputSpec, ...],
        warmup: int,
        static_inputs: tuple[torch.Tensor, ...] = (),
        static_outputs: Any = None,
        replay_graph: Callable[[], None] | None = None,
    ) -> None:
        self.fn = fn
        self.mode: Mode = mode
        self.reason = reason
        self.warmup = warmup
        self._specs = specs
        self._static_inputs = static_inputs
        self._static_outputs = static_outputs
        self._replay_graph = replay_graph

    def replay(self, *inputs: torch.Tensor) -> Any:
        """Run with new inputs. Graph modes: the static output buffers, overwritten by the
        next replay; eager mode: ``fn``'s own result."""
        self._check(inputs)
        if self._replay_graph is None:
            return self.fn(*inputs)
        for static, given in zip(self._static_inputs, inputs, strict=True):
            if given is not static:
                static.copy_(given)
        self._replay_graph()
        return self._static_outputs

    __call__ = replay

    def to_json(self) -> dict[str, Any]:
        return {
            "mode": self.mode,
            "reason": self.reason,
            "warmup": self.warmup,
            "inputs": [spec.to_json() for spec in self._specs],
        }

    def __repr__(self) -> str:
        return f"CapturedGraph(mode={self.mode!r}, reason={self.reason!r})"

    def _check(self, inputs: Sequence[object]) -> None:
        if len(inputs) != len(self._specs):
            raise ValueError(
                f"ptkit.graphs.capture: replay expected {len(self._specs)} input(s), as many "
                f"as the example inputs; given {len(inputs)}"
            )
        for i, (spec, given) in enumerate(zip(self._specs, inputs, strict=True)):
            if not isinstance(given, torch.Tensor):
                raise ValueError(
                    f"ptkit.graphs.capture: replay input {i} expected a tensor with "
                    f"{spec.describe()}; given a {type(given).__name__}"
                )
            if _InputSpec.of(given) != spec:
                raise ValueError(
                    f"ptkit.graphs.capture: replay input {i} expected {spec.describe()} "
                    f"(as example input {i}); given {_InputSpec.of(given).describe()}. "
                    "A captured graph replays fixed shapes, dtypes and devices: capture "
                    "again for others"
                )


def capture(
    fn: Callable[..., Any], *example_inputs: torch.Tensor, warmup: int = 3
) -> CapturedGraph:
    """Capture ``fn(*example_inputs)`` as a graph on the inputs' device where that device
    can capture, else prepare an eager pass-through; see the module docstring."""
    if not callable(fn):
        raise TypeError(f"ptkit.graphs.capture: expected a callable fn; given {type(fn).__name__}")
    if isinstance(warmup, bool) or not isinstance(warmup, int) or warmup < 0:
        raise ValueError(
            f"ptkit.graphs.capture: warmup must be an integer >= 0 (calls before capture); "
            f"given {warmup!r}"
        )
    for i, x in enumerate(example_inputs):
        if not isinstance(x, torch.Tensor):
            raise TypeError(
                f"ptkit.graphs.capture: example input {i} must be a tensor (its copy becomes "
                f"the graph's static input buffer); given a {type(x).__name__}"
            )
    specs = tuple(_InputSpec.of(x) for x in example_inputs)
    devices = sorted({str(spec.device) for spec in specs})
    if not devices:
        reason = "no example inputs: nothing says which device to capture on; fn runs eagerly"
        return CapturedGraph(fn, "eager", reason, specs, warmup)
    if len(devices) > 1:
        reason = f"inputs on several devices ({', '.join(devices)}): a graph records one device; fn runs eagerly"
        return CapturedGraph(fn, "eager", reason, specs, warmup)
    device = specs[0].device
    mode, reason, capturer = _plan(device)
    if capturer is None:
        return CapturedGraph(fn, "eager", reason, specs, warmup)
    static_inputs = tuple(x.detach().clone() for x in example_inputs)
    try:
        replay_graph, static_outputs = capturer(fn, static_inputs, warmup, device)
    except Exception as error:
        raise RuntimeError(
            f"ptkit.graphs.capture: capturing {getattr(fn, '__qualname__', fn)!r} as a "
            f"{mode} on {device} failed: {type(error).__name__}: {error}. A captured fn must "
            "not synchronise with the host (.item(), .cpu(), printing tensors), use CPU "
            "tensors or allocate by data-dependent shapes"
        ) from error
    return CapturedGraph(
        fn, mode, reason, specs, warmup, static_inputs, static_outputs, replay_graph
    )


def capture_plan(device: torch.device | str | None = None) -> tuple[Mode, str]:
    """Which mode ``capture()`` would use for inputs on ``device`` (default: this machine's
    first accelerator, else the CPU), and why. Nothing is captured."""
    if device is None:
        if torch.cuda.is_available():
            device = torch.device("cuda", torch.cuda.current_device())
        elif hasattr(torch, "xpu") and torch.xpu.is_available():
            device = torch.device("xpu", torch.xpu.current_device())
        else:
            device = torch.device("cpu")
    mode, reason, _ = _plan(torch.device(device))
    return mode, reason


def _plan(device: torch.device) -> tuple[Mode, str, _Capturer | None]:
    """The capture rules for one device, with the function that records the graph."""
    if device.type == "cuda":
        if not torch.cuda.is_available():
            return "eager", f"{device} requested but CUDA is not available; fn runs eagerly", None
        if not hasattr(torch.cuda, "CUDAGraph"):
            return (
                "eager",
                f"torch {torch.__version__} has no torch.cuda.CUDAGraph; fn runs eagerly",
                None,
            )
        hip = torch.version.hip
        what = f"HIP graph (ROCm {hip}) via torch.cuda.CUDAGraph" if hip else "torch.cuda.CUDAGraph"
        return "cuda_graph", f"inputs are on {device}: captured as a {what}", _capture_cuda
    if device.type == "xpu":
        xpu = getattr(torch, "xpu", None)
        if xpu is None or not hasattr(xpu, "XPUGraph") or not hasattr(xpu, "graph"):
            return (
                "eager",
                f"torch {torch.__version__} has no torch.xpu.XPUGraph; fn runs eagerly",
                None,
            )
        return (
            "xpu_graph",
            f"inputs are on {device}: captured as a torch.xpu.XPUGraph",
            _capture_xpu,
        )
    if device.type == "cpu":
        reason = (
            "inputs are on the CPU: graph capture needs CUDA, ROCm or XPU tensors; fn runs eagerly"
        )
    elif device.type == "mps":
        reason = "inputs are on MPS: torch has no graph capture for MPS; fn runs eagerly"
    else:
        reason = f"inputs are on {device.type}: ptkit has no graph capture for it; fn runs eagerly"
    return "eager", reason, None


def _capture_cuda(
    fn: Callable[..., Any], static: tuple[torch.Tensor, ...], warmup: int, device: torch.device
) -> tuple[Callable[[], None], Any]:
    """torch's recipe (docs, "CUDA Graphs"): warm up on a side stream, then capture."""
    new_stream: Callable[[], torch.cuda.Stream] = torch.cuda.Stream  # untyped constructor
    with torch.cuda.device(device):
        side = new_stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            for _ in range(warmup):
                fn(*static)
        torch.cuda.current_stream().wait_stream(side)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            outputs = fn(*static)
    return graph.replay, outputs


def _capture_xpu(
    fn: Callable[..., Any], static: tuple[torch.Tensor, ...], warmup: int, device: torch.device
) -> tuple[Callable[[], None], Any]:
    """The same recipe with torch.xpu's stream and graph API (checked present by _plan)."""
    xpu: Any = torch.xpu
    with xpu.device(device):
        side = xpu.Stream()
        side.wait_stream(xpu.current_stream())
        with xpu.stream(side):
            for _ in range(warmup):
                fn(*static)
        xpu.current_stream().wait_stream(side)
        graph = xpu.XPUGraph()
        with xpu.graph(graph):
            outputs = fn(*static)
    replay: Callable[[], None] = graph.replay
    return replay, outputs
