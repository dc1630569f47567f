"""The pages of one variant's simple index: PEP 503 HTML and PEP 691 JSON.

Both forms carry the same facts for every file: its URL with ``#sha256=`` (HTML) or
``hashes`` (JSON), ``Requires-Python``, the sha256 of its metadata file under both
PEP 658/714 names, and, in JSON (API version 1.1, PEP 700), ``size``, ``upload-time``
and the project's ``versions``.
"""

from __future__ import annotations

import dataclasses
import html
import json
from typing import Any

from packaging.version import Version

__all__ = ["API_VERSION", "IndexFile", "project_html", "project_json", "root_html", "root_json"]

API_VERSION = "1.1"


@dataclasses.dataclass(frozen=True)
class IndexFile:
    """One file on a project page."""

    filename: str
    url: str  # relative to the project page, or absolute with --base-url
    sha256: str
    size: int
    upload_time: str  # ISO 8601 UTC, e.g. 2026-11-30T02:10:00Z
    requires_python: str | None
    metadata_sha256: str | None  # None: no .metadata file (e.g. the variants.json file)
    version: str | None  # the file's version; None for files that are not distributions


def _dump(document: dict[str, Any]) -> str:
    return json.dumps(document, indent=2, sort_keys=True) + "\n"


def root_json(projects: list[str]) -> str:
    return _dump(
        {"meta": {"api-version": API_VERSION}, "projects": [{"name": p} for p in projects]}
    )


def root_html(projects: list[str]) -> str:
    links = "\n".join(f'    <a href="{html.escape(p)}/">{html.escape(p)}</a><br>' for p in projects)
    return _page("Simple index", links)


def project_json(project: str, files: list[IndexFile]) -> str:
    entries = []
    for f in files:
        entry: dict[str, Any] = {
            "filename": f.filename,
            "url": f.url,
            "hashes": {"sha256": f.sha256},
            "size": f.size,
            "upload-time": f.upload_time,
            "yanked": False,
        }
        if f.requires_python is not None:
            entry["requires-python"] = f.requires_python
        if f.metadata_sha256 is not None:
            entry["core-metadata"] = {"sha256": f.metadata_sha256}
            entry["dist-info-metadata"] = {"sha256": f.metadata_sha256}
        entries.append(entry)
    versions = sorted({f.version for f in files if f.version is not None}, key=Version)
    return _dump(
        {
            "meta": {"api-version": API_VERSION},
            "name": project,
            "versions": versions,
            "files": entries,
        }
    )


def project_html(project: str, files: list[IndexFile]) -> str:
    links = []
    for f in files:
        attributes = [f'href="{html.escape(f.url)}#sha256={f.sha256}"']
        if f.requires_python is not None:
            attributes.append(f'data-requires-python="{html.escape(f.requires_python)}"')
        if f.metadata_sha256 is not None:
            attributes.append(f'data-dist-info-metadata="sha256={f.metadata_sha256}"')
            attributes.append(f'data-core-metadata="sha256={f.metadata_sha256}"')
        links.append(f"    <a {' '.join(attributes)}>{html.escape(f.filename)}</a><br>")
    return _page(f"Links for {project}", "\n".join(links))


def _page(title: str, body: str) -> str:
    return (
        "<!DOCTYPE html>\n<html>\n  <head>\n"
        f'    <meta name="pypi:repository-version" content="{API_VERSION}">\n'
        f"    <title>{html.escape(title)}</title>\n  </head>\n  <body>\n"
        f"    <h1>{html.escape(title)}</h1>\n{body}\n  </body>\n</html>\n"
    )
