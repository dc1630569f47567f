"""Real installs from ptkit's index: the built wheels (the toolkit and ptkit-ops' cpu and
cu13 variants) indexed by `ptkit index build`, served by `ptkit index serve` on
127.0.0.1, installed by real pip and real uv into fresh environments that already hold
torch (nothing downloads torch) but no ptkit, then imported and run. `ptkit-ops` comes
from its variant's page and the toolkit `ptkit` it depends on from the same page. A wheel
changed after indexing is refused; --require-hashes installs work."""

from __future__ import annotations

import json
import os
import re
import select
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
from support import REPO, env_holding_packages_of, python_env, run

pytestmark = pytest.mark.integration

VENV_BIN = Path(sys.executable).parent
UV = shutil.which("uv", path=str(VENV_BIN)) or shutil.which("uv")

# In the installed environment: the versions and files, the libraries' decisions, and
# one op against its reference.
CHECK = """
import json, torch, ptkit, ptkit_ops
from ptkit_ops import rms_norm_reference
x, w = torch.randn(4, 64), torch.randn(64)
native = torch.ops.ptkit.rms_norm(x, w, 1e-6)
decisions = {d.library: d.status.value for d in ptkit.runtime.load_decisions("ptkit_ops")}
print(json.dumps({"version": ptkit_ops.__version__, "toolkit": ptkit.__version__,
                  "files": [ptkit.__file__, ptkit_ops.__file__], "decisions": decisions,
                  "max_error": (native - rms_norm_reference(x, w, 1e-6)).abs().max().item()}))
"""


@pytest.fixture(scope="module")
def toolkit_wheel() -> Path:
    """The toolkit wheel: $PTKIT_TEST_TOOLKIT_WHEEL (set by `make test`) or dist/toolkit/'s."""
    given = os.environ.get("PTKIT_TEST_TOOLKIT_WHEEL")
    wheels = [Path(given)] if given else sorted((REPO / "dist" / "toolkit").glob("ptkit-*.whl"))
    if not wheels or not wheels[-1].is_file():
        pytest.fail("no toolkit wheel to test: run `make toolkit` (make test does)")
    return wheels[-1].resolve()


@pytest.fixture(scope="module")
def toolkit_version(toolkit_wheel: Path) -> str:
    return toolkit_wheel.name.split("-")[1]


@pytest.fixture(scope="module")
def index_root(tmp_path_factory, toolkit_wheel, ptkit_wheel, cu13_wheel) -> Path:
    out = tmp_path_factory.mktemp("index") / "site"
    proc = run(
        [
            str(VENV_BIN / "ptkit"),
            "index",
            "build",
            str(toolkit_wheel),
            str(ptkit_wheel),
            str(cu13_wheel),
            "--out",
            str(out),
            "--json",
        ],
        env=python_env(),
    )
    files = {r["index_path"]: set(r["files"]) for r in json.loads(proc.stdout)}
    # The toolkit in every variant's index (ptkit's recipes ride in the toolkit wheel).
    assert set(files) == {"cpu", "cu13", "rocm7.14", "xpu", "metal"}
    assert files["cpu"] == {toolkit_wheel.name, ptkit_wheel.name}
    assert files["cu13"] == {toolkit_wheel.name, cu13_wheel.name}
    assert files["metal"] == {toolkit_wheel.name}
    return out


def serve(root: Path) -> tuple[subprocess.Popen[str], str]:
    """`ptkit index serve` on a free loopback port; returns the process and its URL."""
    proc = subprocess.Popen(
        [str(VENV_BIN / "ptkit"), "index", "serve", str(root), "--port", "0"],
        env=python_env(),
        stderr=subprocess.PIPE,
        stdout=subprocess.DEVNULL,
        text=True,
    )
    assert proc.stderr is not None
    ready, _, _ = select.select([proc.stderr], [], [], 30)
    assert ready, "ptkit index serve printed nothing within 30 s"
    line = proc.stderr.readline()
    match = re.search(r"at (http://127\.0\.0\.1:\d+)/", line)
    assert match, line
    return proc, match.group(1)


@pytest.fixture(scope="module")
def index_url(index_root):
    proc, url = serve(index_root)
    yield url
    proc.terminate()
    proc.wait(timeout=10)


@pytest.fixture
def clean_env(tmp_path) -> Path:
    """A new venv holding the test environment's torch, click and packaging; no ptkit, no
    ptkit-ops."""
    python = env_holding_packages_of(tmp_path / "env", Path(sys.executable))
    for module in ("ptkit", "ptkit_ops"):
        probe = subprocess.run(
            [str(python), "-c", f"import {module}"], capture_output=True, text=True, check=False
        )
        assert probe.returncode != 0, f"the new environment must not see {module} yet"
    return python


def installed(python: Path) -> dict[str, object]:
    return json.loads(run([str(python), "-c", CHECK], env=python_env(), cwd=Path("/")).stdout)


def pip(python: Path, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    cmd = [
        str(python),
        "-m",
        "pip",
        "install",
        "--no-cache-dir",
        "--disable-pip-version-check",
        *args,
    ]
    if check:
        return run(cmd, env=python_env(PIP_CONFIG_FILE="/dev/null"))
    return subprocess.run(
        cmd,
        env=python_env(PIP_CONFIG_FILE="/dev/null"),
        capture_output=True,
        text=True,
        check=False,
    )


def uv(python: Path, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    assert UV, "uv is not installed in the test environment (requirements/dev.txt pins it)"
    cmd = [UV, "pip", "install", "--python", str(python), "--no-cache", *args]
    env = python_env(UV_NO_CONFIG="1")
    if check:
        return run(cmd, env=env)
    return subprocess.run(cmd, env=env, capture_output=True, text=True, check=False)


def _from(python: Path, result: dict[str, object]) -> None:
    """Both packages were installed into ``python``'s environment, not seen elsewhere."""
    files = result["files"]
    assert isinstance(files, list)
    assert all(str(python.parent.parent) in str(f) for f in files), files


def test_pip_installs_the_cpu_variant_and_the_toolkit_from_its_index(
    index_url, clean_env, ptkit_wheel, toolkit_version
):
    proc = pip(clean_env, "ptkit-ops", "--index-url", f"{index_url}/cpu/simple")
    version = ptkit_wheel.name.split("-")[1]
    installed_line = next(
        line for line in proc.stdout.splitlines() if line.startswith("Successfully installed")
    )
    assert set(installed_line.split()[2:]) == {f"ptkit-{toolkit_version}", f"ptkit-ops-{version}"}
    result = installed(clean_env)
    assert (result["version"], result["toolkit"]) == (version, toolkit_version)
    _from(clean_env, result)
    assert result["decisions"]["libptkit_cpu.so"] == "loaded"
    assert result["max_error"] < 1e-5


def test_uv_installs_the_cpu_variant_and_the_toolkit_from_its_index(
    index_url, clean_env, ptkit_wheel, toolkit_version
):
    proc = uv(clean_env, "ptkit-ops", "--index-url", f"{index_url}/cpu/simple")
    version = ptkit_wheel.name.split("-")[1]
    assert f"+ ptkit-ops=={version}" in proc.stderr
    assert f"+ ptkit=={toolkit_version}" in proc.stderr
    result = installed(clean_env)
    assert result["version"] == version
    _from(clean_env, result)
    assert result["decisions"]["libptkit_cpu.so"] == "loaded"
    assert result["max_error"] < 1e-5


def test_each_variant_index_gives_its_own_wheel(index_url, clean_env, cu13_wheel, toolkit_version):
    """uv from the cu13 index gets +cu13 (one index per variant) and the same toolkit; its
    CUDA library loads into this CUDA build of torch (no device visible here: CPU tensors
    take the CPU one)."""
    uv(clean_env, "ptkit-ops", "--index-url", f"{index_url}/cu13/simple")
    result = installed(clean_env)
    assert result["version"] == cu13_wheel.name.split("-")[1]
    assert result["version"].endswith("+cu13")
    assert result["toolkit"] == toolkit_version
    assert result["decisions"]["libptkit_cpu.so"] == "loaded"
    assert result["decisions"]["libptkit_cuda.so"] == "loaded"


def test_require_hashes_installs_work(
    index_url, index_root, clean_env, ptkit_wheel, toolkit_wheel, toolkit_version, tmp_path
):
    def sha256(project: str) -> str:
        page = json.loads((index_root / "cpu" / "simple" / project / "index.json").read_text())
        (entry,) = page["files"]
        return str(entry["hashes"]["sha256"])

    version = ptkit_wheel.name.split("-")[1]
    requirements = tmp_path / "requirements.txt"
    requirements.write_text(
        f"ptkit-ops=={version} --hash=sha256:{sha256('ptkit-ops')}\n"
        f"ptkit=={toolkit_version} --hash=sha256:{sha256('ptkit')}\n"
    )
    pip(
        clean_env,
        "--require-hashes",
        "--no-deps",
        "-r",
        str(requirements),
        "--index-url",
        f"{index_url}/cpu/simple",
    )
    assert installed(clean_env)["version"] == version
    # a wrong pinned hash is refused
    requirements.write_text(f"ptkit-ops=={version} --hash=sha256:{'0' * 64}\n")
    proc = pip(
        clean_env,
        "--force-reinstall",
        "--require-hashes",
        "--no-deps",
        "-r",
        str(requirements),
        "--index-url",
        f"{index_url}/cpu/simple",
        check=False,
    )
    assert proc.returncode != 0
    assert "DO NOT MATCH THE HASHES" in proc.stderr


def test_a_wheel_changed_after_indexing_is_refused(index_root, clean_env, tmp_path):
    tampered_root = tmp_path / "tampered"
    shutil.copytree(index_root, tampered_root, symlinks=True)
    files = tampered_root / "cpu" / "files"
    (wheel,) = files.glob("ptkit_ops-*.whl")
    # A still-valid wheel with one more module, after the index recorded its sha256 (a
    # new file: the original may be a hard link shared with other index generations).
    data = wheel.read_bytes()
    wheel.unlink()
    wheel.write_bytes(data)
    with zipfile.ZipFile(wheel, "a") as archive:
        archive.writestr("ptkit_ops/_injected.py", "print('not what was published')\n")
    proc, url = serve(tampered_root)
    try:
        refused = pip(clean_env, "ptkit-ops", "--index-url", f"{url}/cpu/simple", check=False)
        assert refused.returncode != 0
        assert "DO NOT MATCH THE HASHES" in refused.stderr, refused.stderr
        refused_uv = uv(clean_env, "ptkit-ops", "--index-url", f"{url}/cpu/simple", check=False)
        assert refused_uv.returncode != 0
        assert "Hash mismatch" in refused_uv.stderr, refused_uv.stderr
    finally:
        proc.terminate()
        proc.wait(timeout=10)
    probe = subprocess.run(
        [str(clean_env), "-c", "import ptkit_ops"], capture_output=True, text=True, check=False
    )
    assert probe.returncode != 0, "nothing was installed"


def test_variant_metadata_beside_the_plain_wheels(tmp_path, cu13_wheel, toolkit_wheel, clean_env):
    """--variant-metadata adds a PEP 825 variant wheel and {name}-{version}-variants.json,
    which variantlib reads back; plain pip still installs the plain wheel from that page."""
    out = tmp_path / "site"
    build = [
        str(VENV_BIN / "ptkit"),
        "index",
        "build",
        str(toolkit_wheel),
        str(cu13_wheel),
        "--out",
        str(out),
        "--variant-metadata",
        "--json",
    ]
    first = next(
        r for r in json.loads(run(build, env=python_env()).stdout) if r["index_path"] == "cu13"
    )
    version = cu13_wheel.name.split("-")[1]
    variant_wheel = cu13_wheel.name.removesuffix(".whl") + "-cu13.whl"
    # The toolkit beside them, as it is: no variant metadata for a universal wheel.
    assert set(first["files"]) == {
        cu13_wheel.name,
        variant_wheel,
        f"ptkit_ops-{version}-variants.json",
        toolkit_wheel.name,
    }
    again = next(
        r for r in json.loads(run(build, env=python_env()).stdout) if r["index_path"] == "cu13"
    )
    assert (again["changed"], again["generation"]) == (False, first["generation"])

    files = out / "cu13" / "files"
    analysis = run(
        [str(VENV_BIN / "variantlib"), "analyze-wheel", "-i", str(files / variant_wheel)],
        env=python_env(),
    )
    assert "Label: `cu13`" in analysis.stderr + analysis.stdout
    assert "nvidia :: sm_arch :: 90_real" in analysis.stdout
    index_json = json.loads((files / f"ptkit_ops-{version}-variants.json").read_text())
    assert list(index_json["variants"]) == ["cu13"]

    proc, url = serve(out)
    try:
        pip(clean_env, "ptkit-ops", "--index-url", f"{url}/cu13/simple")
    finally:
        proc.terminate()
        proc.wait(timeout=10)
    assert installed(clean_env)["version"] == version
