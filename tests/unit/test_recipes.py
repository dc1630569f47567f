from __future__ import annotations

from pathlib import Path

import pytest
from support import REPO

from ptkit.release.version_provider import variant_version
from ptkit.recipes.model import RecipeError, load_recipe

RECIPES = REPO / "recipes"


def test_cpu_recipe_is_valid() -> None:
    recipe = load_recipe("cpu", RECIPES)
    assert (recipe.backend, recipe.local_version, recipe.index_path) == ("cpu", "cpu", "cpu")
    assert recipe.targets.isa[-1] == "default"


def test_version_carries_the_variant_label() -> None:
    assert variant_version(REPO, "cpu") == "0.1.0+cpu"


def test_unknown_variant_lists_known_ones() -> None:
    with pytest.raises(RecipeError, match=r"no recipe for variant 'cu99'.*known variants: cpu"):
        load_recipe("cu99", RECIPES)


def test_every_problem_is_reported_at_once_with_suggestions(tmp_path: Path) -> None:
    (tmp_path / "bad.toml").write_text(
        '[variant]\nname = "bad"\nbackend = "cudaa"\nlocal-versoin = "x"\n[targets]\nisa = "default"\n'
    )
    with pytest.raises(RecipeError) as info:
        load_recipe("bad", tmp_path)
    message = str(info.value)
    assert "unknown key variant.'local-versoin' (did you mean 'local-version'?)" in message
    assert "variant.backend must be one of cpu, cuda, hip, xpu, metal, got 'cudaa'" in message
    assert "variant.local-version must be a non-empty string" in message
    assert "targets.isa must be a list of strings" in message


def test_local_label_must_follow_pep440(tmp_path: Path) -> None:
    (tmp_path / "x.toml").write_text(
        '[variant]\nname = "x"\nbackend = "cpu"\nlocal-version = "CU 13"\n'
    )
    with pytest.raises(RecipeError, match="is not a PEP 440 local label"):
        load_recipe("x", tmp_path)


@pytest.mark.parametrize(
    ("variant", "backend", "targets"),
    [
        (
            "cu13",
            "cuda",
            ("sm_90", "sm_100", "sm_103", "sm_107", "sm_110", "sm_120", "compute_120"),
        ),
        ("rocm7.14", "hip", ("gfx942", "gfx950", "gfx1100", "gfx1201")),
        ("xpu", "xpu", ("pvc", "bmg", "spir64")),
        ("metal", "metal", ()),
    ],
)
def test_every_accelerator_recipe_is_valid(
    variant: str, backend: str, targets: tuple[str, ...]
) -> None:
    recipe = load_recipe(variant, RECIPES)
    assert recipe.backend == backend and recipe.local_version == variant == recipe.index_path
    assert {"cuda": recipe.targets.cuda, "hip": recipe.targets.hip, "xpu": recipe.targets.xpu}.get(
        backend, ()
    ) == targets


def test_rocm_toolkit_comes_from_therocks_index() -> None:
    toolkit = load_recipe("rocm7.14", RECIPES).toolkit
    assert toolkit.index_url.startswith("https://rocm.nightlies.amd.com/")
    assert toolkit.packages == ("rocm[libraries,devel]==7.14.*",)


def test_gpu_targets_are_checked_against_the_backend(tmp_path: Path) -> None:
    (tmp_path / "y.toml").write_text(
        '[variant]\nname = "y"\nbackend = "cuda"\nlocal-version = "y"\n'
        '[targets]\ncuda = ["sm_90"]\nhip = ["gfx942", "sm_90"]\nxpu = ["PVC!"]\n'
    )
    with pytest.raises(RecipeError) as info:
        load_recipe("y", tmp_path)
    message = str(info.value)
    assert "targets.hip: 'sm_90' is not an AMD GPU target" in message
    assert "targets.xpu: 'PVC!' is not an Intel GPU device name" in message
    assert "targets.hip is set but the backend is 'cuda', not 'hip'" in message
