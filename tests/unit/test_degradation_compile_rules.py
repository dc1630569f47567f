"""compile_support() against torch's own rules.

Three levels of evidence, each claiming only what it executes:

1. the table: each Python / free-threading / torch row gives the expected answer, and
   torch's rule *source* (``check_if_dynamo_supported`` and the guard at the top of
   ``torch.compile``, read from the installed torch) gives the same answer when run on
   that row's facts;
2. this interpreter: the prediction equals ``is_dynamo_supported()``, and what
   ``torch.compile`` really does (compiles and computes the right result, or refuses);
3. other interpreters on this machine (pyenv's, without torch): torch's rule source runs
   in each, on its real ``sys.version_info`` and ``Py_GIL_DISABLED``, and agrees with the
   prediction made from the facts that interpreter reports. torch.compile itself is not
   run there: torch is not installed in them.
"""

from __future__ import annotations

import ast
import glob
import inspect
import json
import os
import shutil
import subprocess
import sys
import sysconfig
import textwrap
import types
from pathlib import Path

import pytest
import torch
from support import child_python

from ptkit.runtime.compiling import compile_support

TORCH_315 = "torch.compile is not supported on Python 3.15+"
TORCH_FT = "torch.compile is not supported on Python < 3.13.3 built with GIL disabled"

# label, python, gil_disabled, torch version, supported, text the reason must contain
TABLE = [
    ("3.10", (3, 10, 13), False, "2.14.1", True, "torch.compile runs here"),
    ("3.11", (3, 11, 7), False, "2.14.1", True, "torch.compile runs here"),
    ("3.12", (3, 12, 1), False, "2.14.1", True, "torch.compile runs here"),
    ("3.13", (3, 13, 0), False, "2.14.1", True, "torch.compile runs here"),
    ("3.14", (3, 14, 0), False, "2.14.1", True, "torch.compile runs here"),
    ("3.15", (3, 15, 0), False, "2.14.1", False, TORCH_315),
    ("3.15t", (3, 15, 0), True, "2.14.1", False, TORCH_315),
    ("3.13.2t", (3, 13, 2), True, "2.14.1", False, TORCH_FT),
    ("3.13.3t", (3, 13, 3), True, "2.14.1", True, "torch.compile runs here"),
    ("3.14t", (3, 14, 0), True, "2.14.1", True, "torch.compile runs here"),
    ("old torch", (3, 10, 13), False, "1.13.1", False, "does not exist before torch 2.0"),
]
TORCH_214_ROWS = [row for row in TABLE if row[3].startswith("2.14")]


def predict(python: tuple[int, int, int], gil_disabled: bool, torch_version: str = "2.14.1"):
    return compile_support(
        python=python,
        gil_disabled=gil_disabled,
        torch_version=torch_version,
        platform="linux",
        triton_available=False,
        device_types=("cpu",),
    )


@pytest.mark.parametrize(
    ("python", "gil_disabled", "torch_version", "supported", "says"),
    [row[1:] for row in TABLE],
    ids=[row[0] for row in TABLE],
)
def test_table(python, gil_disabled, torch_version, supported, says) -> None:
    result = predict(python, gil_disabled, torch_version)
    assert result.supported is supported, result.reason
    assert says in result.reason
    label = ".".join(map(str, python)) + ("t" if gil_disabled else "")
    assert f"Python {label}" in result.reason
    if not supported:
        assert result.gpu_codegen is False


# ---- torch's rule source, run on each row's facts ------------------------------------


def torch_rule_sources() -> dict[str, str]:
    """The installed torch's two rule checks, as runnable source that reads ``sys`` and
    ``sysconfig`` from its globals."""
    dynamo_check = textwrap.dedent(
        inspect.getsource(torch._dynamo.eval_frame.check_if_dynamo_supported)
    )
    compile_tree = ast.parse(textwrap.dedent(inspect.getsource(torch.compile)))
    guards = [
        node
        for node in ast.walk(compile_tree)
        if isinstance(node, ast.If) and "version_info" in ast.unparse(node.test)
    ]
    assert guards, "torch.compile no longer checks sys.version_info: re-read torch/__init__.py"
    compile_guard = "def torch_compile_guard():\n" + textwrap.indent(ast.unparse(guards[0]), "    ")
    return {"check_if_dynamo_supported": dynamo_check, "torch_compile_guard": compile_guard}


def run_torch_rule(source: str, name: str, version_info: tuple[int, int, int], gil: bool):
    """Run one of torch's checks on given facts; return its RuntimeError message or None."""
    namespace = {
        "sys": types.SimpleNamespace(version_info=version_info, platform="linux"),
        "sysconfig": types.SimpleNamespace(
            get_config_var=lambda var: (1 if gil else 0) if var == "Py_GIL_DISABLED" else None
        ),
    }
    exec(compile(source, f"<torch {name}>", "exec"), namespace)
    try:
        namespace[name]()
    except RuntimeError as error:
        return str(error)
    return None


def test_the_table_has_every_rule_torch_has() -> None:
    """If torch adds a refusal (a new Python ceiling, a platform), this fails first."""
    for name, source in torch_rule_sources().items():
        raises = [n for n in ast.walk(ast.parse(source)) if isinstance(n, ast.Raise)]
        assert len(raises) == 2, f"{name} now has {len(raises)} refusals:\n{source}"


@pytest.mark.parametrize(
    ("python", "gil_disabled"),
    [row[1:3] for row in TORCH_214_ROWS],
    ids=[row[0] for row in TORCH_214_ROWS],
)
def test_each_row_agrees_with_torch_rule_source(python, gil_disabled) -> None:
    result = predict(python, gil_disabled, torch.__version__)
    for name, source in torch_rule_sources().items():
        refusal = run_torch_rule(source, name, python, gil_disabled)
        assert (refusal is None) == result.supported, (name, refusal, result.reason)
        if name == "torch_compile_guard" and refusal is not None:
            # ptkit quotes the message torch.compile raises, word for word.
            assert refusal in result.reason


# ---- this interpreter: torch itself --------------------------------------------------


def test_defaults_are_this_process() -> None:
    facts = compile_support().facts
    assert facts.python == tuple(sys.version_info[:3])
    assert facts.gil_disabled == (sysconfig.get_config_var("Py_GIL_DISABLED") == 1)
    assert facts.torch_version == torch.__version__
    assert facts.platform == sys.platform
    assert facts.device_types[0] == "cpu"
    assert ("cuda" in facts.device_types) == torch.cuda.is_available()


def test_agrees_with_torch_is_dynamo_supported() -> None:
    result = compile_support()
    assert result.supported == torch._dynamo.eval_frame.is_dynamo_supported(), result.reason


def test_agrees_with_what_torch_compile_does_here() -> None:
    """Supported must mean: the default backend (Inductor) compiles and the result is right."""

    def fn(x: torch.Tensor) -> torch.Tensor:
        return torch.sin(x) * 2 + x

    x = torch.linspace(-2, 2, 17)
    result = compile_support()
    torch._dynamo.reset()
    if result.supported:
        torch.testing.assert_close(torch.compile(fn)(x), fn(x))
    else:
        with pytest.raises(RuntimeError) as refusal:
            torch.compile(fn)(x)
        assert str(refusal.value) in result.reason


# ---- other interpreters: torch's rule source, run by them ----------------------------


def other_interpreters() -> dict[str, str]:
    """CPython 3.10+ on this machine other than this one (pyenv, PATH), by version label."""
    root = os.environ.get("PYENV_ROOT", str(Path.home() / ".pyenv"))
    candidates = glob.glob(f"{root}/versions/3.*/bin/python3")
    candidates += [
        p for n in range(10, 16) for s in ("", "t") if (p := shutil.which(f"python3.{n}{s}"))
    ]
    probe = (
        "import os, sys, sysconfig; t = 't' if sysconfig.get_config_var('Py_GIL_DISABLED') == 1 "
        "else ''; print(os.path.realpath(sys.executable), '.'.join(map(str, sys.version_info[:3])) + t, "
        "sys.version_info >= (3, 10), sep='\\n')"
    )
    seen = {os.path.realpath(sys.executable)}  # a venv's python is its base interpreter
    chosen: dict[str, str] = {}
    for path in sorted(candidates):
        try:
            out = subprocess.run(
                [path, "-c", probe], capture_output=True, text=True, timeout=30, check=False
            )
        except (OSError, subprocess.TimeoutExpired):
            continue
        real, label, recent = [*out.stdout.splitlines(), "", "", ""][:3]
        if out.returncode == 0 and recent == "True" and real not in seen:
            seen.add(real)
            chosen[label] = path
    return chosen


OTHERS = other_interpreters()


@pytest.mark.skipif(not OTHERS, reason="no other CPython 3.10+ interpreter on this machine")
@pytest.mark.parametrize("python", list(OTHERS.values()), ids=list(OTHERS))
def test_other_interpreter_runs_torch_rule_source_and_agrees(python: str) -> None:
    sources = torch_rule_sources()
    code = textwrap.dedent(
        """
        import json, sys, sysconfig
        SOURCES = json.loads({sources!r})
        verdicts = {{}}
        for name, source in SOURCES.items():
            exec(source)
            try:
                globals()[name]()
                verdicts[name] = None
            except RuntimeError as error:
                verdicts[name] = str(error)
        print(json.dumps({{
            "python": list(sys.version_info[:3]),
            "gil_disabled": sysconfig.get_config_var("Py_GIL_DISABLED") == 1,
            "verdicts": verdicts,
        }}))
        """
    ).format(sources=json.dumps(sources))
    report = json.loads(child_python(code, python=python).stdout)
    result = predict(tuple(report["python"]), report["gil_disabled"], torch.__version__)
    for name, refusal in report["verdicts"].items():
        assert (refusal is None) == result.supported, (python, name, refusal, result.reason)


# ---- GPU code generation and the rest ------------------------------------------------


@pytest.mark.parametrize(
    ("device_types", "triton", "gpu_codegen", "says"),
    [
        (("cpu",), False, False, "no GPU device present"),
        (("cpu", "cuda"), False, False, "cuda graphs need Triton"),
        (("cpu", "xpu"), False, False, "xpu graphs need Triton"),
        (("cpu", "cuda"), True, True, "cuda: Triton kernels"),
        (("cpu", "mps"), False, True, "mps: Metal shaders"),
    ],
)
def test_gpu_codegen(device_types, triton, gpu_codegen, says) -> None:
    result = compile_support(
        python=(3, 12, 1),
        gil_disabled=False,
        torch_version="2.14.1",
        platform="linux",
        triton_available=triton,
        device_types=device_types,
    )
    # Triton or not, torch.compile itself runs: CPU graphs need only a C++ compiler.
    assert result.supported
    assert result.gpu_codegen is gpu_codegen
    assert says in result.gpu_reason


def test_to_json_is_json() -> None:
    result = predict((3, 15, 0), True)
    document = json.loads(json.dumps(result.to_json()))
    assert document["supported"] is False
    assert TORCH_315 in document["reason"]
    assert document["facts"]["python"] == "3.15.0t"
    assert set(document) == {"supported", "reason", "gpu_codegen", "gpu_reason", "facts"}


def test_bad_facts_are_rejected_with_the_function_name() -> None:
    with pytest.raises(ValueError, match=r"compile_support: python must be .* got \(3, 15\)"):
        compile_support(python=(3, 15))  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=r"compile_support: torch_version .* got 'latest'"):
        compile_support(torch_version="latest")
