"""compile_support() against torch's own rules.

ptkit reads torch's refusals from the installed torch's source
(``ptkit.degradation.torch_guards``); these tests check that reading four ways:

1. the table: each Python / free-threading / torch row gives the expected answer, and
   torch's rule *source* (``check_if_dynamo_supported`` and the guard at the top of
   ``torch.compile``, read from the installed torch) gives the same answer when run on
   that row's facts;
2. this interpreter: the prediction equals ``is_dynamo_supported()`` (what
   ``torch.compile`` really does here, Inductor compiling, is
   tests/integration/test_compile_and_graphs.py: it takes about 20 s);
3. other interpreters on this machine (pyenv's, without torch): torch's rule source runs
   in each, on its real ``sys.version_info`` and ``Py_GIL_DISABLED``, and agrees with the
   prediction made from the facts that interpreter reports. torch.compile itself is not
   run there: torch is not installed in them;
4. a torch whose checks differ: patched copies of the installed torch's two guard
   modules (``torch/__init__.py``, ``torch/_dynamo/eval_frame.py``; named as patched
   copies, nothing else of torch) in a folder given as ``torch_root``: lifting or adding
   a refusal there changes ptkit's answer with no change to ptkit.
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

from ptkit.degradation.torch_guards import TorchGuards, read_guards
from ptkit.runtime.compiling import compile_support

TORCH_ROOT = Path(torch.__file__).parent

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


def test_every_refusal_torch_raises_is_read() -> None:
    """Each environment check of the installed torch (a raise whose condition names no
    argument of torch.compile) is one guard ptkit evaluates, none left unreadable."""
    guards = read_guards(TORCH_ROOT)
    raises = 0
    for source in torch_rule_sources().values():
        raises += sum(isinstance(n, ast.Raise) for n in ast.walk(ast.parse(source)))
    assert len(guards.guards) == raises, guards
    assert guards.unreadable == () and guards.missing == ()


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
    assert set(document) == {
        "supported",
        "reason",
        "gpu_codegen",
        "gpu_reason",
        "cpu_codegen",
        "cpu_reason",
        "checks_read",
        "facts",
    }


def test_bad_facts_are_rejected_with_the_function_name() -> None:
    with pytest.raises(ValueError, match=r"compile_support: python must be .* got \(3, 15\)"):
        compile_support(python=(3, 15))  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=r"compile_support: torch_version .* got 'latest'"):
        compile_support(torch_version="latest")


# ---- a torch whose checks differ: patched copies of its guard modules ----------------


def patched_torch(tmp_path: Path, edit: dict[str, str], extra: str = "") -> Path:
    """A folder holding patched copies of the installed torch's two guard modules (every
    ``old`` of ``edit`` replaced by its ``new``; ``extra`` appended to eval_frame's check):
    a torch root for compile_support(torch_root=...), nothing else of torch."""
    root = tmp_path / "patched-torch"
    (root / "_dynamo").mkdir(parents=True)
    for relative in ("__init__.py", "_dynamo/eval_frame.py"):
        text = (TORCH_ROOT / relative).read_text()
        for old, new in edit.items():
            assert old in text, f"{old!r} is no longer in torch/{relative}: re-read it"
            text = text.replace(old, new)
        if extra and relative.endswith("eval_frame.py"):
            text = text.replace(
                "def check_if_dynamo_supported() -> None:\n",
                f"def check_if_dynamo_supported() -> None:\n{extra}",
            )
        (root / relative).write_text(text)
    return root


def predict_with(root: Path, python: tuple[int, int, int], gil: bool = False):
    return compile_support(
        python=python,
        gil_disabled=gil,
        torch_version="2.14.1",
        platform="linux",
        triton_available=False,
        device_types=("cpu",),
        torch_root=root,
    )


def test_a_torch_that_lifts_the_315_refusal_compiles_on_315(tmp_path: Path) -> None:
    assert not predict_with(TORCH_ROOT, (3, 15, 2)).supported  # the installed torch 2.14
    lifted = patched_torch(tmp_path, {"sys.version_info >= (3, 15)": "sys.version_info >= (3, 16)"})
    result = predict_with(lifted, (3, 15, 2))
    assert result.supported, result.reason
    assert str(lifted) in result.reason
    assert not predict_with(lifted, (3, 16, 0)).supported


def test_a_torch_that_adds_a_refusal_is_refused_with_its_words(tmp_path: Path) -> None:
    stricter = patched_torch(
        tmp_path,
        {},
        extra='    if sys.platform == "linux" and sys.version_info[:2] == (3, 11):\n'
        '        raise RuntimeError("patched copy: no torch.compile on Linux CPython 3.11")\n',
    )
    result = predict_with(stricter, (3, 11, 7))
    assert not result.supported
    assert "patched copy: no torch.compile on Linux CPython 3.11" in result.reason
    assert "torch/_dynamo/eval_frame.py:" in result.reason
    assert predict_with(stricter, (3, 12, 1)).supported


def test_a_check_ptkit_cannot_evaluate_is_named_and_left_to_torch(tmp_path: Path) -> None:
    odd = patched_torch(
        tmp_path,
        {},
        extra='    if os.environ.get("PATCHED_REFUSAL"):\n'
        '        raise RuntimeError("patched copy: refused by environment")\n',
    )
    result = predict_with(odd, (3, 11, 7))
    assert result.supported and result.checks_read is False
    assert "not evaluated: torch/_dynamo/eval_frame.py:" in result.reason
    assert "os.environ.get" in result.reason


@pytest.mark.parametrize("newline", ["\n", "\r\n", "\r"])
def test_conditions_are_quoted_as_ast_quotes_them(tmp_path: Path, newline: str) -> None:
    # Conditions spanning lines, after non-ASCII text (ast's columns count UTF-8 bytes),
    # with each line ending torch's source could have.
    odd = patched_torch(
        tmp_path,
        {},
        extra='    if sys.platform == "café" or (\n'
        "        sys.version_info[:2] == (3, 9)  # « deux »\n"
        "    ):\n"
        '        raise RuntimeError("patched copy: « non »")\n'
        '    if sys.platform.startswith("ζ"): raise RuntimeError("patched copy: ζ")\n',
    )
    relative = odd / "_dynamo/eval_frame.py"
    text = relative.read_text().replace("\n", newline)
    relative.write_bytes(text.encode())
    tree = ast.parse(text)
    expected = {
        f"torch/_dynamo/eval_frame.py:{node.lineno}": " ".join(
            (ast.get_source_segment(text, node.test) or "").split()
        )
        for node in ast.walk(tree)
        if isinstance(node, ast.If) and "patched copy" in ast.dump(node.body[0])
    }
    guards = {g.source: g.condition for g in read_guards(odd).guards}
    assert len(expected) == 2
    assert {source: guards.get(source) for source in expected} == expected


def test_the_guards_read_from_the_cut_out_definition_are_the_whole_files(tmp_path: Path) -> None:
    # read_guards parses only the guard function's own lines (the whole of torch's
    # __init__.py costs ~50 ms of the doctor's 300). A "def" line inside a string after
    # the real one must not be taken for it: the whole file is parsed then.
    decoy = tmp_path / "decoy"
    (decoy / "_dynamo").mkdir(parents=True)
    for relative in ("__init__.py", "_dynamo/eval_frame.py"):
        text = (TORCH_ROOT / relative).read_text()
        if relative == "_dynamo/eval_frame.py":
            text += (
                '\nNOTES = """\ndef check_if_dynamo_supported() -> None:\n'
                '    if True:\n        raise RuntimeError("decoy: not torch\'s")\n"""\n'
            )
        (decoy / relative).write_text(text)
    installed, decoyed = read_guards(TORCH_ROOT), read_guards(decoy)
    assert installed.guards and not installed.missing and not installed.unreadable

    def described(guards: TorchGuards) -> list[tuple[str, str, str]]:
        return [(g.source, g.condition, g.message) for g in guards.guards]

    assert described(decoyed) == described(installed)


def test_inductors_cpu_prerequisites() -> None:
    def with_(cxx: str | None, python_h: bool):
        return compile_support(
            python=(3, 12, 1),
            gil_disabled=False,
            torch_version="2.14.1",
            platform="linux",
            triton_available=False,
            device_types=("cpu",),
            cxx=cxx,
            python_h=python_h,
        )

    assert with_("/usr/bin/g++", True).cpu_codegen
    no_compiler = with_(None, True)
    assert no_compiler.supported and not no_compiler.cpu_codegen
    assert "C++ compiler" in no_compiler.cpu_reason and "apt install g++" in no_compiler.cpu_reason
    no_headers = with_("/usr/bin/g++", False)
    assert not no_headers.cpu_codegen and "Python.h" in no_headers.cpu_reason


def test_ptkit_compile_runs_a_cpu_model_eagerly_without_a_cxx_compiler(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import ptkit
    from ptkit.runtime import compiling

    here = compile_support()
    monkeypatch.setattr(
        compiling,
        "compile_support",
        lambda: compiling.compile_rules.compile_support(
            torch_version=here.facts.torch_version,
            device_types=("cpu",),
            torch_root=TORCH_ROOT,
            cxx=None,
        ),
    )
    model = torch.nn.Linear(2, 2)
    with pytest.warns(RuntimeWarning, match=r"ptkit.compile: Inductor cannot compile CPU graphs"):
        assert ptkit.compile(model) is model
