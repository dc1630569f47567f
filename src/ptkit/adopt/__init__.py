"""``ptkit adopt``: an existing extension project made into one that ptkit builds, ships
and loads, without touching its kernels.

Two shapes of input, one module each: a ``setup.py`` with ``torch.utils.cpp_extension``
extensions (:mod:`ptkit.adopt.setup_py`, run with recording stand-ins) and a Hugging Face
kernel-builder project, ``build.toml`` + ``torch-ext/`` (:mod:`ptkit.adopt.kernel_builder`).
Both give an :class:`~ptkit.adopt.model.Adoption`, which :mod:`ptkit.adopt.writer` turns
into pyproject.toml, CMakeLists.txt, the recipes and the loader call, and writes all or
nothing. What could not be translated is returned with a fix for each. Standard library
only: the command does not import torch.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

from ptkit.adopt.model import AdoptError, Adoption, Edit, Untranslated

__all__ = ["AdoptError", "Adopted", "Untranslated", "adopt", "read_project"]


@dataclasses.dataclass(frozen=True)
class Adopted:
    """What ``adopt`` did: the files written, the files edited (and why), the rest."""

    root: Path
    adoption: Adoption
    written: list[str]
    edited: list[Edit]

    @property
    def untranslated(self) -> list[Untranslated]:
        return self.adoption.untranslated


def read_project(root: Path) -> Adoption:
    """The project at ``root`` read from its setup.py or its build.toml."""
    if not root.is_dir():
        raise AdoptError(
            f"ptkit adopt: expected a project folder, found {'a file' if root.exists() else 'nothing'} "
            f"at {root}; pass the folder that holds setup.py or build.toml"
        )
    has_setup = (root / "setup.py").is_file()
    has_build = (root / "build.toml").is_file()
    if has_setup and has_build:
        raise AdoptError(
            f"ptkit adopt: expected one of setup.py or build.toml in {root}, found both; "
            "move the one that does not describe the kernels away, then run ptkit adopt again"
        )
    if has_build:
        from ptkit.adopt.kernel_builder import read_build_toml

        return read_build_toml(root)
    if has_setup:
        from ptkit.adopt.setup_py import read_setup_py

        return read_setup_py(root)
    found = sorted(p.name for p in root.iterdir())[:8]
    raise AdoptError(
        f"ptkit adopt: expected a setup.py (torch.utils.cpp_extension's CppExtension/"
        f"CUDAExtension) or a kernel-builder build.toml in {root}, found "
        f"{', '.join(found) if found else 'an empty folder'}; run it in the project's root, "
        "or start a new project with ptkit new"
    )


def adopt(root: Path, *, force: bool = False) -> Adopted:
    """Read the project at ``root`` and write ptkit's files into it (all or none)."""
    from ptkit._version import __version__
    from ptkit.adopt.writer import plan_files, write_files
    from ptkit.scaffold import ptkit_requirement

    root = root.absolute()
    adoption = read_project(root)
    written = plan_files(root, adoption, ptkit_requirement(__version__))
    write_files(root, written, force=force)
    return Adopted(root, adoption, sorted(written.files), written.edits)
