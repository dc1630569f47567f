from __future__ import annotations

from pathlib import Path

import pytest
from support import REPO

from ptkit.build._version_provider import variant_version
from ptkit.build.recipes import RecipeError, load_recipe

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
