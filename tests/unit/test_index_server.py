"""`ptkit index serve`: PEP 691 content negotiation, redirects, and nothing outside the root."""

from __future__ import annotations

import json
import urllib.error
import urllib.parse
import urllib.request

import pytest
from support import REPO, make_wheel

from ptkit.index import build_index, negotiate, running_server

JSON = "application/vnd.pypi.simple.v1+json"
HTML = "application/vnd.pypi.simple.v1+html"
# What pip 26.3 and uv 0.13.8 send, captured on this machine with a listening socket.
PIP_ACCEPT = f"{JSON}, {HTML}; q=0.1, text/html; q=0.01"
UV_ACCEPT = f"{JSON}, {HTML};q=0.2, text/html;q=0.01"


@pytest.mark.parametrize(
    ("accept", "served"),
    [
        (PIP_ACCEPT, JSON),
        (UV_ACCEPT, JSON),
        (None, "text/html"),
        ("text/html", "text/html"),
        ("*/*", "text/html"),
        (f"{HTML}, {JSON};q=0.5", HTML),
        ("application/vnd.pypi.simple.latest+json", JSON),
        (f"{JSON};q=0, text/html;q=0.1", "text/html"),
        ("application/xml", None),
        (f"{JSON};q=abc", None),
    ],
)
def test_negotiate(accept, served):
    assert negotiate(accept) == served


def get(url: str, accept: str | None = None, method: str = "GET"):
    request = urllib.request.Request(
        url, method=method, headers={"Accept": accept} if accept else {}
    )
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status, dict(response.headers), response.read()
    except urllib.error.HTTPError as error:
        return error.code, dict(error.headers), error.read()


def test_server_answers_html_and_json_for_the_same_url(tmp_path):
    out = tmp_path / "site"
    wheel = make_wheel(tmp_path / "in", "alpha", "1.0+cpu")
    build_index([wheel], out, recipes_dir=REPO / "recipes")
    with running_server(out) as server:
        base = f"{server.url}/cpu/simple/alpha/"
        status, headers, body = get(base, PIP_ACCEPT)
        assert (status, headers["Content-Type"], headers["Vary"]) == (200, JSON, "Accept")
        assert json.loads(body)["files"][0]["filename"] == wheel.name
        status, headers, body = get(base)
        assert (status, headers["Content-Type"]) == (200, "text/html; charset=utf-8")
        assert body.startswith(b"<!DOCTYPE html>")
        status, headers, _ = get(base, HTML)
        assert headers["Content-Type"] == HTML
        status, headers, body = get(base + "?format=" + urllib.parse.quote(JSON), "text/html")
        assert headers["Content-Type"] == JSON
        status, _, body = get(base, "application/xml")
        assert status == 406
        assert b"application/vnd.pypi.simple.v1+json" in body
        # a folder without its slash is redirected, as PEP 503 asks
        request = urllib.request.Request(base.rstrip("/"))
        with urllib.request.urlopen(request, timeout=10) as response:
            assert response.url == base
        # files: the wheel and its PEP 658 metadata, byte for byte
        status, headers, body = get(f"{server.url}/cpu/files/{wheel.name}")
        assert (status, body) == (200, wheel.read_bytes())
        status, _, body = get(f"{server.url}/cpu/files/{wheel.name}.metadata")
        assert body.startswith(b"Metadata-Version: 2.4\nName: alpha")
        status, headers, body = get(f"{server.url}/cpu/files/{wheel.name}", method="HEAD")
        assert (status, int(headers["Content-Length"]), body) == (200, wheel.stat().st_size, b"")


def test_server_never_serves_outside_its_root(tmp_path):
    out = tmp_path / "site"
    out.mkdir()
    (tmp_path / "secret.txt").write_text("secret")
    (out / "link").symlink_to(tmp_path / "secret.txt")
    with running_server(out) as server:
        for path in ("/../secret.txt", "/%2e%2e/secret.txt", "/link", "/cpu/../../secret.txt"):
            status, _, body = get(server.url + path)
            assert status == 404, path
            assert b"secret" not in body
        assert get(server.url + "/missing/")[0] == 404


def test_only_what_the_index_publishes_is_served(tmp_path):
    out = tmp_path / "site"
    wheel = make_wheel(tmp_path / "in", "alpha", "1.0+cpu")
    build_index([wheel], out, recipes_dir=REPO / "recipes")
    (out / ".generations" / "cpu" / ".tmp-half").mkdir()
    generation = next(p for p in (out / ".generations" / "cpu").iterdir() if p.name != ".tmp-half")
    with running_server(out) as server:
        assert get(f"{server.url}/cpu/files/{wheel.name}")[0] == 200
        for path in (
            "/.ptkit-index.lock",
            "/.generations/",
            f"/.generations/cpu/{generation.name}/simple/",
            "/.generations/cpu/.tmp-half/",
            "/cpu/.hidden",
        ):
            assert get(server.url + path)[0] == 404, path


def test_malformed_paths_get_a_400_not_a_dropped_connection(tmp_path):
    out = tmp_path / "site"
    build_index(
        [make_wheel(tmp_path / "in", "alpha", "1.0+cpu")], out, recipes_dir=REPO / "recipes"
    )
    with running_server(out) as server:
        assert get(server.url + "/cpu/simple/%00/")[0] == 400
        assert get(server.url + "/cpu/" + "a" * 300 + "/")[0] == 400
        assert get(server.url + "/cpu/simple/")[0] == 200  # and the server still answers


def test_format_parameter_is_read_as_pep_691_writes_it(tmp_path):
    out = tmp_path / "site"
    build_index(
        [make_wheel(tmp_path / "in", "alpha", "1.0+cpu")], out, recipes_dir=REPO / "recipes"
    )
    with running_server(out) as server:
        base = f"{server.url}/cpu/simple/alpha/"
        status, headers, _ = get(f"{base}?format={JSON}")  # a literal '+'
        assert (status, headers["Content-Type"]) == (200, JSON)
        status, headers, _ = get(f"{base}?format={urllib.parse.quote(HTML)}")
        assert (status, headers["Content-Type"]) == (200, HTML)
        assert get(f"{base}?format=application/xml")[0] == 406


def test_files_are_streamed_not_read_whole(tmp_path, monkeypatch):
    out = tmp_path / "site"
    wheel = make_wheel(
        tmp_path / "in", "alpha", "1.0+cpu", extra={"alpha/big.bin": b"\0" * (3 << 20)}
    )
    build_index([wheel], out, recipes_dir=REPO / "recipes")

    def no_whole_reads(self, *args, **kwargs):
        raise AssertionError("Path.read_bytes: the server must stream")

    monkeypatch.setattr("pathlib.Path.read_bytes", no_whole_reads)
    with running_server(out) as server:
        status, headers, body = get(f"{server.url}/cpu/files/{wheel.name}")
    assert status == 200 and len(body) == int(headers["Content-Length"]) == wheel.stat().st_size


def test_listening_beyond_loopback_needs_allow_remote(tmp_path):
    from ptkit.index.server import IndexServer, RemoteListenError

    for host in ("", "0.0.0.0"):
        with pytest.raises(RemoteListenError, match="pass --allow-remote"):
            IndexServer(tmp_path, host, 0)
    server = IndexServer(tmp_path, "", 0, allow_remote=True)
    server.server_close()
