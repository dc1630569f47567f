"""Where ptkit's CMake package is: ``ptkit --cmake-dir``, for ``-Dptkit_DIR=…``.

Standard library only and ``__file__``-relative, so the console script answers without
importing torch. Two layouts, one rule each:

* an installed ptkit: ``<site-packages>/ptkit/cmake/`` (CMakeLists.txt installs the
  source tree's ``cmake/`` there, next to the build tools in ``ptkit/build/``);
* ptkit's source tree (``PYTHONPATH=src``): ``<repo>/cmake/``.
"""

from __future__ import annotations

from pathlib import Path

__all__ = ["CONFIG_FILE", "cmake_dir"]

CONFIG_FILE = "ptkit-config.cmake"

_PACKAGE = Path(__file__).resolve().parent.parent  # .../ptkit


def cmake_dir() -> Path:
    """The folder holding ``ptkit-config.cmake``; FileNotFoundError names both places looked."""
    candidates = (_PACKAGE / "cmake", _PACKAGE.parent.parent / "cmake")
    for candidate in candidates:
        if (candidate / CONFIG_FILE).is_file():
            return candidate
    raise FileNotFoundError(
        f"ptkit's CMake package ({CONFIG_FILE}) is in neither {candidates[0]} (an installed "
        f"ptkit) nor {candidates[1]} (ptkit's source tree); reinstall ptkit: "
        "pip install --force-reinstall ptkit"
    )
