"""``ptkit select``: which variant of ptkit-ops fits this machine, why, and the commands
that install it. No torch: the machine's facts come from ``ptkit.hardware``.

Modules, one concern each:

- ``recipes``: where the variants live (ptkit-ops' recipes, shipped as ``ptkit/_recipes``)
  and what they build (``OPS_DISTRIBUTION``, ``OPS_PACKAGE``);
- ``policy``: the choice (``select_variant``, ``select``), every device rule asked of
  ``ptkit.backends``;
- ``torch_build``: which build of a torch-mode variant fits the environment's torch, and
  the torch pin its commands carry;
- ``commands``: the pip and uv commands for a variant's index (and the pip command
  that replaces an installed variant with another);
- ``result``: the answer's records and its JSON;
- ``render``: the text report.
"""

from __future__ import annotations

from ptkit.selection.commands import (
    ENV_INDEX_URL,
    InstallCommands,
    install_commands,
    replace_command,
)
from ptkit.selection.policy import ENV_VARIANT, select, select_variant, wheel_platform
from ptkit.selection.recipes import (
    OPS_DISTRIBUTION,
    OPS_PACKAGE,
    SelectionError,
    load_all_recipes,
    project_distribution,
    recipes_dir,
)
from ptkit.selection.render import render_text
from ptkit.selection.result import SCHEMA_VERSION, DeviceReport, Selection, VariantCoverage
from ptkit.selection.torch_build import TorchChoice, choose_torch_build

__all__ = [
    "ENV_INDEX_URL",
    "ENV_VARIANT",
    "OPS_DISTRIBUTION",
    "OPS_PACKAGE",
    "SCHEMA_VERSION",
    "DeviceReport",
    "InstallCommands",
    "Selection",
    "SelectionError",
    "TorchChoice",
    "VariantCoverage",
    "choose_torch_build",
    "install_commands",
    "load_all_recipes",
    "project_distribution",
    "recipes_dir",
    "render_text",
    "replace_command",
    "select",
    "select_variant",
    "wheel_platform",
]
