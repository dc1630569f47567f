"""Stage 3, audit: :func:`ptkit.release.wheel_audit.audit_wheel` on the repaired wheel;
any problem fails the build, each with its fix."""

from __future__ import annotations

from pathlib import Path

from ptkit.recipes.model import Recipe
from ptkit.release.pipeline.errors import BuildError
from ptkit.release.pipeline.prerequisites import install_command

__all__ = ["audit_stage"]


def audit_stage(wheel: Path, *, recipe: Recipe, cuobjdump: str | None = None) -> str:
    """Audit ``wheel`` of ``recipe``'s variant; returns the per-library summary."""
    try:
        from ptkit.release.wheel_audit import audit_wheel

        result = audit_wheel(wheel, cuobjdump=cuobjdump)
    # A format's reader (pyelftools, macholib, pefile) is imported when the audit runs.
    except ImportError as exc:
        raise BuildError(
            "audit",
            recipe.name,
            f"cannot run the audit: {exc}",
            f"{install_command()} (it holds pyelftools, macholib, pefile and auditwheel)",
        ) from exc
    if result.problems:
        count = len(result.problems)
        raise BuildError(
            "audit",
            recipe.name,
            f"{count} problem{'s' if count > 1 else ''} in {wheel.name}",
            "each problem above ends with its fix; `ptkit inspect <wheel>` shows the details",
            details="\n".join(f"  - {p}" for p in result.problems),
        )
    return "\n".join(f"      {lib.summary()}" for lib in result.libraries)
