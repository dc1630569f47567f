"""Every fenced code block of README.md and docs/*.md, run as written, so that what the
pages tell a person to type can never silently stop working.

How each kind of block is run:

- ``bash``: command by command (a line; ``\\`` continues it), each in its own ``bash`` with
  ``set -eo pipefail`` and the previous command's working folder and environment, so
  ``cd`` and ``source …/activate`` carry over as in a person's shell. Two contexts:

  * a user's machine (the default): an empty scratch folder holding this run's wheels
    under ``dist/``, and a fresh venv first on PATH that holds torch and what ptkit's
    packages need from PyPI (.venv's: click, the build tools), but no ptkit.
    ``<index>`` is a real index built from this run's wheels (``ptkit index build``) and
    served on 127.0.0.1 (``ptkit index serve``); torch's own index
    (``https://download.pytorch.org/whl/…``) is not reachable from the tests, so it is
    replaced by a local address that has nothing (torch is in the venv already); pip's
    default index is such an address too, so nothing reaches the network.
  * a checkout (``<!-- docs-test: checkout -->`` before the block): a copy of this
    repository's tracked files with its ``.venv``, ``.toolchains`` and this run's
    wheels in ``dist/``.

  A command that ``ptkit index serve``s runs until the index answers, then is stopped.
  The commands CI itself runs (``make demo``, ``make test`` and what ``make test``
  runs: ``make test`` runs this very test) are not run again: the test checks that
  ``.ci/run`` runs them.
- ``python``: in a child Python with the installed wheels (.venv), in a scratch folder;
  ``<!-- docs-test: as mypkg/__init__.py, with mypkg/_native/ -->`` writes the block to
  that file (and makes the folders named after ``with``) and imports the package.
- ``toml``: parsed.
- ``cmake``: a signature (it has ``<…>``, ``[…]`` or ``…``) must name a function that
  ``src/ptkit/cmake`` defines and only keywords that function parses; a complete
  block is configured, after ``project()`` and ``find_package(ptkit)``, in a small
  project holding empty files for the sources it names.
- ``text``: a diagram; nothing to run.

``<!-- docs-test: covered by tests/x.py::test_y -->`` before a block (or
``<!-- docs-test: "<command>" covered by tests/x.py::test_y -->`` for one of its
commands) hands it to that test, which must exist: nothing is skipped silently.
"""

from __future__ import annotations

import dataclasses
import os
import re
import shutil
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
import tomllib
from support import REPO, cmake_configure, env_holding_packages_of, python_env, run

pytestmark = pytest.mark.integration

VENV_BIN = Path(sys.executable).parent
PAGES = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
LANGUAGES = ("bash", "python", "toml", "cmake", "text")

# The commands CI runs itself, and where: (file, a regular expression of its text).
CI_COMMANDS = {
    "make demo": (".ci/run", r"(?m)^make demo$"),
    "make test": (".ci/run", r"(?m)^make test$"),
    "make wheel VARIANT=cu13": ("scripts/test", r"wheel VARIANT=cu13"),
}
# `ptkit index serve` with no --port listens here.
SERVE_DEFAULT_URL = "http://127.0.0.1:8000"
TORCH_INDEX = re.compile(r"https://download\.pytorch\.org/whl/[\w.]+")
NOTHING_HERE = "nothing-here"  # a path of the local index that serves no project


@dataclasses.dataclass(frozen=True)
class Block:
    page: Path
    line: int  # of the opening fence
    language: str
    code: str
    directive: str  # the text of a `<!-- docs-test: … -->` just before it, or ""

    @property
    def where(self) -> str:
        return f"{self.page.relative_to(REPO)}:{self.line}"

    def commands(self) -> list[str]:
        """The block's commands: one a line (``\\`` continues one), comments dropped."""
        joined = re.sub(r"\\\n\s*", " ", self.code)
        found = []
        for raw in joined.splitlines():
            command = re.sub(r"\s+#\s.*$", "", raw).strip()
            if command and not command.startswith("#"):
                found.append(command)
        return found

    def covered_by(self) -> dict[str | None, str]:
        """``{command or None (the whole block): test node id}`` from the directive."""
        match = re.fullmatch(
            r'(?:"(?P<command>[^"]+)"\s+)?covered by\s+(?P<test>\S+)', self.directive
        )
        if not match:
            return {}
        return {match.group("command"): match.group("test")}


def read_blocks(page: Path) -> list[Block]:
    blocks = []
    lines = page.read_text(encoding="utf-8").splitlines()
    directive, index = "", 0
    while index < len(lines):
        line = lines[index]
        comment = re.fullmatch(r"\s*<!--\s*docs-test:\s*(.*?)\s*-->\s*", line)
        if comment:
            directive = comment.group(1)
        elif line.startswith("```"):
            language, start = line[3:].strip(), index
            end = next(i for i in range(index + 1, len(lines)) if lines[i].startswith("```"))
            code = "\n".join(lines[index + 1 : end]) + "\n"
            blocks.append(Block(page, start + 1, language, code, directive))
            directive, index = "", end
        elif line.strip():
            directive = ""  # a directive belongs to the block right after it
        index += 1
    return blocks


BLOCKS = [block for page in PAGES for block in read_blocks(page)]


def blocks_of(language: str) -> list[pytest.param]:  # type: ignore[valid-type]
    return [pytest.param(b, id=b.where) for b in BLOCKS if b.language == language]


def test_every_block_is_of_a_kind_this_test_runs() -> None:
    unknown = [
        f"{b.where} ({b.language or 'no language'})" for b in BLOCKS if b.language not in LANGUAGES
    ]
    assert not unknown, f"fenced blocks this test cannot run (name one of {LANGUAGES}): {unknown}"
    assert len([b for b in BLOCKS if b.language != "text"]) >= 15, "the pages lost their examples?"


def test_each_directive_names_a_test_that_exists() -> None:
    for block in BLOCKS:
        for command, node in block.covered_by().items():
            if command is not None:
                assert command in block.commands(), f"{block.where}: no command {command!r}"
            path, _, name = node.partition("::")
            test_file = REPO / path
            assert test_file.is_file(), f"{block.where}: {node}: no file {path}"
            function = name.split("[")[0]
            assert re.search(rf"(?m)^def {re.escape(function)}\(", test_file.read_text()), (
                f"{block.where}: {node}: {path} has no test {function}"
            )


def test_the_readme_links_a_page_for_each_quickstart_and_every_linked_page_exists() -> None:
    readme = (REPO / "README.md").read_text()
    for page in ("docs/using.md", "docs/extending.md", "docs/releasing.md"):
        assert page in readme, f"README.md does not link {page}"
    for page in PAGES:
        for linked in re.findall(r"`(docs/[\w-]+\.md)`|\]\((docs/[\w-]+\.md)\)", page.read_text()):
            target = REPO / (linked[0] or linked[1])
            assert target.is_file(), (
                f"{page.name} links {target.relative_to(REPO)}, which is missing"
            )


# --- bash ---------------------------------------------------------------------------


@pytest.fixture(scope="module")
def wheels(toolkit_wheel: Path, ptkit_wheel: Path, cu13_wheel: Path) -> dict[str, Path]:
    return {"toolkit": toolkit_wheel, "cpu": ptkit_wheel, "cu13": cu13_wheel}


@pytest.fixture(scope="module")
def index_url(tmp_path_factory: pytest.TempPathFactory, wheels: dict[str, Path]) -> Iterator[str]:
    """``<index>``: this run's wheels indexed and served on a free loopback port."""
    site = tmp_path_factory.mktemp("docs-index") / "site"
    ptkit = str(VENV_BIN / "ptkit")
    chosen = [str(wheels[k]) for k in ("toolkit", "cpu", "cu13")]
    run([ptkit, "index", "build", *chosen, "--out", str(site)], env=python_env())
    proc = subprocess.Popen(
        [ptkit, "index", "serve", str(site), "--port", "0"],
        env=python_env(),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert proc.stderr is not None
    line = proc.stderr.readline()
    match = re.search(r"at (http://127\.0\.0\.1:\d+)/", line)
    assert match, f"ptkit index serve said {line!r}"
    yield match.group(1)
    proc.terminate()
    proc.wait(timeout=10)


def _system_path() -> str:
    """PATH without this test's venv: a command must find what the page installs."""
    keep = [
        p
        for p in os.environ.get("PATH", "").split(os.pathsep)
        if p and Path(p).resolve() != VENV_BIN.resolve()
    ]
    return os.pathsep.join(keep)


def _copy_wheels(wheels: dict[str, Path], folder: Path) -> None:
    for variant, wheel in wheels.items():
        (folder / "dist" / variant).mkdir(parents=True, exist_ok=True)
        shutil.copy2(wheel, folder / "dist" / variant / wheel.name)


def _user_machine(
    tmp_path: Path, wheels: dict[str, Path], index_url: str
) -> tuple[Path, dict[str, str]]:
    python = env_holding_packages_of(tmp_path / "venv", Path(sys.executable))
    bin_dir = python.parent
    # That venv has pip's package but not its script (it was made --without-pip).
    (bin_dir / "pip").write_text(f'#!/bin/sh\nexec "{python}" -m pip "$@"\n')
    (bin_dir / "pip").chmod(0o755)
    uv = shutil.which("uv", path=str(VENV_BIN))
    assert uv, "uv is missing from .venv (requirements/dev.txt pins it)"
    (bin_dir / "uv").symlink_to(uv)
    work = tmp_path / "work"
    work.mkdir()
    _copy_wheels(wheels, work)
    nothing = f"{index_url}/{NOTHING_HERE}/"
    env = python_env(
        PATH=f"{bin_dir}{os.pathsep}{_system_path()}",
        VIRTUAL_ENV=str(python.parent.parent),
        PIP_CONFIG_FILE=os.devnull,
        PIP_INDEX_URL=nothing,
        PIP_DISABLE_PIP_VERSION_CHECK="1",
        UV_NO_CONFIG="1",
        UV_DEFAULT_INDEX=nothing,
    )
    return work, env


def _checkout(tmp_path: Path, wheels: dict[str, Path]) -> tuple[Path, dict[str, str]]:
    work = tmp_path / "checkout"
    tracked = run(["git", "-C", str(REPO), "ls-files", "-z"]).stdout.split("\0")
    for name in filter(None, tracked):
        source, target = REPO / name, work / name
        target.parent.mkdir(parents=True, exist_ok=True)
        if source.is_symlink():
            target.symlink_to(os.readlink(source))
        elif source.is_file():
            shutil.copy2(source, target)
    for made in (".venv", ".toolchains"):
        if (REPO / made).exists():
            (work / made).symlink_to((REPO / made).resolve())
    _copy_wheels(wheels, work)
    return work, python_env(PATH=_system_path())


def _substitute(command: str, index_url: str) -> str:
    command = command.replace("<index>", index_url)
    return TORCH_INDEX.sub(f"{index_url}/{NOTHING_HERE}", command)


def _run_command(
    command: str, cwd: Path, env: dict[str, str], state: Path, where: str
) -> tuple[Path, dict[str, str]]:
    """One command in bash; returns the working folder and environment it left."""
    script = f'set -eo pipefail\n{command}\npwd > "{state}/cwd"\nenv -0 > "{state}/env"\n'
    proc = subprocess.run(
        ["bash", "-c", script],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert proc.returncode == 0, (
        f"{where}: `{command}` exited with {proc.returncode}\n--- stdout ---\n{proc.stdout}\n"
        f"--- stderr ---\n{proc.stderr}"
    )
    left = dict(
        item.split("=", 1) for item in (state / "env").read_text().split("\0") if "=" in item
    )
    return Path((state / "cwd").read_text().strip()), left


def _run_server(command: str, cwd: Path, env: dict[str, str], where: str) -> None:
    """A command that serves the index: until it answers, then stopped."""
    log = cwd / "serve.log"
    with log.open("w") as out:
        proc = subprocess.Popen(
            ["bash", "-c", f"set -eo pipefail\n{command}"],
            cwd=cwd,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    page = f"{SERVE_DEFAULT_URL}/cpu/simple/ptkit-ops/"
    try:
        deadline, body = time.monotonic() + 60, ""
        while time.monotonic() < deadline and proc.poll() is None:
            try:
                with urllib.request.urlopen(page, timeout=5) as response:
                    body = response.read().decode()
                    break
            except (urllib.error.URLError, ConnectionError):
                time.sleep(0.5)
        assert body, f"{where}: `{command}` did not serve {page} within 60 s:\n{log.read_text()}"
        assert "ptkit_ops-0.1.0+cpu" in body, f"{where}: {page} lists no cpu wheel:\n{body}"
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout=10)


@pytest.fixture(scope="module")
def contexts() -> dict[tuple[Path, str], tuple[Path, dict[str, str]]]:
    """One context per page and kind, made on first use: a page's blocks run in order
    in the same shell state, as a person reads it top to bottom."""
    return {}


def _context(
    contexts: dict[tuple[Path, str], tuple[Path, dict[str, str]]],
    block: Block,
    kind: str,
    tmp_path_factory: pytest.TempPathFactory,
    wheels: dict[str, Path],
    index_url: str,
) -> tuple[Path, dict[str, str]]:
    key = (block.page, kind)
    if key not in contexts:
        folder = tmp_path_factory.mktemp(f"docs-{block.page.stem}-{kind}")
        if kind == "checkout":
            contexts[key] = _checkout(folder, wheels)
        else:
            contexts[key] = _user_machine(folder, wheels, index_url)
    return contexts[key]


def _changed_tracked_files(checkout: Path) -> list[str]:
    tracked = run(["git", "-C", str(REPO), "ls-files", "-z"]).stdout.split("\0")
    return [
        name
        for name in filter(None, tracked)
        if (REPO / name).is_file()
        and not (REPO / name).is_symlink()
        and (checkout / name).read_bytes() != (REPO / name).read_bytes()
    ]


@pytest.mark.parametrize("block", blocks_of("bash"))
def test_bash_block(
    block: Block,
    contexts: dict[tuple[Path, str], tuple[Path, dict[str, str]]],
    tmp_path_factory: pytest.TempPathFactory,
    wheels: dict[str, Path],
    index_url: str,
) -> None:
    covered = block.covered_by()
    if None in covered:
        return  # the whole block is another test's (test_each_directive_names_a_test_that_exists)
    kind = "checkout" if block.directive == "checkout" else "user"
    assert kind == "checkout" or not block.directive or covered, (
        f"{block.where}: unknown directive {block.directive!r}"
    )
    cwd, env = _context(contexts, block, kind, tmp_path_factory, wheels, index_url)
    state = tmp_path_factory.mktemp("state")
    for command in block.commands():
        if command in covered:
            continue
        if command in CI_COMMANDS:
            file, pattern = CI_COMMANDS[command]
            text = (REPO / file).read_text()
            assert re.search(pattern, text), f"{block.where}: {file} does not run `{command}`"
            continue
        command = _substitute(command, index_url)
        if "ptkit index serve" in command:
            _run_server(command, cwd, env, block.where)
        else:
            cwd, env = _run_command(command, cwd, env, state, block.where)
    contexts[(block.page, kind)] = (cwd, env)
    if kind == "checkout":
        root = _context(contexts, block, kind, tmp_path_factory, wheels, index_url)[0]
        changed = _changed_tracked_files(root)
        assert not changed, f"{block.where}: the commands changed tracked files: {changed}"


def test_ci_runs_the_readmes_two_commands_and_make_test_runs_the_cu13_build() -> None:
    """What the bash blocks leave to CI is really CI's: checked once, on its own."""
    for command, (file, pattern) in CI_COMMANDS.items():
        assert re.search(pattern, (REPO / file).read_text()), f"{file} does not run `{command}`"
    assert re.search(r"(?m)^test:\n\t@scripts/test$", (REPO / "Makefile").read_text())


# --- python -------------------------------------------------------------------------


@pytest.mark.parametrize("block", blocks_of("python"))
def test_python_block(block: Block, tmp_path: Path) -> None:
    if None in block.covered_by():
        return
    code = block.code
    if block.directive:
        match = re.fullmatch(
            r"as (?P<file>[\w/]+\.py)(?:, with (?P<dirs>[\w/ ,]+))?", block.directive
        )
        assert match, f"{block.where}: unknown directive {block.directive!r}"
        target = tmp_path / match.group("file")
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(code)
        for folder in (match.group("dirs") or "").replace(",", " ").split():
            (tmp_path / folder).mkdir(parents=True, exist_ok=True)
        package = match.group("file").split("/")[0].removesuffix(".py")
        code = f"import {package}\nprint('imported', {package}.__name__)\n"
    proc = subprocess.run(
        [sys.executable, "-c", code],
        cwd=tmp_path,
        env=python_env(PYTHONPATH=str(tmp_path)),
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert proc.returncode == 0, f"{block.where}: the block fails:\n{proc.stdout}\n{proc.stderr}"


# --- toml ---------------------------------------------------------------------------


@pytest.mark.parametrize("block", blocks_of("toml"))
def test_toml_block(block: Block) -> None:
    try:
        data = tomllib.loads(block.code)
    except tomllib.TOMLDecodeError as exc:
        pytest.fail(f"{block.where}: not TOML: {exc}")
    from ptkit.loading.packages import ENTRY_POINT_GROUP

    groups = data.get("project", {}).get("entry-points", {})
    for group in groups:
        assert not group.startswith("ptkit.") or group == ENTRY_POINT_GROUP, (
            f"{block.where}: ptkit reads the entry-point group {ENTRY_POINT_GROUP!r}, not {group!r}"
        )


# --- cmake --------------------------------------------------------------------------

CMAKE_DIR = REPO / "src" / "ptkit" / "cmake"


def _cmake_functions() -> dict[str, str]:
    """Each function or macro src/ptkit/cmake defines: its name and its body."""
    found = {}
    for path in CMAKE_DIR.glob("*.cmake"):
        text = path.read_text()
        for match in re.finditer(
            r"(?ims)^\s*(?:function|macro)\((\w+).*?^\s*end(?:function|macro)\(", text
        ):
            found[match.group(1).lower()] = match.group(0)
    return found


def _is_signature(code: str) -> bool:
    return bool(re.search(r"<\w[^>]*>|\[[A-Z_]+|…", code))


@pytest.mark.parametrize("block", blocks_of("cmake"))
def test_cmake_block(block: Block, tmp_path: Path) -> None:
    functions = _cmake_functions()
    called = {m.lower() for m in re.findall(r"(?m)^\s*(ptkit_\w+)\s*\(", block.code)}
    missing = sorted(called - functions.keys())
    assert not missing, f"{block.where}: src/ptkit/cmake defines no {missing}"
    if _is_signature(block.code):
        (name,) = called
        body = functions[name]
        keywords = set(re.findall(r"\b([A-Z][A-Z_]{2,})\b", block.code))
        unknown = sorted(k for k in keywords if not re.search(rf"\b{k}\b", body))
        assert not unknown, f"{block.where}: {name} parses no {unknown}"
        return
    source = tmp_path / "project"
    source.mkdir()
    for name in set(re.findall(r"\b[\w/]+\.(?:cpp|cu|hip|h|metal)\b", block.code)):
        (source / name).parent.mkdir(parents=True, exist_ok=True)
        (source / name).write_text("")
    for folder in re.findall(r"INCLUDE_DIRS\s+(\w+)|PRIVATE\s+(include)\b", block.code):
        (source / (folder[0] or folder[1])).mkdir(exist_ok=True)
    prelude = "cmake_minimum_required(VERSION 3.26)\nproject(docs_block LANGUAGES CXX)\n"
    if "find_package(ptkit" not in block.code:
        prelude += "find_package(ptkit CONFIG REQUIRED)\n"
    (source / "CMakeLists.txt").write_text(prelude + block.code)
    cmake_dir = run([str(VENV_BIN / "ptkit"), "--cmake-dir"], env=python_env()).stdout.strip()
    proc = cmake_configure(source, tmp_path / "build", f"-Dptkit_DIR={cmake_dir}")
    assert proc.returncode == 0, f"{block.where}: configure failed:\n{proc.stdout}\n{proc.stderr}"
