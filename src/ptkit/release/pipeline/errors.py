"""The one error a pipeline stage raises: what failed, why, and what to do."""

from __future__ import annotations

from pathlib import Path

__all__ = ["BuildError"]


class BuildError(RuntimeError):
    """A stage failed; the message names the stage, the cause and the fix."""

    def __init__(
        self, stage: str, variant: str, cause: str, fix: str, *, details: str = ""
    ) -> None:
        self.stage = stage
        self.variant = variant
        self.cause = cause
        self.fix = fix
        self.details = details
        # Set by the pipeline: where nothing was written, where the evidence is.
        self.untouched: Path | None = None
        self.kept: Path | None = None
        super().__init__(stage, cause)

    def __str__(self) -> str:
        lines = [
            f"ptkit build: stage '{self.stage}' failed for variant {self.variant}: {self.cause}"
        ]
        if self.details:
            lines.append(self.details)
        lines.append(f"Fix: {self.fix}")
        if self.kept is not None:
            lines.append(f"The stage's files are kept in {self.kept}.")
        if self.untouched is not None:
            lines.append(f"Nothing was written to {self.untouched}.")
        return "\n".join(lines)
