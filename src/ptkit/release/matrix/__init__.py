"""``ptkit matrix``: the release plan, from the recipes, and the files generated from it.

- :mod:`.plan`: variant x platform x CPython (cp310 … cp315 and cp315t), and the
  toolkit wheel of a tree that builds it; pure, printed without running anything;
- :mod:`.cibuildwheel`: ``ci/cibuildwheel/<variant>.toml``, cibuildwheel's configuration
  for one variant, read with ``--config-file``;
- :mod:`.workflow`: ``.github/workflows/release.yml``, the toolkit job, one job per
  (variant, platform), then the index;
- :mod:`.generated`: those files and ``recipes/recipe.schema.json`` (the recipe model's
  JSON schema) written (``ptkit matrix --write``) and compared (``--check`` fails, naming
  each file, while one differs from what the recipes generate).

Another project built with ptkit (``ptkit new``) gets the same files from its own
recipes, for its own distribution (the name in its ``pyproject.toml``), with ``ptkit``
from the package index. The files are committed so that a recipe change shows its
effect in review and CI needs no ptkit to read them.
"""

from __future__ import annotations

from ptkit.release.matrix.cibuildwheel import SCCACHE, cibuildwheel_toml, pinned_sccache_wraps_nvcc
from ptkit.release.matrix.generated import (
    Stale,
    check_generated,
    generate,
    matrix_command,
    write_generated,
)
from ptkit.release.matrix.plan import (
    PYTHONS,
    Job,
    MatrixError,
    Plan,
    Toolkit,
    format_plan,
    load_plan,
    plan_json,
)
from ptkit.release.matrix.workflow import CIBUILDWHEEL, workflow_yaml

__all__ = [
    "CIBUILDWHEEL",
    "PYTHONS",
    "SCCACHE",
    "Job",
    "MatrixError",
    "Plan",
    "Stale",
    "Toolkit",
    "check_generated",
    "cibuildwheel_toml",
    "format_plan",
    "generate",
    "load_plan",
    "matrix_command",
    "pinned_sccache_wraps_nvcc",
    "plan_json",
    "workflow_yaml",
    "write_generated",
]
