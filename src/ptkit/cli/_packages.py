"""Importing the installed packages built with ptkit, for the commands that report on
them from inside torch (``explain``, ``profile``)."""

from __future__ import annotations

__all__ = ["import_installed_packages"]


def import_installed_packages() -> dict[str, str]:
    """Import every package of the ``ptkit.packages`` entry-point group: its ``__init__``
    loads its libraries (``load_package`` is idempotent, so one that does not call it is
    loaded here all the same). Returns the ones that failed, with why."""
    import importlib

    import ptkit.runtime as runtime
    from ptkit.loading.packages import discover_packages

    problems: dict[str, str] = {}
    for entry in discover_packages():
        try:
            importlib.import_module(entry.module)
            runtime.load_package(entry.module)
        except Exception as exc:  # a broken package must not hide the others
            problems[entry.module] = f"import {entry.module} failed: {type(exc).__name__}: {exc}"
    return problems
