"""ptkit.compile and ptkit.graphs on this machine (CPU).

The unsupported-interpreter branch of ptkit.compile is reached by substituting the
support decision (``compile_support`` in the ptkit.runtime.compiling module): the rule itself is
checked against torch's rule source in tests/unit/test_degradation_compile_rules.py and
against torch.compile itself here. The graph-mode buffer
logic of ptkit.graphs is exercised on CPU through a stand-in recorder, clearly marked;
the real CUDA capture runs only where a CUDA device is visible.
"""

from __future__ import annotations

import contextlib
import importlib
import warnings
from collections.abc import Iterator

import pytest
import torch

import ptkit
from ptkit.runtime.compiling import compile_support

compile_module = importlib.import_module("ptkit.runtime.compiling")
graphs = importlib.import_module("ptkit.runtime.graphs")
pcompile = compile_module.compile
compile_state = compile_module.compile_state


@pytest.fixture(autouse=True)
def fresh_dynamo() -> Iterator[None]:
    torch._dynamo.reset()
    yield
    torch._dynamo.reset()


@pytest.fixture
def unsupported(monkeypatch: pytest.MonkeyPatch) -> None:
    """This interpreter, as if it were CPython 3.16, which no torch released supports (2.14
    refuses 3.15 and later, 2.15 refuses 3.16 and later; torch's rule is tested in
    tests/unit/test_degradation_compile_rules.py)."""
    monkeypatch.setattr(compile_module, "compile_support", lambda: REFUSED)


HERE = compile_support()
REFUSED = compile_support(python=(3, 16, 0))
# torch's words: "torch.compile is not supported on Python 3.15+" (2.14), "… 3.16+" (2.15).
REFUSAL = REFUSED.reason.split(" (torch's check")[0]
needs_compile = pytest.mark.skipif(
    not HERE.supported, reason=f"torch.compile cannot run here: {HERE.reason}"
)


def fn(x: torch.Tensor) -> torch.Tensor:
    return torch.sin(x) * 2 + x


X = torch.linspace(-2, 2, 11)


class Counting:
    """A torch.compile backend that counts the graphs it is given and runs them as is."""

    def __init__(self) -> None:
        self.graphs = 0

    def __call__(self, gm: torch.fx.GraphModule, example_inputs: list[torch.Tensor]):
        self.graphs += 1
        return gm.forward


def raising_backend(gm: torch.fx.GraphModule, example_inputs: list[torch.Tensor]):
    raising_backend.calls += 1  # type: ignore[attr-defined]
    raise RuntimeError("backend boom")


@contextlib.contextmanager
def no_warnings() -> Iterator[None]:
    """A context in which any warning fails the test."""
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        yield


# ---- the rule against torch.compile itself ----------------------------------------------


def test_compile_support_agrees_with_what_torch_compile_does_here() -> None:
    """Supported must mean: the default backend (Inductor) compiles and the result is right;
    unsupported, that torch.compile refuses with the message ptkit quotes."""
    x = torch.linspace(-2, 2, 17)
    if HERE.supported:
        torch.testing.assert_close(torch.compile(fn)(x), fn(x))
    else:
        with pytest.raises(RuntimeError) as refusal:
            torch.compile(fn)(x)
        assert str(refusal.value) in HERE.reason


# ---- ptkit.compile -------------------------------------------------------------------


def test_public_name() -> None:
    """ptkit/__init__.py exposes the function as ptkit.compile."""
    assert ptkit.compile is pcompile


@needs_compile
def test_supported_interpreter_compiles() -> None:
    backend = Counting()
    compiled = pcompile(fn, backend=backend)
    torch.testing.assert_close(compiled(X), fn(X))
    torch.testing.assert_close(compiled(X + 1), fn(X + 1))  # same shape: no recompile
    assert backend.graphs == 1
    state = compile_state(compiled)
    assert state is not None and state.mode == "compiled" and state.fallback == "raise"
    assert state.support.supported


@needs_compile
def test_supported_module_is_torch_compiled() -> None:
    model = torch.nn.Linear(4, 3)
    backend = Counting()
    compiled = pcompile(model, backend=backend)
    assert isinstance(compiled, torch._dynamo.eval_frame.OptimizedModule)
    x = torch.randn(2, 4)
    torch.testing.assert_close(compiled(x), model(x))
    assert backend.graphs == 1


@pytest.mark.usefixtures("unsupported")
@pytest.mark.parametrize("fallback", ["raise", "eager"])
def test_unsupported_returns_the_original_with_one_warning(fallback) -> None:
    model = torch.nn.Linear(4, 3)
    for original in (fn, model):
        with pytest.warns(RuntimeWarning) as record:
            result = pcompile(original, fallback=fallback)
        assert len(record) == 1
        message = str(record[0].message)
        assert message.startswith("ptkit.compile:")
        assert REFUSAL.startswith("torch.compile is not supported on Python 3.1"), REFUSAL
        assert REFUSAL in message
        assert result is original
        state = compile_state(result)
        assert state is not None and state.mode == "eager"
        assert REFUSAL in state.reason
    with no_warnings():
        torch.testing.assert_close(model(torch.ones(1, 4)), model(torch.ones(1, 4)))


@pytest.mark.skipif(HERE.supported, reason="torch.compile runs here: see the substituted test")
def test_unsupported_interpreter_for_real() -> None:
    """On an interpreter torch refuses (3.15+, free-threaded < 3.13.3), without substitution."""
    with pytest.warns(RuntimeWarning, match=r"^ptkit\.compile: torch\.compile is not") as record:
        assert pcompile(fn, fallback="eager") is fn
    assert len(record) == 1


@needs_compile
def test_fallback_eager_runs_eagerly_after_a_backend_failure() -> None:
    raising_backend.calls = 0  # type: ignore[attr-defined]
    wrapped = pcompile(fn, fallback="eager", backend=raising_backend)
    assert compile_state(wrapped).mode == "compiled"
    with pytest.warns(RuntimeWarning) as record:
        result = wrapped(X)
    torch.testing.assert_close(result, fn(X))
    assert len(record) == 1
    message = str(record[0].message)
    assert message.startswith("ptkit.compile:")
    assert "BackendCompilerFailed" in message and "backend boom" in message
    with no_warnings():  # a second call: no second warning, no second compile
        torch.testing.assert_close(wrapped(X * 3), fn(X * 3))
    assert raising_backend.calls == 1  # type: ignore[attr-defined]
    state = wrapped.ptkit_compile_state
    assert state.mode == "eager" and "backend boom" in (state.failure or "")
    assert compile_state(wrapped) is state


@needs_compile
def test_without_fallback_the_backend_failure_raises() -> None:
    compiled = pcompile(fn, backend=raising_backend)
    with pytest.raises(torch._dynamo.exc.BackendCompilerFailed, match="backend boom"):
        compiled(X)


@needs_compile
def test_fallback_eager_keeps_module_attributes() -> None:
    model = torch.nn.Linear(4, 3)
    wrapped = pcompile(model, fallback="eager", backend=raising_backend)
    assert wrapped.weight is model.weight
    x = torch.randn(2, 4)
    with pytest.warns(RuntimeWarning, match=r"^ptkit\.compile:"):
        torch.testing.assert_close(wrapped(x), model(x))


def user_error(x: torch.Tensor) -> torch.Tensor:
    y = x + 1
    raise ValueError(f"user code refuses {tuple(y.shape)}")


def data_dependent_user_error(x: torch.Tensor) -> torch.Tensor:
    if x.sum() > 0:
        raise ValueError("user code refuses positive sums")
    return x


@needs_compile
@pytest.mark.parametrize("user_fn", [user_error, data_dependent_user_error])
@pytest.mark.parametrize("fallback", ["raise", "eager"])
def test_user_value_error_propagates(user_fn, fallback) -> None:
    compiled = pcompile(user_fn, fallback=fallback, backend=Counting())
    with no_warnings(), pytest.raises(ValueError, match="user code refuses") as raised:
        compiled(torch.ones(3))
    assert type(raised.value) is ValueError
    assert compile_state(compiled).mode == "compiled"


@needs_compile
def test_user_value_error_propagates_under_fullgraph_with_fallback() -> None:
    """With fullgraph=True dynamo turns the user's raise into ``Unsupported: Observed
    exception``; the eager run raises the user's own exception, and nothing falls back."""
    compiled = pcompile(user_error, fallback="eager", fullgraph=True, backend=Counting())
    with no_warnings(), pytest.raises(ValueError, match="user code refuses") as raised:
        compiled(torch.ones(3))
    assert type(raised.value) is ValueError and raised.value.__context__ is None
    assert compile_state(compiled).mode == "compiled"


@needs_compile
def test_user_shape_error_seen_through_fake_tensors_is_the_users() -> None:
    """A bad matmul fails while dynamo traces with fake tensors (TorchRuntimeError); with
    fallback the caller gets eager's own RuntimeError, and no fallback warning."""

    def bad_matmul(x: torch.Tensor) -> torch.Tensor:
        return x @ torch.ones(7, 3)

    compiled = pcompile(bad_matmul, fallback="eager", backend=Counting())
    with no_warnings(), pytest.raises(RuntimeError) as raised:
        compiled(torch.ones(4, 4))
    assert not isinstance(raised.value, torch._dynamo.exc.TorchDynamoException)
    assert "cannot be multiplied" in str(raised.value)


def test_bad_arguments_are_rejected() -> None:
    with pytest.raises(ValueError, match=r"ptkit\.compile: fallback must be .* got 'maybe'"):
        pcompile(fn, fallback="maybe")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=r"ptkit\.compile: expected a callable .* got int"):
        pcompile(3)  # type: ignore[arg-type]
    assert compile_state(lambda x: x) is None


# ---- ptkit.graphs --------------------------------------------------------------------


def add_scaled(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    return x + 2 * y


def test_cpu_inputs_run_eagerly_with_the_reason() -> None:
    x, y = torch.randn(4, 4), torch.randn(4, 4)
    captured = graphs.capture(add_scaled, x, y)
    assert captured.mode == "eager"
    assert "CPU" in captured.reason
    a, b = torch.randn(4, 4), torch.randn(4, 4)
    torch.testing.assert_close(captured.replay(a, b), add_scaled(a, b))
    torch.testing.assert_close(captured(a, b), add_scaled(a, b))
    document = captured.to_json()
    assert document["mode"] == "eager" and "CPU" in document["reason"]
    assert document["inputs"][0] == {"shape": [4, 4], "dtype": "float32", "device": "cpu"}


@pytest.mark.parametrize(
    ("inputs", "says"),
    [
        ((torch.randn(4, 4),), r"replay expected 2 input\(s\).*given 1"),
        (
            (torch.randn(4, 4), torch.randn(2, 4)),
            r"replay input 1 expected shape \(4, 4\).*given shape \(2, 4\)",
        ),
        (
            (torch.randn(4, 4, dtype=torch.float64), torch.randn(4, 4)),
            r"replay input 0 expected .*dtype torch\.float32.*given .*dtype torch\.float64",
        ),
        ((torch.randn(4, 4), 2.0), r"replay input 1 expected a tensor .* given a float"),
    ],
)
def test_bad_replay_inputs_are_rejected(inputs, says) -> None:
    captured = graphs.capture(add_scaled, torch.randn(4, 4), torch.randn(4, 4))
    with pytest.raises(ValueError, match=r"^ptkit\.graphs\.capture: " + says):
        captured.replay(*inputs)


def test_other_devices_and_bad_arguments() -> None:
    meta = torch.empty(2, device="meta")
    assert graphs.capture(torch.neg, meta).mode == "eager"
    assert "meta" in graphs.capture(torch.neg, meta).reason
    mixed = graphs.capture(torch.add, torch.ones(2), meta)
    assert mixed.mode == "eager" and "several devices (cpu, meta)" in mixed.reason
    assert "no example inputs" in graphs.capture(lambda: 1).reason
    with pytest.raises(TypeError, match=r"ptkit\.graphs\.capture: example input 0 .* float"):
        graphs.capture(torch.neg, 1.0)
    with pytest.raises(ValueError, match=r"ptkit\.graphs\.capture: warmup .* given -1"):
        graphs.capture(torch.neg, torch.ones(2), warmup=-1)


def test_capture_plan_here() -> None:
    mode, reason = graphs.capture_plan()
    if torch.cuda.is_available():
        assert mode == "cuda_graph"
    else:
        assert mode == "eager" and "CPU" in reason
    assert graphs.capture_plan("cpu")[0] == "eager"


class StandInRecorder:
    """NOT a device graph: records by keeping fn, replays by recomputing into the same
    output buffer. It exercises what capture() does around a real CUDA/XPU recorder
    (static buffers, copies, validation) on a CPU-only machine."""

    def __init__(self) -> None:
        self.calls = 0

    def __call__(self, fn, static, warmup, device):
        for _ in range(warmup):
            self.calls += 1
            fn(*static)
        self.calls += 1
        outputs = fn(*static)

        def replay() -> None:
            self.calls += 1
            outputs.copy_(fn(*static))

        return replay, outputs


def test_graph_mode_uses_static_buffers(monkeypatch: pytest.MonkeyPatch) -> None:
    recorder = StandInRecorder()
    monkeypatch.setattr(graphs, "_plan", lambda device: ("cuda_graph", "stand-in", recorder))
    x, y = torch.randn(4, 4), torch.randn(4, 4)
    captured = graphs.capture(add_scaled, x, y, warmup=2)
    assert captured.mode == "cuda_graph" and recorder.calls == 3
    x.fill_(100.0)  # the caller's tensors are not the graph's buffers
    a, b = torch.randn(4, 4), torch.randn(4, 4)
    first = captured.replay(a, b)
    torch.testing.assert_close(first, add_scaled(a, b))
    second = captured(b, a)
    assert second is first  # static output buffer, overwritten by each replay
    torch.testing.assert_close(second, add_scaled(b, a))
    with pytest.raises(ValueError, match=r"^ptkit\.graphs\.capture: replay input 0"):
        captured.replay(torch.randn(3, 4), b)


def test_capture_failure_names_the_function(monkeypatch: pytest.MonkeyPatch) -> None:
    def failing(fn, static, warmup, device):
        raise RuntimeError("operation not permitted when stream is capturing")

    monkeypatch.setattr(graphs, "_plan", lambda device: ("cuda_graph", "stand-in", failing))
    with pytest.raises(RuntimeError, match=r"^ptkit\.graphs\.capture: capturing .* failed"):
        graphs.capture(add_scaled, torch.ones(2), torch.ones(2))
