"""`ptkit adopt` (ptkit.adopt), from the source tree: a setup.py and a kernel-builder
build.toml translated into pyproject.toml, CMakeLists.txt, the recipes and the loader
call; what could not be translated; the refusal to overwrite; bad input. Nothing is
built here (tests/integration/test_adopt.py builds, indexes and installs the result)."""

from __future__ import annotations

import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import tomllib
from support import python_env

from ptkit.adopt import AdoptError, adopt, read_project
from ptkit.adopt.kernel_builder import capability_targets
from ptkit.adopt.setup_py import cuda_targets_of
from ptkit.recipes.model import load_recipe

SRC = Path(__file__).resolve().parents[2] / "src"
FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "projects"


def _copy(name: str, tmp_path: Path) -> Path:
    target = tmp_path / name
    shutil.copytree(FIXTURES / name, target)
    return target


def _cli(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "ptkit", "adopt", *args],
        cwd=cwd,
        env=python_env(PYTHONPATH=str(SRC)),
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def _snapshot(root: Path) -> dict[str, bytes]:
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in root.rglob("*") if p.is_file()}


def _setup_project(tmp_path: Path, body: str, *, init: str | None = "") -> Path:
    root = tmp_path / "proj"
    (root / "csrc").mkdir(parents=True)
    (root / "csrc" / "ops.cpp").write_text(
        '#include <torch/library.h>\nTORCH_LIBRARY(proj, m) { m.def("f(Tensor x) -> Tensor"); }\n'
    )
    (root / "csrc" / "k.cu").write_text("#include <cuda_runtime.h>\n")
    if init is not None:
        (root / "proj").mkdir()
        (root / "proj" / "__init__.py").write_text(init)
    (root / "setup.py").write_text(textwrap.dedent(body))
    return root


# --- setup.py --------------------------------------------------------------------------


def test_the_setup_py_fixture_becomes_a_torch_mode_project(tmp_path: Path) -> None:
    root = _copy("adopt_setup_py", tmp_path)
    kernels = {p: (root / p).read_bytes() for p in ("csrc/ops.cpp", "csrc/cuda/ops_cuda.cu")}
    result = adopt(root)
    assert result.written == [
        "CMakeLists.txt",
        "pyproject.toml",
        "recipes/cpu.toml",
        "recipes/cu13.toml",
    ]
    assert {p: (root / p).read_bytes() for p in kernels} == kernels  # the kernels untouched

    project = tomllib.loads((root / "pyproject.toml").read_text())
    assert project["project"]["name"] == "adopt-setup-py"
    assert project["project"]["dynamic"] == ["version", "dependencies"]
    assert project["build-system"]["build-backend"] == "scikit_build_core.build"
    metadata = project["tool"]["scikit-build"]["metadata"]
    assert metadata["version"] == {
        "provider": "ptkit.release.version_provider",
        "base-version": "0.2.0",
    }
    assert metadata["dependencies"]["provider"] == "ptkit.release.version_provider"
    assert metadata["dependencies"]["requires"] == ["ptkit>=0.1.0,<0.2", "torch>=2.10"]
    assert project["tool"]["scikit-build"]["wheel"]["packages"] == ["adopt_setup_py"]
    assert project["project"]["entry-points"]["ptkit.packages"] == {
        "adopt_setup_py": "adopt_setup_py"
    }

    cmake = (root / "CMakeLists.txt").read_text()
    assert (
        "ptkit_add_kernel_library(adopt_setup_py_cpu BACKEND cpu NAMESPACE adopt_setup_py ABI torch"
        in cmake
    )
    assert "SOURCES csrc/ops.cpp\n" in cmake
    assert 'INCLUDE_DIRS "${CMAKE_CURRENT_SOURCE_DIR}/csrc/include"' in cmake
    assert "DEFINES ADOPT_SETUP_PY_MAX_DIM=8" in cmake
    assert "COMPILE_OPTIONS -O3\n" in cmake  # the cxx flags, less -std=c++17
    # The CUDA library only in the cu13 variant; nvcc's flags for CUDA, its -gencode a target.
    cuda = cmake[cmake.index('if(PTKIT_RECIPE_BACKEND STREQUAL "cuda")') :]
    assert "ptkit_add_kernel_library(adopt_setup_py_cuda BACKEND cuda" in cuda
    assert '"$<$<COMPILE_LANGUAGE:CUDA>:--use_fast_math>"' in cuda
    assert "gencode" not in cmake and "std=" not in cmake

    cpu = load_recipe("cpu", root / "recipes")
    cu13 = load_recipe("cu13", root / "recipes")
    for recipe in (cpu, cu13):
        assert recipe.abi == "torch"
    for variant in ("cpu", "cu13"):
        text = (root / "recipes" / f"{variant}.toml").read_text()
        assert tomllib.loads(text)["torch"]["versions"] == ["2.13", "2.14"]
    assert tomllib.loads((root / "recipes" / "cu13.toml").read_text())["targets"]["cuda"] == [
        "sm_90"
    ]

    init = (root / "adopt_setup_py" / "__init__.py").read_text()
    assert "ptkit.runtime.load_package(__name__)" in init
    assert "\n    torch.ops.load_library" not in init  # the old loading loop commented out
    compile(init, "__init__.py", "exec")
    assert init.index("load_package") < init.index("def scaled_add")

    untranslated = {u.what: u.fix for u in result.untranslated}
    assert set(untranslated) == {
        "adopt_setup_py._C: -std=c++17",
        "adopt_setup_py._C: extra_link_args=['-Wl,--as-needed']",
        "adopt_setup_py._C: py_limited_api=True",
    }
    assert (
        "target_link_options"
        in untranslated["adopt_setup_py._C: extra_link_args=['-Wl,--as-needed']"]
    )


def test_the_command_prints_what_it_wrote_and_what_it_could_not_translate(tmp_path: Path) -> None:
    root = _copy("adopt_setup_py", tmp_path)
    proc = _cli(cwd=root)  # PATH defaults to here
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout
    assert "ABI torch (the classic C++ API: one wheel per torch minor)" in out
    assert "wrote 4 files into" in out and "  recipes/cu13.toml" in out
    assert (
        "adopt_setup_py/__init__.py: the extension's import replaced by ptkit's loader call" in out
    )
    assert "NOT translated (3): fix these by hand:" in out
    assert "  - adopt_setup_py._C: py_limited_api=True\n    fix: nothing to do" in out


def test_a_second_run_refuses_to_overwrite_and_writes_nothing(tmp_path: Path) -> None:
    root = _copy("adopt_setup_py", tmp_path)
    assert _cli(str(root), cwd=tmp_path).returncode == 0
    (root / "CMakeLists.txt").write_text("# mine\n")
    before = _snapshot(root)
    proc = _cli(str(root), cwd=tmp_path)
    assert proc.returncode == 1
    assert proc.stderr.startswith(
        "ptkit adopt: expected a project without CMakeLists.txt, pyproject.toml, "
        "recipes/cpu.toml, recipes/cu13.toml, found them; nothing was written. Run ptkit adopt --force"
    ), proc.stderr
    assert "Traceback" not in proc.stderr
    assert _snapshot(root) == before
    forced = _cli(str(root), "--force", cwd=tmp_path)
    assert forced.returncode == 0, forced.stderr
    assert "ptkit_add_kernel_library" in (root / "CMakeLists.txt").read_text()


def test_an_existing_pyproject_is_refused_without_force(tmp_path: Path) -> None:
    root = _copy("adopt_setup_py", tmp_path)
    (root / "pyproject.toml").write_text('[build-system]\nrequires = ["setuptools"]\n')
    before = _snapshot(root)
    with pytest.raises(AdoptError, match=r"without pyproject.toml, found it; nothing was written"):
        adopt(root)
    assert _snapshot(root) == before


def test_a_list_of_compile_args_and_gencode_flags_become_options_and_targets(
    tmp_path: Path,
) -> None:
    root = _setup_project(
        tmp_path,
        """
        from setuptools import setup
        from torch.utils.cpp_extension import BuildExtension, CUDAExtension
        import torch
        assert torch.cuda.is_available()
        setup(name="proj", version="1.2.3", install_requires=["numpy>=1", "torch"],
              ext_modules=[CUDAExtension("proj._C", ["csrc/ops.cpp", "csrc/k.cu"],
                  libraries=["cublas"], library_dirs=["/opt/lib"], undef_macros=["NDEBUG"],
                  extra_compile_args=["-DFAST", "-Icsrc/extra", "-arch=sm_80",
                                      "-gencode=arch=compute_90,code=[sm_90,compute_90]"])],
              cmdclass={"build_ext": BuildExtension.with_options(use_ninja=True)})
        """,
    )
    adoption = read_project(root)
    (library,) = adoption.libraries
    assert (library.backend, library.namespace) == ("cuda", "proj")
    assert library.sources == ["csrc/ops.cpp", "csrc/k.cu"]
    assert library.defines == ["FAST"]
    assert library.include_dirs == ["csrc/extra"]
    assert library.compile_options == ["-UNDEBUG"]
    assert library.link_libraries == ["cublas"]
    assert adoption.cuda_targets == ["sm_80", "sm_90", "compute_80", "compute_90"]
    assert adoption.requires == ["numpy>=1"]
    assert [u.what for u in adoption.untranslated] == ["proj._C: library_dirs=['/opt/lib']"]
    result = adopt(root)
    # Only a CUDA extension: no cpu variant, and the library built by cu13 alone.
    assert result.written == ["CMakeLists.txt", "pyproject.toml", "recipes/cu13.toml"]
    assert '"numpy>=1"' in (root / "pyproject.toml").read_text()
    # Its sources use torch/library.h: the classic API.
    assert load_recipe("cu13", root / "recipes").abi == "torch"


def test_a_stable_abi_extension_stays_stable_and_a_missing_init_is_written(tmp_path: Path) -> None:
    root = _setup_project(
        tmp_path,
        """
        from setuptools import setup
        from torch.utils.cpp_extension import CppExtension
        setup(name="proj", version="0.1", packages=["proj"],
              ext_modules=[CppExtension("proj._C", ["csrc/ops.cpp"])])
        """,
        init=None,
    )
    (root / "csrc" / "ops.cpp").write_text(
        "#include <torch/csrc/stable/library.h>\nSTABLE_TORCH_LIBRARY(proj, m) {}\n"
    )
    result = adopt(root)
    assert "proj/__init__.py" in result.written
    assert "ptkit.runtime.load_package(__name__)" in (root / "proj" / "__init__.py").read_text()
    recipe = tomllib.loads((root / "recipes" / "cpu.toml").read_text())
    assert "abi" not in recipe["variant"] and "torch" not in recipe
    assert "ABI stable" in (root / "CMakeLists.txt").read_text()


def test_pybind11_and_torch_extension_h_are_listed_with_their_fix(tmp_path: Path) -> None:
    root = _setup_project(
        tmp_path,
        """
        from setuptools import setup
        from torch.utils.cpp_extension import CppExtension
        setup(name="proj", version="0.1", ext_modules=[CppExtension("proj._C", ["csrc/ops.cpp"])])
        """,
        init="from . import _C\n\ndef f(x):\n    return _C.f(x)\n",
    )
    (root / "csrc" / "ops.cpp").write_text(
        "#include <torch/extension.h>\nPYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {}\n"
    )
    result = adopt(root)
    whats = [u.what for u in result.untranslated]
    assert any("PYBIND11_MODULE" in w for w in whats), whats
    assert any("<torch/extension.h> includes Python.h" in w for w in whats), whats
    assert any("no TORCH_LIBRARY block" in w for w in whats), whats
    assert "proj/__init__.py uses _C, the extension module" in whats
    init = (root / "proj" / "__init__.py").read_text()
    assert init.startswith("# ptkit adopt (replaced): from . import _C\nimport ptkit.runtime")


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ("raise RuntimeError('no compiler')\n", "it raised RuntimeError: no compiler"),
        (
            "x = 1\n",
            "expected a setup.py that calls setuptools.setup(...), found one that never called it",
        ),
        (
            "from setuptools import setup\nsetup(name='proj', version='1')\n",
            "expected setup(ext_modules=[...]) with a CppExtension or CUDAExtension",
        ),
        (
            "import torch\nfrom setuptools import setup\nprint(torch.randn)\n",
            "setup.py asked for torch.randn, which ptkit adopt's stand-in for torch does not have",
        ),
        (
            "from setuptools import setup\nfrom torch.utils.cpp_extension import CppExtension\n"
            "setup(name='proj', ext_modules=[CppExtension('proj._C', ['csrc/nope.cpp'])])\n",
            "found csrc/nope.cpp, which does not exist; fix the source list in setup.py",
        ),
    ],
)
def test_a_bad_setup_py_is_one_line_naming_what_was_expected(
    tmp_path: Path, body: str, message: str
) -> None:
    root = _setup_project(tmp_path, body)
    before = _snapshot(root)
    proc = _cli(str(root), cwd=tmp_path)
    assert proc.returncode == 1
    assert proc.stderr.startswith("ptkit adopt: expected "), proc.stderr
    assert message in proc.stderr
    assert "Traceback" not in proc.stderr and len(proc.stderr.strip().splitlines()) == 1
    assert _snapshot(root) == before


def test_a_folder_with_neither_input_says_what_it_expected(tmp_path: Path) -> None:
    (tmp_path / "README.md").write_text("hi\n")
    proc = _cli(str(tmp_path), cwd=tmp_path)
    assert proc.returncode == 1
    assert proc.stderr.startswith(
        "ptkit adopt: expected a setup.py (torch.utils.cpp_extension's CppExtension/CUDAExtension) "
        f"or a kernel-builder build.toml in {tmp_path}, found README.md; "
    ), proc.stderr


@pytest.mark.parametrize(
    ("flags", "targets", "rest"),
    [
        (["-gencode", "arch=compute_90,code=sm_90", "-O3"], ["sm_90"], ["-O3"]),
        (["--generate-code=arch=compute_80,code=[sm_80,compute_80]"], ["sm_80", "compute_80"], []),
        (["-arch=sm_90"], ["sm_90", "compute_90"], []),
        (["-arch", "compute_90", "-lineinfo"], ["compute_90"], ["-lineinfo"]),
    ],
)
def test_nvcc_architecture_flags_become_targets(
    flags: list[str], targets: list[str], rest: list[str]
) -> None:
    assert cuda_targets_of(flags) == (targets, rest)


# --- kernel-builder ----------------------------------------------------------------------


def test_the_kernel_builder_fixture_becomes_one_library_per_backend(tmp_path: Path) -> None:
    root = _copy("adopt_kernel_builder", tmp_path)
    kernels = _snapshot(root / "activation") | _snapshot(root / "activation_cpu")
    result = adopt(root)
    assert result.written == [
        "CMakeLists.txt",
        "pyproject.toml",
        "recipes/cpu.toml",
        "recipes/cu13.toml",
        "torch-ext/adopt_kernel_builder/_ops.py",
    ]
    assert (_snapshot(root / "activation") | _snapshot(root / "activation_cpu")) == kernels
    assert result.untranslated == []
    cmake = (root / "CMakeLists.txt").read_text()
    # The binding defines the schemas: a variant builds the library of its backend only.
    assert cmake.count("ptkit_add_kernel_library(") == 2 and "\nelse()\n" in cmake
    assert (
        "SOURCES torch-ext/torch_binding.cpp torch-ext/torch_binding.h activation/activation.cu "
        "activation/vec.cuh" in cmake
    )
    assert "DEFINES TORCH_EXTENSION_NAME=adopt_kernel_builder CUDA_KERNEL" in cmake
    assert "DEFINES TORCH_EXTENSION_NAME=adopt_kernel_builder CPU_KERNEL" in cmake
    assert 'INCLUDE_DIRS "${CMAKE_CURRENT_SOURCE_DIR}"' in cmake
    project = tomllib.loads((root / "pyproject.toml").read_text())
    assert project["tool"]["scikit-build"]["wheel"]["packages"] == [
        "torch-ext/adopt_kernel_builder"
    ]
    assert tomllib.loads((root / "recipes" / "cu13.toml").read_text())["targets"]["cuda"] == [
        "sm_90",
        "compute_90",
    ]
    assert load_recipe("cpu", root / "recipes").abi == "torch"  # torch/library.h, ATen
    ops = (root / "torch-ext" / "adopt_kernel_builder" / "_ops.py").read_text()
    assert "ptkit.runtime.load_package(__package__)" in ops
    assert "ops = torch.ops.adopt_kernel_builder" in ops
    (edit,) = result.edited
    assert edit.path == "torch-ext/registration.h"
    header = (root / "torch-ext" / "registration.h").read_text()
    assert "PyInit" not in header.replace("PyInit_<NAME>", "")
    assert "\n#include <Python.h>" not in header
    assert "#define REGISTER_EXTENSION(NAME)\n" in header
    assert "#define TORCH_LIBRARY_EXPAND(NAME, MODULE) TORCH_LIBRARY(NAME, MODULE)" in header


def _kernel_project(tmp_path: Path, build: str) -> Path:
    root = tmp_path / "kb"
    (root / "torch-ext" / "kb").mkdir(parents=True)
    (root / "torch-ext" / "kb" / "__init__.py").write_text("from ._ops import ops\n")
    (root / "torch-ext" / "torch_binding.cpp").write_text("#include <torch/library.h>\n")
    (root / "k.cu").write_text("\n")
    (root / "build.toml").write_text(textwrap.dedent(build))
    return root


def test_unknown_build_toml_keys_and_backends_are_listed(tmp_path: Path) -> None:
    root = _kernel_project(
        tmp_path,
        """
        [general]
        name = "kb"
        hub = "x"
        [torch]
        src = ["torch-ext/torch_binding.cpp"]
        pyext = ["py"]
        [kernel.k]
        backend = "cuda"
        src = ["k.cu"]
        depends = ["torch", "cutlass_3_8"]
        cuda-capabilities = ["8.0", "9.0a"]
        cuda-flags = ["-lineinfo"]
        [kernel.m]
        backend = "metal"
        src = ["k.cu"]
        [test]
        python-git-packages = []
        """,
    )
    adoption = read_project(root)
    assert [lib.backend for lib in adoption.libraries] == ["cuda"]
    assert adoption.cuda_targets == ["sm_80", "sm_90a"]  # no PTX of an arch-specific target
    assert [u.what for u in adoption.untranslated] == [
        "build.toml: [general] hub",
        "build.toml: [test]",
        "build.toml: [torch] pyext",
        "build.toml: [kernel.k] depends = 'cutlass_3_8'",
        "build.toml: [kernel.k] cuda-flags",
        "build.toml: [kernel.m] backend = 'metal'",
    ]


@pytest.mark.parametrize(
    ("build", "message"),
    [
        ("[general]\n", 'expected build.toml with [general] name = "<kernel name>", found no name'),
        (
            "[general]\nname = 'kb'\n",
            "expected build.toml with at least one [kernel.<name>] section",
        ),
        ("[general]\nname = 'other'\n", "expected the package torch-ext/other/__init__.py"),
        ("[general\n", "expected build.toml in TOML, found a syntax error"),
        (
            "[general]\nname = 'kb'\n[kernel.k]\nsrc = ['gone.cu']\n",
            "found gone.cu, which does not exist",
        ),
    ],
)
def test_a_bad_build_toml_is_one_line_naming_what_was_expected(
    tmp_path: Path, build: str, message: str
) -> None:
    root = _kernel_project(tmp_path, build)
    before = _snapshot(root)
    proc = _cli(str(root), cwd=tmp_path)
    assert proc.returncode == 1
    assert proc.stderr.startswith("ptkit adopt: expected "), proc.stderr
    assert message in proc.stderr
    assert _snapshot(root) == before


@pytest.mark.parametrize(
    ("capabilities", "targets"),
    [
        (["7.5", "9.0"], ["sm_75", "sm_90", "compute_90"]),
        (["8.0+PTX", "9.0"], ["sm_80", "sm_90", "compute_80"]),
        (["10.0"], ["sm_100", "compute_100"]),
    ],
)
def test_cuda_capabilities_become_targets(capabilities: list[str], targets: list[str]) -> None:
    assert capability_targets(capabilities) == targets


def test_a_failed_write_leaves_the_project_as_it_was(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from ptkit.adopt import writer

    root = _copy("adopt_kernel_builder", tmp_path)
    before = _snapshot(root)
    real = writer.os.replace
    calls = []

    def failing(src: str, dst: str) -> None:
        calls.append(dst)
        if len(calls) == 4:
            raise OSError(28, "No space left on device", dst)
        real(src, dst)

    monkeypatch.setattr(writer.os, "replace", failing)
    with pytest.raises(OSError, match="No space left"):
        adopt(root)
    assert _snapshot(root) == before
