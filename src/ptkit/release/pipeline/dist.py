"""Stage 5, dist: the finished wheel moved into ``dist/<variant>/``, all of it or none."""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable
from pathlib import Path

__all__ = ["publish"]


def publish(
    wheel: Path, *, dist: Path, variant: str, keep: Callable[[Path], bool] | None = None
) -> Path:
    """Move ``wheel`` into ``dist/<variant>/``; readers see all of it or none.

    Copied next to its final name first (a dot file no ``*.whl`` glob matches),
    then renamed, even when dist/ is on another file system; older wheels of the
    variant (of the same distribution) are removed only after the new one is in place,
    except those ``keep`` says are other builds (a torch-mode variant's other torch minors).
    """
    target = dist / variant
    target.mkdir(parents=True, exist_ok=True)
    final = target / wheel.name
    partial = target / f".{wheel.name}.part"
    shutil.copyfile(wheel, partial)
    os.replace(partial, final)
    for old in target.glob(f"{wheel.name.split('-', 1)[0]}-*.whl"):
        if old.name != final.name and not (keep is not None and keep(old)):
            old.unlink()
    return final
