"""Real installs from ptkit's index: the built wheels indexed by `ptkit index build`,
served by `ptkit index serve` on 127.0.0.1, installed by real pip and real uv into
fresh environments that already hold torch (nothing downloads torch), then imported
and run. A wheel changed after indexing is refused; --require-hashes installs work."""

from __future__ import annotations

import json
import re
import select
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
from support import env_holding_packages_of, python_env, run

pytestmark = pytest.mark.integration

VENV_BIN = Path(sys.executable).parent
UV = shutil.which("uv", path=str(VENV_BIN)) or shutil.which("uv")

# In the installed environment: the version, the CPU library's decision, and one op
# against its reference.
CHECK = """
import json, torch, ptkit
from ptkit_ops import rms_norm_reference
x, w = torch.randn(4, 64), torch.randn(64)
native = torch.ops.ptkit.rms_norm(x, w, 1e-6)
decisions = {d.library: d.status.value for d in ptkit.runtime.load_decisions()}
print(json.dumps({"version": ptkit.__version__, "file": ptkit.__file__, "decisions": decisions,
                  "max_error": (native - rms_norm_reference(x, w, 1e-6)).abs().max().item()}))
"""


@pytest.fixture(scope="module")
def index_root(tmp_path_factory, ptkit_wheel, cu13_wheel) -> Path:
    out = tmp_path_factory.mktemp("index") / "site"
    proc = run(
        [
            str(VENV_BIN / "ptkit"),
            "index",
            "build",
            str(ptkit_wheel),
            str(cu13_wheel),
            "--out",
            str(out),
            "--json",
        ],
        env=python_env(),
    )
    assert {r["index_path"] for r in json.loads(proc.stdout)} == {"cpu", "cu13"}
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
    """A new venv holding the test environment's torch, click and packaging, not ptkit."""
    python = env_holding_packages_of(tmp_path / "env", Path(sys.executable))
    probe = subprocess.run(
        [str(python), "-c", "import ptkit"], capture_output=True, text=True, check=False
    )
    assert probe.returncode != 0, "the new environment must not see ptkit before the install"
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


def test_pip_installs_the_cpu_variant_from_its_index(index_url, clean_env, ptkit_wheel):
    proc = pip(clean_env, "ptkit", "--index-url", f"{index_url}/cpu/simple")
    version = ptkit_wheel.name.split("-")[1]
    assert f"Successfully installed ptkit-{version}" in proc.stdout
    result = installed(clean_env)
    assert result["version"] == version
    assert str(clean_env.parent.parent) in str(result["file"])
    assert result["decisions"]["libptkit_cpu.so"] == "loaded"
    assert result["max_error"] < 1e-5


def test_uv_installs_the_cpu_variant_from_its_index(index_url, clean_env, ptkit_wheel):
    proc = uv(clean_env, "ptkit", "--index-url", f"{index_url}/cpu/simple")
    version = ptkit_wheel.name.split("-")[1]
    assert f"+ ptkit=={version}" in proc.stderr
    result = installed(clean_env)
    assert result["version"] == version
    assert result["decisions"]["libptkit_cpu.so"] == "loaded"
    assert result["max_error"] < 1e-5


def test_each_variant_index_gives_its_own_wheel(index_url, clean_env, cu13_wheel):
    """uv from the cu13 index gets +cu13 (one index per variant); its CUDA library loads
    into this CUDA build of torch (no device visible here: CPU tensors take the CPU one)."""
    uv(clean_env, "ptkit", "--index-url", f"{index_url}/cu13/simple")
    result = installed(clean_env)
    assert result["version"] == cu13_wheel.name.split("-")[1]
    assert result["version"].endswith("+cu13")
    assert result["decisions"]["libptkit_cpu.so"] == "loaded"
    assert result["decisions"]["libptkit_cuda.so"] == "loaded"


def test_require_hashes_installs_work(index_url, index_root, clean_env, ptkit_wheel, tmp_path):
    page = json.loads((index_root / "cpu" / "simple" / "ptkit" / "index.json").read_text())
    (entry,) = page["files"]
    version = ptkit_wheel.name.split("-")[1]
    requirements = tmp_path / "requirements.txt"
    requirements.write_text(f"ptkit=={version} --hash=sha256:{entry['hashes']['sha256']}\n")
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
    requirements.write_text(f"ptkit=={version} --hash=sha256:{'0' * 64}\n")
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
    (wheel,) = files.glob("*.whl")
    # A still-valid wheel with one more module, after the index recorded its sha256 (a
    # new file: the original may be a hard link shared with other index generations).
    data = wheel.read_bytes()
    wheel.unlink()
    wheel.write_bytes(data)
    with zipfile.ZipFile(wheel, "a") as archive:
        archive.writestr("ptkit/_injected.py", "print('not what was published')\n")
    proc, url = serve(tampered_root)
    try:
        refused = pip(clean_env, "ptkit", "--index-url", f"{url}/cpu/simple", check=False)
        assert refused.returncode != 0
        assert "DO NOT MATCH THE HASHES" in refused.stderr, refused.stderr
        refused_uv = uv(clean_env, "ptkit", "--index-url", f"{url}/cpu/simple", check=False)
        assert refused_uv.returncode != 0
        assert "Hash mismatch" in refused_uv.stderr, refused_uv.stderr
    finally:
        proc.terminate()
        proc.wait(timeout=10)
    probe = subprocess.run(
        [str(clean_env), "-c", "import ptkit"], capture_output=True, text=True, check=False
    )
    assert probe.returncode != 0, "nothing was installed"


def test_variant_metadata_beside_the_plain_wheels(tmp_path, cu13_wheel, clean_env):
    """--variant-metadata adds a PEP 825 variant wheel and {name}-{version}-variants.json,
    which variantlib reads back; plain pip still installs the plain wheel from that page."""
    out = tmp_path / "site"
    build = [
        str(VENV_BIN / "ptkit"),
        "index",
        "build",
        str(cu13_wheel),
        "--out",
        str(out),
        "--variant-metadata",
        "--json",
    ]
    (first,) = json.loads(run(build, env=python_env()).stdout)
    version = cu13_wheel.name.split("-")[1]
    variant_wheel = cu13_wheel.name.removesuffix(".whl") + "-cu13.whl"
    assert set(first["files"]) == {cu13_wheel.name, variant_wheel, f"ptkit-{version}-variants.json"}
    (again,) = json.loads(run(build, env=python_env()).stdout)
    assert (again["changed"], again["generation"]) == (False, first["generation"])

    files = out / "cu13" / "files"
    analysis = run(
        [str(VENV_BIN / "variantlib"), "analyze-wheel", "-i", str(files / variant_wheel)],
        env=python_env(),
    )
    assert "Label: `cu13`" in analysis.stderr + analysis.stdout
    assert "nvidia :: sm_arch :: 90_real" in analysis.stdout
    index_json = json.loads((files / f"ptkit-{version}-variants.json").read_text())
    assert list(index_json["variants"]) == ["cu13"]

    proc, url = serve(out)
    try:
        pip(clean_env, "ptkit", "--index-url", f"{url}/cu13/simple")
    finally:
        proc.terminate()
        proc.wait(timeout=10)
    assert installed(clean_env)["version"] == version
