"""PEP 825 variant metadata (``ptkit index build --variant-metadata``), checked with variantlib.

The wheels are small ones written here (``support.make_wheel``: a cu13 ptkit-ops wheel's
name, dist-info and RECORD) and read back with variantlib itself: its CLI
(``analyze-wheel``, ``generate-index-json``) in a subprocess and its readers. A built
cu13 wheel's variant metadata is checked in tests/integration/test_index_install.py.
"""

from __future__ import annotations

import base64
import dataclasses
import hashlib
import json
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
from support import REPO, make_wheel

from ptkit.index import variant_metadata as vm
from ptkit.index.variant_metadata import (
    VariantMetadataError,
    variant_label,
    variant_properties,
    write_variant_files,
)
from ptkit.recipes.model import Recipe, load_recipe

variantlib = pytest.importorskip(
    "variantlib", reason="variantlib is not installed: pip install variantlib==0.2.2"
)
from variantlib.variant_dist_info import VariantDistInfo  # noqa: E402
from variantlib.variants_json import VariantsJson  # noqa: E402

RECIPES = REPO / "recipes"
CU13_VERSION = "0.1.0+cu13"
CU13_WHEEL = f"ptkit_ops-{CU13_VERSION}-py3-none-manylinux_2_28_x86_64.whl"
CU13_DIST_INFO = f"ptkit_ops-{CU13_VERSION}.dist-info"
CU13_VARIANT_WHEEL = CU13_WHEEL.removesuffix(".whl") + "-cu13.whl"
CU13_VARIANTS_JSON = f"ptkit_ops-{CU13_VERSION}-variants.json"
CU13_PROPERTIES = [
    "nvidia :: cuda_version_lower_bound :: 13",
    "nvidia :: sm_arch :: 100_real",
    "nvidia :: sm_arch :: 103_real",
    "nvidia :: sm_arch :: 107_real",
    "nvidia :: sm_arch :: 110_real",
    "nvidia :: sm_arch :: 120_real",
    "nvidia :: sm_arch :: 120_virtual",
    "nvidia :: sm_arch :: 90_real",
]


def _recipe(variant: str) -> Recipe:
    return load_recipe(variant, RECIPES)


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _variantlib_cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", "from variantlib.commands.main import main; main()", *args],
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )


@pytest.fixture
def cu13_wheel(tmp_path: Path) -> Path:
    """A cu13 ptkit-ops wheel as the index gets it (name, dist-info, RECORD, a manifest)."""
    wheel = make_wheel(
        tmp_path / "in",
        "ptkit-ops",
        CU13_VERSION,
        tag="py3-none-manylinux_2_28_x86_64",
        manifest_variant="cu13",
    )
    assert wheel.name == CU13_WHEEL
    return wheel


# --- properties (no wheels needed) -------------------------------------------------


def test_properties_per_recipe() -> None:
    assert variant_properties(_recipe("cu13")) == CU13_PROPERTIES
    assert variant_properties(_recipe("rocm7.14")) == [
        "amd :: gfx_arch :: gfx1100",
        "amd :: gfx_arch :: gfx1201",
        "amd :: gfx_arch :: gfx942",
        "amd :: gfx_arch :: gfx950",
    ]
    # spir64 (JIT for any Intel GPU) adds no property; pvc and bmg are their GMDIDs.
    assert variant_properties(_recipe("xpu")) == [
        "intel :: device_ip :: 12.60.7",
        "intel :: device_ip :: 20.1.0",
    ]
    assert variant_properties(_recipe("cpu")) == []
    assert variant_properties(_recipe("metal")) == []
    assert [variant_label(_recipe(v)) for v in ("cu13", "rocm7.14", "xpu", "cpu")] == [
        "cu13",
        "rocm7.14",
        "xpu",
        "null",
    ]


def test_generic_and_qualified_hip_targets_become_processors() -> None:
    recipe = _recipe("rocm7.14")
    recipe = dataclasses.replace(
        recipe,
        targets=dataclasses.replace(recipe.targets, hip=("gfx12-generic", "gfx90a:xnack+")),
    )
    assert variant_properties(recipe) == [
        "amd :: gfx_arch :: gfx1200",
        "amd :: gfx_arch :: gfx1201",
        "amd :: gfx_arch :: gfx90a",
    ]


def test_optional_cuda_targets_are_not_promised() -> None:
    recipe = _recipe("cu13")
    recipe = dataclasses.replace(
        recipe, targets=dataclasses.replace(recipe.targets, cuda_optional=("sm_121",))
    )
    assert variant_properties(recipe) == CU13_PROPERTIES


# --- the cu13 variant wheel, read back by variantlib -------------------------------


def test_cu13_files_named_and_readable_by_variantlib(cu13_wheel: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    files = write_variant_files([cu13_wheel], _recipe("cu13"), out)
    assert [f.name for f in files] == [CU13_VARIANT_WHEEL, CU13_VARIANTS_JSON]
    assert sorted(p.name for p in out.iterdir()) == sorted([CU13_VARIANT_WHEEL, CU13_VARIANTS_JSON])

    # variantlib's own wheel analysis, as a separate process.
    result = _variantlib_cli("analyze-wheel", "-i", str(out / CU13_VARIANT_WHEEL))
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0].startswith("#") and "Variant: `cu13`" in lines[0]
    assert lines[1:-1] == CU13_PROPERTIES

    # variant.json inside the dist-info, listed in RECORD with its hash.
    with zipfile.ZipFile(out / CU13_VARIANT_WHEEL) as archive:
        data = archive.read(f"{CU13_DIST_INFO}/variant.json")
        record = archive.read(f"{CU13_DIST_INFO}/RECORD").decode()
    info = VariantDistInfo(data, expected_label="cu13")
    assert sorted(p.to_str() for p in info.variant_desc.properties) == sorted(CU13_PROPERTIES)
    assert info.namespace_priorities == ["nvidia"]
    assert info.providers["nvidia"].requires == ["nvidia-variant-provider>=0.0.1,<1.0.0"]
    digest = hashlib.sha256(data).digest()
    b64 = base64.urlsafe_b64encode(digest).rstrip(b"=").decode()
    assert f"{CU13_DIST_INFO}/variant.json,sha256={b64},{len(data)}" in record.splitlines()


def test_cu13_wheel_content_is_the_input_plus_variant_json(
    cu13_wheel: Path, tmp_path: Path
) -> None:
    out = tmp_path / "out"
    write_variant_files([cu13_wheel], _recipe("cu13"), out)
    with zipfile.ZipFile(cu13_wheel) as before, zipfile.ZipFile(out / CU13_VARIANT_WHEEL) as after:
        old = {i.filename: i for i in before.infolist()}
        new = {i.filename: i for i in after.infolist()}
        record = f"{CU13_DIST_INFO}/RECORD"
        assert set(new) - set(old) == {f"{CU13_DIST_INFO}/variant.json"}
        assert set(old) <= set(new)
        for name, info in old.items():
            assert new[name].date_time == info.date_time, name
            assert new[name].external_attr == info.external_attr, name
            if name != record:
                assert after.read(name) == before.read(name), name
        old_record = before.read(record).decode()
        new_record = after.read(record).decode()
        assert new_record.startswith(old_record)
        assert new_record[len(old_record) :].count("\n") == 1


def test_cu13_variants_json_validates_and_matches_variantlib(
    cu13_wheel: Path, tmp_path: Path
) -> None:
    out = tmp_path / "out"
    write_variant_files([cu13_wheel], _recipe("cu13"), out)
    text = (out / CU13_VARIANTS_JSON).read_text()
    parsed = VariantsJson(json.loads(text))
    assert list(parsed.variants) == ["cu13"]
    assert sorted(p.to_str() for p in parsed.variants["cu13"].properties) == sorted(CU13_PROPERTIES)
    # variantlib's own index generator, run over the variant wheel, writes the same bytes.
    again = tmp_path / "again"
    again.mkdir()
    shutil.copyfile(out / CU13_VARIANT_WHEEL, again / CU13_VARIANT_WHEEL)
    result = _variantlib_cli("generate-index-json", "-d", str(again))
    assert result.returncode == 0, result.stderr
    assert (again / CU13_VARIANTS_JSON).read_bytes() == (out / CU13_VARIANTS_JSON).read_bytes()


def test_output_is_deterministic(
    cu13_wheel: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("SOURCE_DATE_EPOCH", raising=False)
    first = write_variant_files([cu13_wheel], _recipe("cu13"), tmp_path / "one")
    second = write_variant_files([cu13_wheel], _recipe("cu13"), tmp_path / "two")
    assert [p.read_bytes() for p in first] == [p.read_bytes() for p in second]
    # Rebuilding into the same folder gives the same bytes too.
    before = [_sha256(p) for p in first]
    write_variant_files([cu13_wheel], _recipe("cu13"), tmp_path / "one")
    assert [_sha256(p) for p in first] == before
    # SOURCE_DATE_EPOCH dates variant.json; still deterministic.
    monkeypatch.setenv("SOURCE_DATE_EPOCH", "1767225600")  # 2026-01-01
    third = write_variant_files([cu13_wheel], _recipe("cu13"), tmp_path / "three")
    with zipfile.ZipFile(third[0]) as archive:
        info = archive.getinfo(f"{CU13_DIST_INFO}/variant.json")
    assert info.date_time == (2026, 1, 1, 0, 0, 0)
    fourth = write_variant_files([cu13_wheel], _recipe("cu13"), tmp_path / "four")
    assert third[0].read_bytes() == fourth[0].read_bytes()


def test_input_wheel_is_unchanged(cu13_wheel: Path, tmp_path: Path) -> None:
    before = (_sha256(cu13_wheel), cu13_wheel.stat().st_mtime_ns)
    write_variant_files([cu13_wheel], _recipe("cu13"), tmp_path / "out")
    assert (_sha256(cu13_wheel), cu13_wheel.stat().st_mtime_ns) == before
    assert sorted(p.name for p in cu13_wheel.parent.iterdir()) == [CU13_WHEEL]


def test_cpu_writes_nothing(tmp_path: Path) -> None:
    assert write_variant_files([], _recipe("cpu"), tmp_path / "out") == []
    assert not (tmp_path / "out").exists()


# --- failures ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("properties", "message"),
    [
        (
            ["nvidia :: sm_arch :: SM-90"],
            "variantlib rejects the variant property 'nvidia :: sm_arch :: SM-90'",
        ),
        (
            ["nvidia :: sm_arch :: 130_real"],
            "'nvidia :: sm_arch :: 130_real' is not a value the nvidia provider accepts",
        ),
        (["nvidia :: no_such_feature :: 1"], "uses a feature no provider ptkit knows defines"),
        (
            [
                "nvidia :: cuda_version_lower_bound :: 13",
                "nvidia :: cuda_version_lower_bound :: 12",
            ],
            "'nvidia :: cuda_version_lower_bound' takes one value",
        ),
    ],
)
def test_bad_property_raises(
    cu13_wheel: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    properties: list[str],
    message: str,
) -> None:
    monkeypatch.setattr(vm, "variant_properties", lambda recipe: properties)
    with pytest.raises(VariantMetadataError) as caught:
        write_variant_files([cu13_wheel], _recipe("cu13"), tmp_path / "out")
    assert str(caught.value).startswith("ptkit index build --variant-metadata: ")
    assert message in str(caught.value)
    assert not (tmp_path / "out").exists()


def test_recipe_target_unknown_to_the_provider_raises(cu13_wheel: Path, tmp_path: Path) -> None:
    recipe = _recipe("cu13")
    recipe = dataclasses.replace(
        recipe, targets=dataclasses.replace(recipe.targets, cuda=("sm_130",))
    )
    with pytest.raises(
        VariantMetadataError, match=r"'nvidia :: sm_arch :: 130_real' is not a value"
    ):
        write_variant_files([cu13_wheel], recipe, tmp_path / "out")


def test_unknown_xpu_device_raises() -> None:
    recipe = _recipe("xpu")
    recipe = dataclasses.replace(recipe, targets=dataclasses.replace(recipe.targets, xpu=("xe9",)))
    with pytest.raises(
        VariantMetadataError,
        match=r"no Intel device IP \(GMDID\) is known for the AOT device 'xe9'",
    ):
        variant_properties(recipe)


def test_missing_variantlib_names_the_fix(
    cu13_wheel: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "variantlib", None)
    with pytest.raises(VariantMetadataError) as caught:
        write_variant_files([cu13_wheel], _recipe("cu13"), tmp_path / "out")
    message = str(caught.value)
    assert message.startswith("ptkit index build --variant-metadata: ")
    assert "pip install variantlib==0.2.2" in message


def test_not_a_wheel_raises(tmp_path: Path) -> None:
    bogus = tmp_path / "ptkit.zip"
    bogus.write_bytes(b"")
    with pytest.raises(VariantMetadataError, match="is not a wheel file"):
        write_variant_files([bogus], _recipe("cu13"), tmp_path / "out")
