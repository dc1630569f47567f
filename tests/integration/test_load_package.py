"""A package that uses ptkit: ``load_package``, ``explain``, ``ptkit explain`` and
``ptkit doctor`` see it, in subprocesses of the installed ptkit.

The package is fake (nothing is compiled): ``mypkg/__init__.py`` defines ``mypkg::scale``
with a reference, then calls ``ptkit.runtime.load_package(__name__)``; ``mypkg/_native/``
holds one manifest per outcome: a library that loads (a real ELF shared object of this
machine, registering nothing), one built for another platform (skipped), one whose file
does not match its sha256 (failed), and a Metal one (skipped: mypkg passes no Metal
binding). A ``mypkg-1.2.3.dist-info`` declares it in ``ptkit.packages``; ptkit-ops, installed
beside it, is another such package. The real, compiled downstream package is
``tests/integration/test_new_project.py``'s.
"""

from __future__ import annotations

import _hashlib
import hashlib
import json
import subprocess
import sys
from pathlib import Path

import pytest
from support import python_env, run

from ptkit.platforms import manifest_platform as machine_platform

pytestmark = pytest.mark.integration

INIT = """
import torch
import ptkit.runtime

_LIBRARY = torch.library.Library("mypkg", "DEF")
_LIBRARY.define("scale(Tensor x, float factor) -> Tensor")


def _scale_reference(x, factor):
    return x * factor


_LIBRARY.impl("scale", _scale_reference, "CompositeExplicitAutograd")

LOAD = ptkit.runtime.load_package(__name__)
"""


def _manifest(native: Path, library: Path, backend: str, **changes: object) -> None:
    data: dict[str, object] = {
        "schema_version": 1,
        "package": "mypkg",
        "namespace": "mypkg",
        "library": library.name,
        "backend": backend,
        "variant": "cpu",
        "toolkit": {},
        "targets": {"isa": ["default"]},
        "dropped_targets": [],
        "torch": {"target_version": "2.10", "built_with": "2.14.1"},
        "platform": machine_platform(),
        # "missing" is listed but defined nowhere: nothing can serve it.
        "ops": {"scale": ["float32", "bfloat16"], "missing": ["float32"]},
        "sha256": hashlib.sha256(library.read_bytes()).hexdigest(),
    }
    data.update(changes)
    (native / f"{library.stem}.manifest.json").write_text(json.dumps(data))


@pytest.fixture
def site(tmp_path: Path) -> Path:
    """A folder for PYTHONPATH with mypkg and its dist-info."""
    package = tmp_path / "mypkg"
    native = package / "_native"
    native.mkdir(parents=True)
    (package / "__init__.py").write_text(INIT)
    elf = Path(_hashlib.__file__).read_bytes()
    for name in ("libmypkg_cpu.so", "libmypkg_arm.so", "libmypkg_bad.so"):
        (native / name).write_bytes(elf)
    (native / "mypkg.metal").write_text("// Metal source\n")
    _manifest(native, native / "libmypkg_cpu.so", "cpu")
    other = "linux-aarch64" if machine_platform() != "linux-aarch64" else "linux-x86_64"
    _manifest(native, native / "libmypkg_arm.so", "cpu", platform=other)
    _manifest(native, native / "libmypkg_bad.so", "cpu", sha256="0" * 64)
    _manifest(native, native / "mypkg.metal", "metal", platform="darwin-arm64")
    dist_info = tmp_path / "mypkg-1.2.3.dist-info"
    dist_info.mkdir()
    (dist_info / "METADATA").write_text("Metadata-Version: 2.1\nName: mypkg\nVersion: 1.2.3\n")
    (dist_info / "entry_points.txt").write_text("[ptkit.packages]\nmypkg = mypkg\n")
    return tmp_path


def _env(site: Path) -> dict[str, str]:
    return python_env(PYTHONPATH=str(site))


IN_PROCESS = """
import json
import mypkg
import ptkit.runtime as rt

load = rt.load_package("mypkg")
print(json.dumps({
    "same": load is mypkg.LOAD,
    "load": load.to_json(),
    "loaded_cpu": load.loaded("cpu"),
    "loaded_metal": load.loaded("metal"),
    "packages": [p.name for p in rt.package_loads()],
    "installed": rt.installed_packages(),
    "decisions": [[d.library, d.status.value] for d in rt.load_decisions()],
    "own": [d.library for d in rt.load_decisions("mypkg")],
    "routes": [r.to_json() for r in rt.explain("mypkg")],
    "all_routes": len(rt.explain()),
    "text": rt.format_explain(),
}))
"""


def test_load_package_records_every_outcome(site: Path) -> None:
    out = json.loads(run([sys.executable, "-c", IN_PROCESS], env=_env(site), cwd=Path("/")).stdout)
    assert out["same"] is True  # idempotent: the second call returns the recorded result
    load = out["load"]
    assert (load["name"], load["version"]) == ("mypkg", "1.2.3")
    assert load["native_dir"] == str(site / "mypkg" / "_native")
    statuses = {lib["library"]: (lib["status"], lib["reason"]) for lib in load["libraries"]}
    assert statuses["libmypkg_cpu.so"][0] == "loaded"
    assert statuses["libmypkg_arm.so"] == (
        "skipped",
        f"built for linux-aarch64, this machine is {machine_platform()}"
        if machine_platform() != "linux-aarch64"
        else f"built for linux-x86_64, this machine is {machine_platform()}",
    )
    assert statuses["libmypkg_bad.so"][0] == "failed"
    assert statuses["libmypkg_bad.so"][1].startswith("libmypkg_bad.so does not match its manifest")
    assert statuses["mypkg.metal"][0] == "skipped"
    assert (
        "mypkg passes no metal_binding to ptkit.runtime.load_package"
        in (statuses["mypkg.metal"][1])
    )
    assert (out["loaded_cpu"], out["loaded_metal"]) == (True, False)
    assert load["ops"] == {"mypkg": {"scale": ["float32", "bfloat16"], "missing": ["float32"]}}
    # Only what was imported is recorded; the entry points list every installed package.
    assert out["packages"] == ["mypkg"]
    assert list(out["installed"]) == ["mypkg", "ptkit_ops"]
    assert out["decisions"] == [[lib["library"], lib["status"]] for lib in load["libraries"]]
    assert out["own"] == [lib["library"] for lib in load["libraries"]]
    # Routes: the package's namespace; its reference serves scale (the loaded library
    # registered no kernel), nothing serves the undefined op.
    cpu = {r["op"]: r for r in out["routes"] if r["device_type"] == "cpu"}
    assert cpu["scale"]["namespace"] == "mypkg"
    assert cpu["scale"]["implementation"] == "reference"
    assert cpu["scale"]["reason"] == (
        "libmypkg_cpu.so loaded but registered no kernel for scale; reference: its "
        f"CompositeExplicitAutograd kernel ({site / 'mypkg' / '__init__.py'}:5)"
    )
    assert cpu["missing"]["implementation"] == "unavailable"
    assert "mypkg::missing is not registered" in cpu["missing"]["reason"]
    assert out["all_routes"] == len(out["routes"])
    assert "mypkg::scale" in out["text"]


def test_ptkit_explain_json_lists_packages(site: Path) -> None:
    proc = run([sys.executable, "-m", "ptkit", "explain", "--json"], env=_env(site), cwd=Path("/"))
    payload = json.loads(proc.stdout)
    packages = {p["name"]: p for p in payload["packages"]}
    assert set(packages) == {"ptkit_ops", "mypkg"}
    mypkg = packages["mypkg"]
    assert mypkg["version"] == "1.2.3"
    assert {lib["status"] for lib in mypkg["libraries"]} == {"loaded", "skipped", "failed"}
    assert {r["namespace"] for r in mypkg["routes"]} == {"mypkg"}
    # ptkit-ops' ops live in the ptkit namespace.
    assert {r["namespace"] for r in packages["ptkit_ops"]["routes"]} == {"ptkit"}


def test_a_broken_package_does_not_hide_the_others(site: Path) -> None:
    (site / "mypkg" / "__init__.py").write_text("raise ImportError('mypkg is broken')\n")
    proc = run([sys.executable, "-m", "ptkit", "explain", "--json"], env=_env(site), cwd=Path("/"))
    payload = json.loads(proc.stdout)
    packages = {p["name"]: p for p in payload["packages"]}
    assert packages["ptkit_ops"]["libraries"]
    assert packages["mypkg"] == {
        "name": "mypkg",
        "error": "import mypkg failed: ImportError: mypkg is broken",
    }


# As test_doctor.py: the console script's entry, then whether torch was imported.
DOCTOR = """
import atexit, json, sys
atexit.register(lambda: sys.stderr.write("\\nTORCH_IMPORTED=" + json.dumps("torch" in sys.modules)))
import ptkit.cli
sys.argv = ["ptkit", "doctor", "--json"]
ptkit.cli.main()
"""


def test_doctor_lists_the_package_without_importing_it(site: Path) -> None:
    # Importing mypkg would import torch: the doctor must only read its files.
    proc = subprocess.run(
        [sys.executable, "-c", DOCTOR],
        env=_env(site),
        cwd=Path("/"),
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert proc.stderr.rstrip().endswith("TORCH_IMPORTED=false"), proc.stderr
    document = json.loads(proc.stdout)
    packages = {p["name"]: p for p in document["facts"]["packages"]}
    assert set(packages) == {"ptkit_ops", "mypkg"}
    mypkg = packages["mypkg"]
    assert (mypkg["version"], mypkg["location"]) == ("1.2.3", str(site / "mypkg"))
    statuses = {lib["library"]: lib["status"] for lib in mypkg["libraries"]}
    # The loader's rules 1-5: the same verdicts as load_package, without loading.
    assert statuses == {
        "libmypkg_arm.so": "skipped",
        "libmypkg_bad.so": "failed",
        "libmypkg_cpu.so": "loaded",
        "mypkg.metal": "skipped",
    }
    assert {r["op"] for r in mypkg["routes"]} == {"scale", "missing"}
    failed = [f for f in document["findings"] if f["check"] == "PTK303"]
    assert any("mypkg 1.2.3" in f["message"] and "libmypkg_bad.so" in f["message"] for f in failed)
    assert "mypkg==1.2.3" in failed[0]["fix"]
