"""ptkit-ops' Metal (Apple GPU) kernels, bound through torch's shader API.

The kernels ship as Metal source (``metal/ptkit_kernels.metal``) or a precompiled
``.metallib``; ``torch.mps.compile_shader`` / ``torch.mps.load_metallib`` turn them
into a shader library whose attributes are the kernels. There is no native
library to ``dlopen``: the ops' MPS implementations are the Python functions
below, registered at the dispatcher's ``MPS`` key by ``register_metal_kernels``.

Three rules shape this module:

* The binding is declarative. ``KERNELS`` lists, per kernel, the buffer arguments
  in order; every launch goes through ``_dispatch``, which checks the arguments
  against that table. The unit tests parse the ``.metal`` source
  (``tests/metal_source.py``) and compare, so the Python and the Metal side cannot
  drift apart silently. (torch binds positional argument *i* to ``[[buffer(i)]]``;
  a tensor as a ``device`` pointer, a Python float as ``constant float&``, a Python
  int as ``constant long&``.)
* Nothing happens at registration: the library is compiled lazily, once, on the
  first MPS call, so ``import ptkit_ops`` costs nothing on a Mac that never uses MPS
  and registering is safe on a torch without MPS.
* The Metal path never raises its own failures into user code. If compiling or a
  launch fails, ``MetalKernels`` records why (``failure``, shown by ``explain``),
  logs one warning, and from then on serves every call with the reference
  implementation. Invalid *inputs* still raise, with the reference's messages.
"""

from __future__ import annotations

import dataclasses
import logging
import math
import threading
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Literal, Protocol

import torch

from ptkit_ops import _checks
from ptkit_ops._checks import ACTIVATIONS
from ptkit_ops._library import (
    NAMESPACE,
    fused_linear_reference,
    rms_norm_reference,
    silu_and_mul_reference,
)

__all__ = [
    "DTYPE_SUFFIX",
    "GEMV_MAX_ROWS",
    "KERNELS",
    "MetalArg",
    "MetalBindingError",
    "MetalKernels",
    "compile_metal_library",
    "fused_linear_mps",
    "host_name",
    "metal_kernels",
    "register_metal_kernels",
    "rms_norm_mps",
    "silu_and_mul_mps",
]

logger = logging.getLogger("ptkit.runtime")

ArgKind = Literal["tensor", "float", "int"]


@dataclasses.dataclass(frozen=True)
class MetalArg:
    """One buffer argument of a kernel: ``tensor`` is a ``device T*``, ``float`` a
    ``constant float&``, ``int`` a ``constant long&``."""

    name: str
    kind: ArgKind

    def __str__(self) -> str:
        return f"{self.name}: {self.kind}"


def _t(name: str) -> MetalArg:
    return MetalArg(name, "tensor")


def _f(name: str) -> MetalArg:
    return MetalArg(name, "float")


def _i(name: str) -> MetalArg:
    return MetalArg(name, "int")


# The kernels this binding launches: template name -> buffer arguments, in buffer order.
# Must equal the signatures in metal/ptkit_kernels.metal (tests/unit/test_metal_binding.py).
KERNELS: dict[str, tuple[MetalArg, ...]] = {
    "rms_norm": (_t("x"), _t("weight"), _t("y"), _i("cols"), _f("eps")),
    "silu_and_mul": (_t("x"), _t("y"), _i("d")),
    "gemv": (
        _t("x"),
        _t("w"),
        _t("bias"),
        _t("y"),
        _i("m"),
        _i("k"),
        _i("n"),
        _i("has_bias"),
        _i("activation"),
    ),
    "bias_activation": (_t("y"), _t("bias"), _i("n"), _i("has_bias"), _i("activation")),
}

# Each kernel is instantiated once per dtype as ptkit_<kernel>_<suffix>.
DTYPE_SUFFIX: dict[torch.dtype, str] = {
    torch.float32: "float",
    torch.float16: "half",
    torch.bfloat16: "bfloat",
}

# fused_linear with at most this many rows takes the gemv kernel (kGemvMaxRows in the
# .metal source: one register accumulator per row); more go to the library GEMM.
GEMV_MAX_ROWS = 16

# Activation name -> the index the kernels switch on (ACTIVATIONS order).
_ACTIVATION_INDEX = {name: i for i, name in enumerate(ACTIVATIONS)}

# Apple GPUs run 32-wide simdgroups; gemv takes one simdgroup per output column.
_SIMD_WIDTH = 32
# Threadgroup size of the elementwise kernels and gemv: 8 simdgroups, within every
# pipeline's limit, enough to hide memory latency.
_GROUP = 256
# rms_norm: one threadgroup per row, a multiple of 32 threads, up to this many.
_RMS_NORM_MAX_GROUP = 256
# The kernels index the grid with 32-bit thread positions.
_MAX_GRID = 2**32 - 1


def host_name(kernel: str, dtype: torch.dtype) -> str:
    """The exported function name of ``kernel`` for ``dtype``: ``ptkit_rms_norm_half`` …"""
    return f"ptkit_{kernel}_{DTYPE_SUFFIX[dtype]}"


class MetalBindingError(TypeError):
    """A kernel launch whose arguments do not match ``KERNELS``: a bug in this module."""


def _arg_matches(arg: object, spec: MetalArg, dtype: torch.dtype) -> str | None:
    """Why ``arg`` cannot bind to ``spec``, or None."""
    if spec.kind == "tensor":
        if not isinstance(arg, torch.Tensor):
            return f"expected a torch.Tensor, got {type(arg).__name__}"
        if arg.dtype != dtype:
            return f"expected dtype {dtype}, got {arg.dtype}"
        if not arg.is_contiguous():
            return "expected a contiguous tensor (the kernels index it row-major)"
        return None
    if spec.kind == "float":
        # torch binds a Python float as 4 bytes; an int would bind as 8 (int64).
        return None if type(arg) is float else f"expected a float, got {type(arg).__name__}"
    # An int binds as int64 (constant long&); bool is an int, but never what is meant.
    return None if type(arg) is int else f"expected an int, got {type(arg).__name__}"


def _dispatch(
    lib: object,
    kernel: str,
    dtype: torch.dtype,
    args: Sequence[torch.Tensor | float | int],
    threads: int,
    group_size: int,
) -> None:
    """Launch ``ptkit_<kernel>_<dtype suffix>`` of ``lib`` on a 1-D grid of ``threads``
    threads in threadgroups of ``group_size``, after checking ``args`` against
    ``KERNELS[kernel]``. Every kernel launch of this module goes through here."""
    spec = KERNELS.get(kernel)
    if spec is None:
        raise MetalBindingError(f"ptkit: no Metal kernel {kernel!r} (known: {', '.join(KERNELS)})")
    if dtype not in DTYPE_SUFFIX:
        raise MetalBindingError(f"ptkit_{kernel}: no instantiation for dtype {dtype}")
    name = host_name(kernel, dtype)
    if len(args) != len(spec):
        raise MetalBindingError(
            f"{name}: expected {len(spec)} arguments ({', '.join(map(str, spec))}), got {len(args)}"
        )
    for index, (arg, arg_spec) in enumerate(zip(args, spec, strict=True)):
        problem = _arg_matches(arg, arg_spec, dtype)
        if problem:
            raise MetalBindingError(f"{name}: argument {index} ({arg_spec}): {problem}")
    if not 0 < group_size <= threads:
        raise MetalBindingError(
            f"{name}: expected 0 < group_size <= threads, got group_size {group_size}, "
            f"threads {threads}"
        )
    getattr(lib, name)(*args, threads=threads, group_size=group_size)


def _round_up(value: int, multiple: int) -> int:
    return -(-value // multiple) * multiple


def _rows(x: torch.Tensor) -> int:
    # Not numel // shape[-1]: the last dimension may be 0.
    return math.prod(x.shape[:-1])


def _elementwise_group(threads: int) -> int:
    return min(_GROUP, threads)


# The MPS implementations. Inputs are already validated (MetalKernels runs the
# reference's checks first); ``lib`` is the compiled shader library.


def rms_norm_mps(lib: object, x: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
    """``ptkit::rms_norm`` with the ``rms_norm`` kernel: one threadgroup per row."""
    x = x.contiguous()
    weight = weight.contiguous()
    y = torch.empty_like(x, memory_format=torch.contiguous_format)
    if x.numel() == 0:
        return y
    cols = x.shape[-1]
    rows = _rows(x)
    # Enough threads for ~4 elements each, a whole number of simdgroups.
    group = min(_RMS_NORM_MAX_GROUP, _round_up(-(-cols // 4), _SIMD_WIDTH))
    if rows * group > _MAX_GRID:
        return rms_norm_reference(x, weight, eps)
    _dispatch(lib, "rms_norm", x.dtype, (x, weight, y, cols, float(eps)), rows * group, group)
    return y


def silu_and_mul_mps(lib: object, x: torch.Tensor) -> torch.Tensor:
    """``ptkit::silu_and_mul`` with the ``silu_and_mul`` kernel: one thread per output."""
    x = x.contiguous()
    d = x.shape[-1] // 2
    y = x.new_empty((*x.shape[:-1], d))
    total = y.numel()
    if total == 0:
        return y
    if total > _MAX_GRID:
        return silu_and_mul_reference(x)
    _dispatch(lib, "silu_and_mul", x.dtype, (x, y, d), total, _elementwise_group(total))
    return y


def fused_linear_mps(
    lib: object,
    x: torch.Tensor,
    weight: torch.Tensor,
    bias: torch.Tensor | None,
    activation: str,
) -> torch.Tensor:
    """``ptkit::fused_linear``: the ``gemv`` kernel (bias and activation fused) for at
    most ``GEMV_MAX_ROWS`` rows; otherwise the MPS library GEMM, then the
    ``bias_activation`` kernel in place when there is an epilogue."""
    k = x.shape[-1]
    n = weight.shape[0]
    m = _rows(x)
    out_shape = (*x.shape[:-1], n)
    if m == 0 or n == 0:
        return x.new_empty(out_shape)
    x2d = x.reshape(m, k).contiguous()
    weight = weight.contiguous()
    act = _ACTIVATION_INDEX[activation]
    has_bias = int(bias is not None)
    # A buffer must be bound in the bias slot even without a bias; has_bias = 0 says
    # not to read it.
    bias_arg = bias.contiguous() if bias is not None else weight

    # k == 0 (an all-zero product) goes to the GEMM: no kernel reads an empty buffer.
    if m <= GEMV_MAX_ROWS and k > 0:
        threads = n * _SIMD_WIDTH
        if threads > _MAX_GRID:
            return fused_linear_reference(x, weight, bias, activation)
        y = x2d.new_empty((m, n))
        _dispatch(
            lib,
            "gemv",
            x.dtype,
            (x2d, weight, bias_arg, y, m, k, n, has_bias, act),
            threads,
            min(_GROUP, threads),
        )
        return y.reshape(out_shape)

    if m * n > _MAX_GRID:
        return fused_linear_reference(x, weight, bias, activation)
    y = torch.matmul(x2d, weight.t()).contiguous()
    if has_bias or activation != "none":
        _dispatch(
            lib,
            "bias_activation",
            x.dtype,
            (y, bias_arg, n, has_bias, act),
            m * n,
            _elementwise_group(m * n),
        )
    return y.reshape(out_shape)


def compile_metal_library(path: Path) -> object:
    """torch's shader library for the kernels at ``path``: ``torch.mps.load_metallib``
    for a ``.metallib``, ``torch.mps.compile_shader`` of the source otherwise."""
    if path.suffix == ".metallib":
        load = getattr(torch.mps, "load_metallib", None)
        if load is None:
            raise RuntimeError(
                f"torch {torch.__version__} has no torch.mps.load_metallib; ship the .metal "
                "source instead"
            )
        return load(str(path))
    compile_shader = torch.mps.compile_shader
    library: object = compile_shader(path.read_text(encoding="utf-8"))
    return library


class MetalKernels:
    """The shipped Metal kernels, compiled on first use, and the ops that run them.

    ``rms_norm``, ``fused_linear`` and ``silu_and_mul`` are the ops' MPS
    implementations (same signatures as the schemas). They validate their inputs
    like the reference, run the kernels, and fall back to the reference for good
    once compiling or a launch has failed (``failure`` says why).

    Args:
        library_path: the ``.metal`` source or ``.metallib``.
        compile: turns ``library_path`` into a shader library object whose
            attributes are the kernels (default ``compile_metal_library``); tests
            inject one that runs on the CPU.
    """

    def __init__(
        self,
        library_path: Path,
        *,
        compile: Callable[[Path], object] | None = None,
    ) -> None:
        self.library_path = Path(library_path)
        self._compile = compile if compile is not None else compile_metal_library
        self._lock = threading.Lock()
        self._library: object | None = None
        self._attempted = False
        self.failure: str | None = None

    def __repr__(self) -> str:
        return f"MetalKernels({str(self.library_path)!r}, state={self.state!r})"

    @property
    def compiled(self) -> bool:
        """True once the library compiled and nothing has failed since."""
        return self._library is not None and self.failure is None

    @property
    def state(self) -> str:
        """``not compiled yet``, ``compiled`` or ``failed: <reason>``."""
        if self.failure is not None:
            return f"failed: {self.failure}"
        return "compiled" if self._library is not None else "not compiled yet"

    def library(self) -> object | None:
        """The shader library, compiled on the first call (once, under a lock); None
        when compiling or a launch has failed."""
        if not self._attempted:
            with self._lock:
                if not self._attempted:
                    try:
                        self._library = self._compile(self.library_path)
                    except Exception as exc:
                        self._fail_locked(f"compiling {self.library_path} failed", exc)
                    self._attempted = True
        return self._library if self.failure is None else None

    def _fail_locked(self, what: str, exc: Exception) -> None:
        if self.failure is not None:  # a concurrent call failed first: one warning
            return
        self.failure = f"{what}: {type(exc).__name__}: {exc}"
        logger.warning(
            "ptkit: the Metal kernels are not used; MPS tensors run the reference "
            "implementation from now on: %s",
            self.failure,
        )

    def _launch_failed(self, op: str, exc: Exception) -> None:
        with self._lock:
            self._fail_locked(f"ptkit.{op} with the Metal kernels of {self.library_path}", exc)

    def _serve(
        self,
        op: str,
        mps: Callable[..., torch.Tensor],
        reference: Callable[..., torch.Tensor],
        *args: Any,
    ) -> torch.Tensor:
        """The Metal kernel while the library works, else the reference (which also
        serves every call after a failure)."""
        lib = self.library()
        if lib is not None:
            try:
                return mps(lib, *args)
            except Exception as exc:
                self._launch_failed(op, exc)
        return reference(*args)

    # Inputs are checked first, so that bad inputs raise before anything compiles.
    def rms_norm(self, x: torch.Tensor, weight: torch.Tensor, eps: float = 1e-6) -> torch.Tensor:
        _checks.check_rms_norm(x, weight, eps)
        return self._serve("rms_norm", rms_norm_mps, rms_norm_reference, x, weight, eps)

    def fused_linear(
        self,
        x: torch.Tensor,
        weight: torch.Tensor,
        bias: torch.Tensor | None = None,
        activation: str = "none",
    ) -> torch.Tensor:
        _checks.check_fused_linear(x, weight, bias, activation)
        return self._serve(
            "fused_linear", fused_linear_mps, fused_linear_reference, x, weight, bias, activation
        )

    def silu_and_mul(self, x: torch.Tensor) -> torch.Tensor:
        _checks.check_silu_and_mul(x)
        return self._serve("silu_and_mul", silu_and_mul_mps, silu_and_mul_reference, x)


# Registration: process-global, like the dispatcher it writes to.


class _ImplLibrary(Protocol):
    def impl(self, op_name: str, fn: Callable[..., Any], dispatch_key: str) -> None: ...


# torch.library.Library carries no annotations; this is the part of it used here.
_new_library: Callable[[str, str], _ImplLibrary] = torch.library.Library

_registration_lock = threading.Lock()
_impl_library: _ImplLibrary | None = None
_registered: MetalKernels | None = None


def register_metal_kernels(library_path: Path) -> MetalKernels:
    """Register the three ops' MPS implementations (dispatch key ``MPS``) backed by the
    kernels at ``library_path``; compile nothing yet (the first MPS call does).

    Works on any torch, with or without MPS: the dispatcher accepts a kernel for a
    key no tensor will reach. A second call with the same path returns the same
    object; with another path it raises RuntimeError.
    """
    global _impl_library, _registered
    library_path = Path(library_path)
    with _registration_lock:
        if _registered is not None:
            if _registered.library_path == library_path:
                return _registered
            raise RuntimeError(
                f"ptkit's Metal kernels are already registered from "
                f"{_registered.library_path}; not registering {library_path}"
            )
        kernels = MetalKernels(library_path)
        library = _new_library(NAMESPACE, "IMPL")
        library.impl("rms_norm", kernels.rms_norm, "MPS")
        library.impl("fused_linear", kernels.fused_linear, "MPS")
        library.impl("silu_and_mul", kernels.silu_and_mul, "MPS")
        # Kept alive for the life of the process: dropping it would unregister the kernels.
        _impl_library = library
        _registered = kernels
    return kernels


def metal_kernels() -> MetalKernels | None:
    """The registered Metal kernels (for ``explain``: ``state``, ``failure``), or None."""
    return _registered
