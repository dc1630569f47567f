"""`ptkit index build`: the pages, the variant rule, later additions, idempotence, atomic
replacement, concurrent runs, and refusals that write nothing.

Wheels here are small ones written by `support.make_wheel` (other projects, broken
wheels); the real ptkit wheels are indexed and installed in
tests/integration/test_index_install.py.
"""

from __future__ import annotations

import hashlib
import html.parser
import json
import os
import re
import subprocess
import sys
import threading
import zipfile
from pathlib import Path

import pytest
from packaging.version import Version
from support import REPO, make_wheel, python_env

from ptkit.index import IndexBuildError, build_index, inspect_wheel
from ptkit.recipes.model import load_recipe

RECIPES = REPO / "recipes"
# The command line from the source tree, as the unit tests use it.
SOURCE_ENV = python_env(PYTHONPATH=str(REPO / "src"))
TIME = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$")


def snapshot(folder: Path) -> dict[str, bytes | str]:
    """Every path under folder with its bytes (files) or target (symlinks)."""
    if not folder.exists():
        return {}
    result: dict[str, bytes | str] = {}
    for path in sorted(folder.rglob("*")):
        key = path.relative_to(folder).as_posix()
        if path.is_symlink():
            result[key] = "-> " + os.readlink(path)
        elif path.is_file():
            result[key] = path.read_bytes()
    return result


class Links(html.parser.HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.anchors: list[dict[str, str | None]] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "a":
            self.anchors.append(dict(attrs))


def anchors(page: Path) -> list[dict[str, str | None]]:
    parser = Links()
    parser.feed(page.read_text())
    return parser.anchors


def verify_variant_index(out: Path, index_path: str) -> dict[str, dict[str, object]]:
    """Check one variant's pages against its files; return the JSON entries by name."""
    simple = out / index_path / "simple"
    root = json.loads((simple / "index.json").read_text())
    assert root["meta"] == {"api-version": "1.1"}
    entries = {}
    for project in root["projects"]:
        name = project["name"]
        page = json.loads((simple / name / "index.json").read_text())
        assert page["meta"] == {"api-version": "1.1"}
        assert page["name"] == name
        links = {
            a["href"].split("#")[0].rsplit("/", 1)[1]: a
            for a in anchors(simple / name / "index.html")
        }
        assert set(links) == {f["filename"] for f in page["files"]}
        for f in page["files"]:
            file = out / index_path / "files" / f["filename"]
            data = file.read_bytes()
            assert f["hashes"] == {"sha256": hashlib.sha256(data).hexdigest()}
            assert f["size"] == len(data)
            assert TIME.match(f["upload-time"]), f["upload-time"]
            assert f["url"] == f"../../files/{f['filename']}"
            # the relative URL resolves to the file from the project page's folder
            assert (simple / name / f["url"]).resolve() == file.resolve()
            anchor = links[f["filename"]]
            assert anchor["href"] == f"{f['url']}#sha256={f['hashes']['sha256']}"
            if f["filename"].endswith(".whl") and "core-metadata" in f:
                metadata = (out / index_path / "files" / f"{f['filename']}.metadata").read_bytes()
                digest = hashlib.sha256(metadata).hexdigest()
                assert f["core-metadata"] == f["dist-info-metadata"] == {"sha256": digest}
                assert (
                    anchor["data-core-metadata"]
                    == anchor["data-dist-info-metadata"]
                    == f"sha256={digest}"
                )
                with zipfile.ZipFile(file) as archive:
                    inner = next(n for n in archive.namelist() if n.endswith(".dist-info/METADATA"))
                    assert archive.read(inner) == metadata
                assert anchor["data-requires-python"] == f["requires-python"]
            entries[f["filename"]] = f
        names = [f["filename"] for f in page["files"] if f["filename"].endswith(".whl")]
        assert page["versions"] == sorted({n.split("-")[1] for n in names}, key=Version)
    return entries


def test_pages_hashes_metadata_and_variant_from_the_manifest(tmp_path):
    wheels = [
        make_wheel(
            tmp_path / "in",
            "demo-kernels",
            "1.0+cu13",
            tag="py3-none-linux_x86_64",
            manifest_variant="cu13",
        ),
        make_wheel(
            tmp_path / "in",
            "demo-kernels",
            "1.0+cpu",
            tag="py3-none-linux_x86_64",
            manifest_variant="cpu",
        ),
        make_wheel(tmp_path / "in", "other", "2.0+cpu"),  # no manifest: its version label
    ]
    out = tmp_path / "site"
    results = build_index(wheels, out, recipes_dir=RECIPES)

    assert {(r.index_path, r.files) for r in results} == {
        ("cu13", ("demo_kernels-1.0+cu13-py3-none-linux_x86_64.whl",)),
        (
            "cpu",
            ("demo_kernels-1.0+cpu-py3-none-linux_x86_64.whl", "other-2.0+cpu-py3-none-any.whl"),
        ),
    }
    assert all(r.changed for r in results)
    cpu = verify_variant_index(out, "cpu")
    assert set(cpu) == {
        "demo_kernels-1.0+cpu-py3-none-linux_x86_64.whl",
        "other-2.0+cpu-py3-none-any.whl",
    }
    assert cpu["other-2.0+cpu-py3-none-any.whl"]["requires-python"] == ">=3.10"
    assert verify_variant_index(out, "cu13").keys() == {
        "demo_kernels-1.0+cu13-py3-none-linux_x86_64.whl"
    }
    # one index per variant: no +cpu file on the cu13 pages and the other way round
    assert "+cpu" not in (out / "cu13" / "simple" / "demo-kernels" / "index.html").read_text()
    assert (out / "cpu").is_symlink()
    assert json.loads((out / "cpu" / "simple" / "index.json").read_text())["projects"] == [
        {"name": "demo-kernels"},
        {"name": "other"},
    ]
    html_page = (out / "cpu" / "simple" / "other" / "index.html").read_text()
    assert 'data-requires-python="&gt;=3.10"' in html_page
    assert '<meta name="pypi:repository-version" content="1.1">' in html_page
    assert 'href="cpu/simple/"' in (out / "index.html").read_text()


def test_adding_wheels_later_keeps_the_existing_ones_and_their_upload_time(tmp_path, monkeypatch):
    out = tmp_path / "site"
    monkeypatch.setenv("SOURCE_DATE_EPOCH", "1700000000")
    first = make_wheel(tmp_path / "in", "alpha", "1.0+cpu")
    build_index([first], out, recipes_dir=RECIPES)
    before = verify_variant_index(out, "cpu")
    monkeypatch.setenv("SOURCE_DATE_EPOCH", "1800000000")
    second = make_wheel(tmp_path / "in", "alpha", "1.1+cpu")
    third = make_wheel(tmp_path / "in", "beta", "0.1+cpu")
    (result,) = build_index([second, third], out, recipes_dir=RECIPES)

    after = verify_variant_index(out, "cpu")
    assert set(after) == {first.name, second.name, third.name}
    assert result.added == tuple(sorted([second.name, third.name]))
    assert (
        after[first.name]["upload-time"]
        == before[first.name]["upload-time"]
        == "2023-11-14T22:13:20Z"
    )
    assert after[second.name]["upload-time"] == "2027-01-15T08:00:00Z"
    page = json.loads((out / "cpu" / "simple" / "alpha" / "index.json").read_text())
    assert page["versions"] == ["1.0+cpu", "1.1+cpu"]
    # the previous generation stays for readers still downloading; older ones go
    build_index([make_wheel(tmp_path / "in", "gamma", "1+cpu")], out, recipes_dir=RECIPES)
    assert len(list((out / ".generations" / "cpu").iterdir())) == 2


def test_rebuilding_with_the_same_wheels_changes_nothing(tmp_path):
    out = tmp_path / "site"
    wheels = [
        make_wheel(tmp_path / "in", "alpha", "1.0+cpu"),
        make_wheel(tmp_path / "in", "alpha", "1.0+cu13"),
    ]
    first = build_index(wheels, out, recipes_dir=RECIPES)
    before = snapshot(out)
    second = build_index(wheels, out, recipes_dir=RECIPES)
    assert snapshot(out) == before
    assert [r.changed for r in second] == [False, False]
    assert [r.generation for r in second] == [r.generation for r in first]
    assert [r.added for r in second] == [(), ()]


def test_a_reader_never_sees_half_an_index(tmp_path):
    """A reader resolves the page, then every file it links, while runs keep adding wheels."""
    out = tmp_path / "site"
    build_index([make_wheel(tmp_path / "in", "alpha", "0+cpu")], out, recipes_dir=RECIPES)
    stop = threading.Event()
    problems: list[str] = []
    failed_reads: list[Path] = []  # generations pruned under the reader (two swaps later)
    reads = 0

    def reader() -> None:
        nonlocal reads
        while not stop.is_set():
            generation = (out / "cpu").resolve()  # what one HTTP request would see
            try:
                page = json.loads((generation / "simple" / "alpha" / "index.json").read_text())
                for f in page["files"]:
                    data = (generation / "files" / f["filename"]).read_bytes()
                    if hashlib.sha256(data).hexdigest() != f["hashes"]["sha256"]:
                        problems.append(f"hash mismatch {f['filename']}")
            except (OSError, ValueError):
                failed_reads.append(generation)
            reads += 1

    thread = threading.Thread(target=reader)
    thread.start()
    try:
        for i in range(1, 16):
            build_index(
                [make_wheel(tmp_path / "in", "alpha", f"{i}+cpu")], out, recipes_dir=RECIPES
            )
    finally:
        stop.set()
        thread.join()
    assert problems == []
    # a read may fail only on a generation that was pruned afterwards, never on a live one
    assert [g for g in failed_reads if g.exists()] == []
    assert reads > 15
    assert len(verify_variant_index(out, "cpu")) == 16


def test_concurrent_runs_take_turns_and_keep_every_wheel(tmp_path):
    out = tmp_path / "site"
    batches = [
        [make_wheel(tmp_path / f"in{i}", f"proj{i}", f"{j}.0+cpu") for j in range(3)]
        for i in range(4)
    ]
    procs = [
        subprocess.Popen(
            [
                sys.executable,
                "-m",
                "ptkit",
                "index",
                "build",
                *map(str, batch),
                "--out",
                str(out),
                "--recipes",
                str(RECIPES),
            ],
            env=SOURCE_ENV,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for batch in batches
    ]
    outputs = [p.communicate(timeout=120) for p in procs]
    assert [p.returncode for p in procs] == [0, 0, 0, 0], outputs
    entries = verify_variant_index(out, "cpu")
    assert set(entries) == {w.name for batch in batches for w in batch}
    assert not list((out / ".generations" / "cpu").glob(".tmp-*"))


def _refused(tmp_path: Path, wheels: list[Path], *needles: str, out: Path | None = None) -> str:
    out = out or tmp_path / "site"
    before = snapshot(out)
    with pytest.raises(IndexBuildError) as caught:
        build_index(wheels, out, recipes_dir=RECIPES)
    message = str(caught.value)
    assert message.startswith("ptkit index build: ")
    for needle in needles:
        assert needle in message, message
    assert snapshot(out) == before, "a refused run wrote something"
    return message


@pytest.mark.parametrize(
    ("filename", "needle"),
    [
        ("ptkit-0.1.0.whl", "not a wheel file name"),
        ("not a wheel.whl", "not a wheel file name"),
        ("ptkit-0.1.0+cpu-py3-none.whl", "not a wheel file name"),
        ("ptkit-not@version-py3-none-any.whl", "not a wheel file name"),
    ],
)
def test_malformed_wheel_names_are_refused(tmp_path, filename, needle):
    good = make_wheel(tmp_path / "in", "alpha", "1.0+cpu")
    bad = make_wheel(tmp_path / "bad", "alpha", "1.0+cpu", filename=filename)
    _refused(tmp_path, [good, bad], needle, filename)


def test_wheels_that_contradict_their_names_are_refused(tmp_path):
    cases = [
        (
            make_wheel(tmp_path / "a", "alpha", "1.0+cpu", metadata_name="beta"),
            "METADATA names the project 'beta'",
        ),
        (
            make_wheel(tmp_path / "b", "alpha", "1.0+cpu", metadata_version="2.0+cpu"),
            "METADATA says version '2.0+cpu'",
        ),
        (
            make_wheel(
                tmp_path / "c", "alpha", "1.0+cpu", wheel_tags=("cp311-cp311-linux_x86_64",)
            ),
            "WHEEL file declares the tags",
        ),
        (
            make_wheel(tmp_path / "d", "alpha", "1.0+cpu", manifest_variant="cu13"),
            "its variant is 'cu13'",
        ),
        (
            make_wheel(tmp_path / "e", "alpha", "1.0", tag="py3-none-linux_x86_64"),
            "its variant is unknown",
        ),
    ]
    renamed = tmp_path / "f" / "alpha-1.0+cpu-py3-none-any.whl"
    renamed.parent.mkdir()
    make_wheel(tmp_path / "g", "beta", "1.0+cpu").rename(renamed)
    cases.append((renamed, "does not match the file name"))
    not_zip = tmp_path / "h" / "alpha-1.0+cpu-py3-none-any.whl"
    not_zip.parent.mkdir()
    not_zip.write_bytes(b"<html>proxy error</html>")
    cases.append((not_zip, "not a zip archive"))
    for wheel, needle in cases:
        _refused(tmp_path, [wheel], needle, str(wheel))


def test_path_tricks_are_refused(tmp_path):
    escaping = make_wheel(tmp_path / "a", "alpha", "1.0+cpu", extra={"../../evil.py": b"x"})
    _refused(tmp_path, [escaping], "'../../evil.py' would be written outside")
    absolute = make_wheel(tmp_path / "b", "alpha", "1.0+cpu", extra={"/etc/evil": b"x"})
    _refused(tmp_path, [absolute], "'/etc/evil'")
    variant = make_wheel(tmp_path / "c", "alpha", "1.0+cpu", manifest_variant="../../etc")
    _refused(tmp_path, [variant], "its variant '../../etc' is not a safe folder name")
    with pytest.raises(IndexBuildError, match="--base-url must be an http"):
        build_index(
            [make_wheel(tmp_path / "d", "alpha", "1.0+cpu")],
            tmp_path / "x",
            base_url="javascript:alert(1)",
        )
    assert not (tmp_path / "x").exists()


def test_a_published_file_name_never_gets_other_bytes(tmp_path):
    out = tmp_path / "site"
    original = make_wheel(tmp_path / "a", "alpha", "1.0+cpu")
    build_index([original], out, recipes_dir=RECIPES)
    changed = make_wheel(tmp_path / "b", "alpha", "1.0+cpu", extra={"alpha/more.py": b"changed"})
    _refused(
        tmp_path,
        [make_wheel(tmp_path / "c", "beta", "1.0+cpu"), changed],
        "alpha-1.0+cpu-py3-none-any.whl is already in the cpu index with other bytes",
        out=out,
    )
    clash = make_wheel(tmp_path / "d", "alpha", "9.0+cpu")
    other = make_wheel(tmp_path / "e", "alpha", "9.0+cpu", extra={"alpha/x.py": b"1"})
    _refused(tmp_path, [clash, other], "share the file name", out=out)


def test_a_foreign_folder_at_a_variant_path_is_not_replaced(tmp_path):
    out = tmp_path / "site"
    (out / "cpu" / "simple").mkdir(parents=True)
    (out / "cpu" / "simple" / "index.html").write_text("hand-made")
    _refused(
        tmp_path,
        [make_wheel(tmp_path / "a", "alpha", "1.0+cpu")],
        "is not an index generation link",
        out=out,
    )


def test_base_url_makes_absolute_links(tmp_path):
    out = tmp_path / "site"
    build_index(
        [make_wheel(tmp_path / "a", "alpha", "1.0+cpu")],
        out,
        base_url="https://example.org/ptkit/",
        recipes_dir=RECIPES,
    )
    page = json.loads((out / "cpu" / "simple" / "alpha" / "index.json").read_text())
    assert (
        page["files"][0]["url"]
        == "https://example.org/ptkit/cpu/files/alpha-1.0+cpu-py3-none-any.whl"
    )


def test_inspect_wheel_reads_the_variant_from_the_manifest(tmp_path):
    wheel = inspect_wheel(make_wheel(tmp_path, "alpha", "1.0+cu13", manifest_variant="cu13"))
    assert (wheel.variant, wheel.variant_source) == (
        "cu13",
        "manifest alpha/_native/lib.manifest.json",
    )
    assert (wheel.project, str(wheel.version)) == ("alpha", "1.0+cu13")


def test_cli_exit_codes_and_messages(tmp_path):
    good = make_wheel(tmp_path / "in", "alpha", "1.0+cpu")
    bad = make_wheel(tmp_path / "bad", "alpha", "1.0+cpu", filename="alpha.whl")
    cmd = [sys.executable, "-m", "ptkit", "index", "build", "--out", str(tmp_path / "site")]
    refused = subprocess.run(
        [*cmd, str(good), str(bad)], env=SOURCE_ENV, capture_output=True, text=True, check=False
    )
    assert refused.returncode == 1
    assert refused.stderr.startswith("ptkit index build: ")
    assert "Traceback" not in refused.stderr
    assert not (tmp_path / "site").exists()
    done = subprocess.run(
        [*cmd, str(good), "--json"], env=SOURCE_ENV, capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, done.stderr
    (result,) = json.loads(done.stdout)
    assert (result["index_path"], result["added"], result["changed"]) == ("cpu", [good.name], True)


# --- universal wheels: the toolkit in every variant's index ----------------------


def test_the_toolkit_wheel_goes_into_every_recipes_index(tmp_path):
    """ptkit-ops depends on ptkit: `pip install ptkit-ops --index-url <root>/<variant>/simple`
    must find ptkit on the same page, whichever variant."""
    toolkit = make_wheel(tmp_path / "in", "ptkit", "0.1.0")
    cpu = make_wheel(
        tmp_path / "in",
        "ptkit-ops",
        "0.1.0+cpu",
        tag="py3-none-linux_x86_64",
        manifest_variant="cpu",
    )
    cu13 = make_wheel(
        tmp_path / "in",
        "ptkit-ops",
        "0.1.0+cu13",
        tag="py3-none-linux_x86_64",
        manifest_variant="cu13",
    )
    assert inspect_wheel(toolkit).universal
    assert inspect_wheel(toolkit).variant_source.startswith("universal")
    out = tmp_path / "site"
    results = {r.index_path: r for r in build_index([toolkit, cpu, cu13], out, recipes_dir=RECIPES)}
    recipes = sorted(p.stem for p in RECIPES.glob("*.toml"))
    assert sorted(results) == sorted((load_recipe(v, RECIPES).index_path or v) for v in recipes)
    assert set(results["cpu"].files) == {cpu.name, toolkit.name}
    assert set(results["cu13"].files) == {cu13.name, toolkit.name}
    assert results["metal"].files == (toolkit.name,)  # no metal wheel yet: the toolkit waits
    assert results["metal"].variant == "metal"
    for index_path in results:
        entries = verify_variant_index(out, index_path)
        assert toolkit.name in entries
    page = json.loads((out / "cu13" / "simple" / "ptkit" / "index.json").read_text())
    assert [f["filename"] for f in page["files"]] == [toolkit.name]
    # Added later, a variant's wheel joins the toolkit already on its page.
    (metal,) = build_index(
        [make_wheel(tmp_path / "in", "ptkit-ops", "0.1.0+metal", manifest_variant="metal")],
        out,
        recipes_dir=RECIPES,
    )
    assert set(metal.files) == {toolkit.name, "ptkit_ops-0.1.0+metal-py3-none-any.whl"}


def test_without_recipes_a_universal_wheel_joins_the_indexes_there_are(tmp_path):
    out = tmp_path / "site"
    build_index([make_wheel(tmp_path / "in", "alpha", "1.0+cpu")], out)
    toolkit = make_wheel(tmp_path / "in", "ptkit", "0.1.0")
    results = build_index([toolkit, make_wheel(tmp_path / "in", "alpha", "1.0+cu13")], out)
    assert {r.index_path: r.files for r in results} == {
        "cu13": ("alpha-1.0+cu13-py3-none-any.whl", toolkit.name),
        "cpu": ("alpha-1.0+cpu-py3-none-any.whl", toolkit.name),
    }


def test_a_universal_wheel_with_no_index_to_join_is_refused(tmp_path):
    toolkit = make_wheel(tmp_path / "in", "ptkit", "0.1.0")
    out = tmp_path / "site"
    with pytest.raises(IndexBuildError) as caught:
        build_index([toolkit], out)
    assert "is a universal wheel (pure Python, no variant)" in str(caught.value)
    assert "pass the variants' wheels too, or --recipes DIR" in str(caught.value)
    assert not out.exists()


def test_variant_metadata_leaves_the_universal_wheel_alone(tmp_path):
    pytest.importorskip(
        "variantlib", reason="variantlib is not installed: pip install variantlib==0.2.2"
    )
    toolkit = make_wheel(tmp_path / "in", "ptkit", "0.1.0")
    cu13 = make_wheel(
        tmp_path / "in",
        "ptkit-ops",
        "0.1.0+cu13",
        tag="py3-none-manylinux_2_28_x86_64",
        manifest_variant="cu13",
    )
    out = tmp_path / "site"
    results = build_index([toolkit, cu13], out, recipes_dir=RECIPES, variant_metadata=True)
    cu13_index = next(r for r in results if r.index_path == "cu13")
    assert set(cu13_index.files) == {
        toolkit.name,
        cu13.name,
        cu13.name.removesuffix(".whl") + "-cu13.whl",
        "ptkit_ops-0.1.0+cu13-variants.json",
    }


# --- torch-mode variants: one build per torch minor on the variant's page ---------------------

TORCH_MODE_RECIPES = REPO / "tests" / "fixtures" / "projects" / "torchmode_ops" / "recipes"


def torch_build_wheel(folder: Path, label: str, requires: tuple[str, ...]) -> Path:
    """A wheel of torchmode-ops labelled ``label``, requiring ``requires``."""
    version = f"0.3.0+{label}"
    metadata = (
        f"Metadata-Version: 2.4\nName: torchmode-ops\nVersion: {version}\n"
        "Requires-Python: >=3.10\n" + "".join(f"Requires-Dist: {r}\n" for r in requires)
    )
    return make_wheel(
        folder,
        "torchmode-ops",
        version,
        tag="py3-none-manylinux_2_28_x86_64",
        manifest_variant="cpu",
        extra={f"torchmode_ops-{version}.dist-info/METADATA": metadata.encode()},
    )


def test_every_torch_minor_build_shares_the_variant_page(tmp_path):
    wheels = [
        torch_build_wheel(tmp_path / "in", "cpu.torch2.13", ("torch<2.14,>=2.13",)),
        torch_build_wheel(tmp_path / "in", "cpu.torch2.14", ("ptkit>=0.1", "torch>=2.14,<2.15")),
    ]
    (result,) = build_index(wheels, tmp_path / "site", recipes_dir=TORCH_MODE_RECIPES)
    assert result.index_path == "cpu"
    assert set(result.files) == {w.name for w in wheels}
    entries = verify_variant_index(tmp_path / "site", "cpu")
    assert set(entries) == {w.name for w in wheels}


def test_a_torch_minor_the_recipe_does_not_build_is_refused(tmp_path):
    wheel = torch_build_wheel(tmp_path / "in", "cpu.torch2.12", ("torch>=2.12,<2.13",))
    with pytest.raises(IndexBuildError) as info:
        build_index([wheel], tmp_path / "site", recipes_dir=TORCH_MODE_RECIPES)
    message = str(info.value)
    assert (
        "has the local label 'cpu.torch2.12', expected 'cpu.torch2.13' or 'cpu.torch2.14'"
        in message
    )
    assert "(a torch-mode recipe: one label per torch minor of [torch] versions)" in message
    assert not (tmp_path / "site").exists()


def test_a_torch_minor_build_without_its_pin_is_refused(tmp_path):
    """A wheel labelled for torch 2.14 that claims every torch would install beside torch
    2.13, where its library does not load."""
    for requires, found in [
        (("torch>=2.10",), "requires torch>=2.10"),
        ((), "requires no torch"),
    ]:
        wheel = torch_build_wheel(tmp_path / str(len(requires)), "cpu.torch2.14", requires)
        with pytest.raises(IndexBuildError) as info:
            inspect_wheel(wheel)
        message = str(info.value)
        assert f"names a build for torch 2.14, but it {found}, not torch>=2.14,<2.15" in message
        assert "Rebuild it with ptkit build --torch" in message


def test_without_recipes_a_torch_minor_label_keeps_its_variant(tmp_path):
    wheel = torch_build_wheel(tmp_path / "in", "cpu.torch2.14", ("torch>=2.14,<2.15",))
    assert inspect_wheel(wheel).variant == "cpu"
    (result,) = build_index([wheel], tmp_path / "site")
    assert result.index_path == "cpu"


def test_a_second_spelling_of_a_published_release_is_refused(tmp_path):
    """pip sees PTKIT-0.1.0+cpu and ptkit-0.1.0.0+cpu as ptkit 0.1.0+cpu: one file per
    (name, version, tags), whatever the bytes."""
    out = tmp_path / "site"
    build_index([make_wheel(tmp_path / "a", "alpha", "1.0+cpu")], out, recipes_dir=RECIPES)
    for folder, spelling in (
        ("b", "ALPHA-1.0+cpu-py3-none-any.whl"),
        ("c", "alpha-1.0.0+cpu-py3-none-any.whl"),
    ):
        respelt = make_wheel(tmp_path / folder, "alpha", "1.0+cpu", filename=spelling)
        _refused(
            tmp_path,
            [respelt],
            f"{spelling} and alpha-1.0+cpu-py3-none-any.whl are one release to installers",
            out=out,
        )


def test_a_killed_runs_half_written_generation_is_removed_by_the_next(tmp_path):
    out = tmp_path / "site"
    build_index([make_wheel(tmp_path / "a", "alpha", "1.0+cpu")], out, recipes_dir=RECIPES)
    stale = out / ".generations" / "cpu" / ".tmp-killed"
    (stale / "files").mkdir(parents=True)
    (stale / "files" / "big.whl").write_bytes(b"x" * 1000)
    build_index([make_wheel(tmp_path / "b", "beta", "1.0+cpu")], out, recipes_dir=RECIPES)
    assert not stale.exists()


@pytest.mark.parametrize(
    ("entry", "needle"),
    [
        ("C:/evil.py", "'C:/evil.py' would be written outside the install folder"),
        ("alpha/link", "'alpha/link' is a symbolic link, not a file"),
        ("alpha/fifo", "'alpha/fifo' is a device or other special file"),
    ],
)
def test_hostile_archive_entries_are_refused(tmp_path, entry, needle):
    import stat
    import zipfile

    wheel = make_wheel(tmp_path / "a", "alpha", "1.0+cpu")
    with zipfile.ZipFile(wheel, "a") as archive:
        info = zipfile.ZipInfo(entry)
        if entry.endswith("link"):
            info.external_attr = (stat.S_IFLNK | 0o777) << 16
        elif entry.endswith("fifo"):
            info.external_attr = (stat.S_IFIFO | 0o644) << 16
        archive.writestr(info, "/lib/x86_64-linux-gnu/libc.so.6")
    _refused(tmp_path, [wheel], needle)


def test_a_duplicated_metadata_entry_is_refused(tmp_path):
    import warnings
    import zipfile

    wheel = make_wheel(tmp_path / "a", "alpha", "1.0+cpu")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # zipfile warns of the duplicate it writes
        with zipfile.ZipFile(wheel, "a") as archive:
            archive.writestr("alpha-1.0+cpu.dist-info/METADATA", "Requires-Dist: injected\n")
    _refused(tmp_path, [wheel], "holds 'alpha-1.0+cpu.dist-info/METADATA' twice")


def test_metadata_that_inflates_beyond_the_limit_is_refused_before_it_is_read(tmp_path):
    import zipfile

    wheel = make_wheel(tmp_path / "a", "alpha", "1.0+cpu")
    bloated = tmp_path / "b" / wheel.name
    bloated.parent.mkdir()
    with (
        zipfile.ZipFile(wheel) as source,
        zipfile.ZipFile(bloated, "w", zipfile.ZIP_DEFLATED) as out,
    ):
        for info in source.infolist():
            if info.filename.endswith("METADATA"):
                out.writestr(info.filename, source.read(info) + b"\n" * (8 << 20))
            else:
                out.writestr(info, source.read(info))
    assert bloated.stat().st_size < 1 << 20
    _refused(tmp_path, [bloated], "METADATA inflates to more than 4194304 bytes")
