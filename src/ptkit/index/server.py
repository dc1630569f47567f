"""``ptkit index serve``: the built index over loopback HTTP, for local use and tests.

A static host serves ``index.html``; this server also answers PEP 691 content
negotiation: a folder URL (``/cu13/simple/ptkit/``) returns ``index.json`` as
``application/vnd.pypi.simple.v1+json`` when the client prefers it (pip and uv do),
``index.html`` otherwise, with ``Vary: Accept``; ``?format=`` picks one explicitly.

Only what an index publishes is served: the landing page, the ``simple/`` pages and the
``files/``, through the variants' links; nothing outside the served folder, and no
hidden name (the build's lock, its ``.generations/`` and their half-written
``.tmp-*``), whatever the URL says. A malformed path (a NUL, a segment longer than a
file name can be) is a 400, never a dropped connection. Files are streamed in chunks,
so slow downloads of large wheels do not hold them in memory. It listens on loopback
unless told otherwise (``allow_remote``): an index of unreleased wheels is not for the
network by accident.
"""

from __future__ import annotations

import contextlib
import http.server
import ipaddress
import os
import shutil
import threading
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import unquote, urlsplit

__all__ = [
    "HTML_TYPE",
    "JSON_TYPE",
    "IndexServer",
    "RemoteListenError",
    "is_loopback",
    "negotiate",
    "running_server",
]

JSON_TYPE = "application/vnd.pypi.simple.v1+json"
HTML_TYPE = "application/vnd.pypi.simple.v1+html"
_JSON_ALIASES = {JSON_TYPE, "application/vnd.pypi.simple.latest+json"}
_HTML_ALIASES = {HTML_TYPE, "application/vnd.pypi.simple.latest+html"}
_CHUNK = 1 << 16
_MAX_SEGMENT = 255  # bytes: the longest file name the index's file systems hold


class RemoteListenError(ValueError):
    """An address beyond loopback without ``allow_remote``; the message says how."""


def is_loopback(host: str) -> bool:
    """Whether binding ``host`` listens on loopback only (``""`` listens everywhere)."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _format_parameter(query: str) -> str | None:
    """``?format=`` as PEP 691 writes it: a media type, whose ``+`` is a plus sign (not the
    space of form encoding)."""
    for pair in query.split("&"):
        key, _, value = pair.partition("=")
        if unquote(key) == "format":
            return unquote(value)
    return None


def negotiate(accept: str | None) -> str | None:
    """The page type to serve for an ``Accept`` header (PEP 691), or None (406).

    Returns JSON_TYPE, HTML_TYPE or ``text/html``; ties go to the earlier entry.
    """
    if not accept:
        return "text/html"
    best: tuple[float, int, str] | None = None
    for position, item in enumerate(accept.split(",")):
        media, *params = (part.strip() for part in item.split(";"))
        quality = 1.0
        for param in params:
            key, _, value = param.partition("=")
            if key.strip() == "q":
                try:
                    quality = float(value)
                except ValueError:
                    quality = 0.0
        media = media.lower()
        if media in _JSON_ALIASES:
            served = JSON_TYPE
        elif media in _HTML_ALIASES:
            served = HTML_TYPE
        elif media in {"text/html", "text/*", "*/*"}:
            served = "text/html"
        else:
            continue
        if quality > 0 and (best is None or (quality, -position) > (best[0], -best[1])):
            best = (quality, position, served)
    return best[2] if best else None


class _Handler(http.server.BaseHTTPRequestHandler):
    root: Path  # set on the subclass made by IndexServer
    server_version = "ptkit-index"

    def log_message(self, format: str, *args: object) -> None:
        if os.environ.get("PTKIT_INDEX_LOG"):
            super().log_message(format, *args)

    def do_HEAD(self) -> None:
        self._respond(body=False)

    def do_GET(self) -> None:
        self._respond(body=True)

    def _respond(self, body: bool) -> None:
        url = urlsplit(self.path)
        relative = unquote(url.path).lstrip("/")
        segments = [s for s in relative.split("/") if s]
        if "\0" in relative or any(len(s.encode()) > _MAX_SEGMENT for s in segments):
            self._error(400, "a malformed path (a NUL byte, or a segment over 255 bytes)")
            return
        if any(s.startswith(".") for s in segments):
            self._error(404, "not part of the index")  # the lock, generations, .tmp-*
            return
        try:
            candidate = (self.root / relative).resolve()
            if candidate != self.root and self.root not in candidate.parents:
                self._error(404, "outside the index")
                return
            is_dir, is_file = candidate.is_dir(), candidate.is_file()
        except (OSError, ValueError):
            self._error(400, "a path this server cannot look up")
            return
        if is_dir:
            if not url.path.endswith("/"):
                self.send_response(301)
                self.send_header("Location", url.path + "/")
                self.send_header("Content-Length", "0")
                self.end_headers()
                return
            self._page(candidate, _format_parameter(url.query), body)
        elif is_file:
            self._send(candidate, "application/octet-stream", body, vary=False)
        else:
            self._error(404, "no such file")

    def _page(self, folder: Path, forced: str | None, body: bool) -> None:
        if forced is not None and forced not in {JSON_TYPE, HTML_TYPE, "text/html"}:
            self._error(406, f"?format= takes {JSON_TYPE}, {HTML_TYPE} or text/html")
            return
        served = forced or negotiate(self.headers.get("Accept"))
        if served is None:
            self._error(406, f"this index serves {JSON_TYPE}, {HTML_TYPE} and text/html")
            return
        page = folder / ("index.json" if served == JSON_TYPE else "index.html")
        if not page.is_file():
            self._error(404, "no index page here")
            return
        content_type = served if served != "text/html" else "text/html; charset=utf-8"
        self._send(page, content_type, body, vary=True)

    def _send(self, path: Path, content_type: str, body: bool, vary: bool) -> None:
        try:
            handle = path.open("rb")
        except OSError:
            self._error(404, "no such file")
            return
        with handle:
            size = os.fstat(handle.fileno()).st_size
            self.send_response(200)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(size))
            if vary:
                self.send_header("Vary", "Accept")
            self.end_headers()
            if body:
                with contextlib.suppress(ConnectionError):  # the client went away
                    shutil.copyfileobj(handle, self.wfile, _CHUNK)

    def _error(self, code: int, message: str) -> None:
        data = f"{code}: {message}\n".encode()
        self.send_response(code)
        self.send_header("Content-Type", "text/plain; charset=utf-8")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(data)


class IndexServer(http.server.ThreadingHTTPServer):
    """Serves ``root`` (the ``--out`` folder of ``ptkit index build``)."""

    daemon_threads = True

    def __init__(
        self, root: Path, host: str = "127.0.0.1", port: int = 0, *, allow_remote: bool = False
    ) -> None:
        if not allow_remote and not is_loopback(host):
            where = "every interface" if host in ("", "0.0.0.0", "::") else f"{host}"
            raise RemoteListenError(
                f"--host {host!r} listens on {where}, beyond this machine; an index is served "
                "on loopback (127.0.0.1) unless asked: pass --allow-remote to mean it"
            )
        handler = type("Handler", (_Handler,), {"root": root.resolve()})
        super().__init__((host, port), handler)

    @property
    def url(self) -> str:
        host, port = self.server_address[:2]
        return f"http://{host!s}:{port}"


@contextlib.contextmanager
def running_server(root: Path, host: str = "127.0.0.1", port: int = 0) -> Iterator[IndexServer]:
    """An ``IndexServer`` answering in a background thread for the ``with`` block."""
    server = IndexServer(root, host, port)
    # shutdown() waits for the serving loop's next poll (half a second by default): a short
    # poll lets the ``with`` block end as soon as its body does.
    thread = threading.Thread(target=server.serve_forever, args=(0.02,), daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()
