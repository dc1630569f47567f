"""What the installer wrote: the sha256 of each file of a native folder, from the RECORD
of the distribution that installed it.

A library is checked against its manifest (rule 5), but the manifest itself could be
edited after installing: a dtype or an op added by hand would then be repeated as fact by
``explain()`` and the doctor. pip and uv write every installed file's sha256 into the
dist-info's RECORD, so a manifest that differs from its RECORD entry is refused with the
reason. A source tree or an editable install has no such entry, and nothing is checked.

Standard library only; the RECORD is read as a hostile file (a regular file, bounded).
"""

from __future__ import annotations

import base64
import csv
import os
import re
from pathlib import Path

from ptkit.loading.files import read_regular_file

__all__ = ["MAX_RECORD_BYTES", "recorded_sha256"]

MAX_RECORD_BYTES = 16 << 20  # a RECORD lists every file of the distribution, ~100 bytes each
_SEPARATORS = re.compile(r"[-_.]+")


def _normalize(name: str) -> str:
    return _SEPARATORS.sub("-", name).lower()


def _dist_infos(site: Path, top_package: str) -> list[Path]:
    """The site folder's dist-infos of ``top_package``'s name (``ptkit_ops`` ->
    ``ptkit_ops-0.1.0+cpu.dist-info``); a distribution named otherwise is not checked."""
    try:
        names = sorted(n for n in os.listdir(site) if n.endswith(".dist-info"))
    except OSError:
        return []
    wanted = _normalize(top_package)
    own = [n for n in names if _normalize(n[: -len(".dist-info")].partition("-")[0]) == wanted]
    return [site / n for n in own]


def recorded_sha256(native_dir: Path) -> dict[str, str]:
    """File name -> the hex sha256 its installer recorded, for the files directly in
    ``native_dir`` (``<site>/<package>/_native``); empty when no RECORD lists them."""
    package_dir = native_dir.parent
    site = package_dir.parent
    prefix = f"{package_dir.name}/{native_dir.name}/"
    for dist_info in _dist_infos(site, package_dir.name):
        try:
            text = read_regular_file(dist_info / "RECORD", MAX_RECORD_BYTES).decode("utf-8")
        except (OSError, UnicodeDecodeError):
            continue  # no readable RECORD: not checked, like a source tree
        found: dict[str, str] = {}
        for row in csv.reader(text.splitlines()):
            if len(row) < 2 or not row[0].startswith(prefix) or "/" in row[0][len(prefix) :]:
                continue
            algorithm, _, digest = row[1].partition("=")
            if algorithm != "sha256" or not digest:
                continue
            try:
                raw = base64.urlsafe_b64decode(digest + "=" * (-len(digest) % 4))
            except ValueError:
                continue
            found[row[0][len(prefix) :]] = raw.hex()
        if found:
            return found
    return {}
