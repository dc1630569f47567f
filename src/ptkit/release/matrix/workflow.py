"""``.github/workflows/release.yml``: the release workflow of a plan.

Jobs: ``toolkit`` (a tree that builds the toolkit: its pure wheel, once), ``wheel`` (one
per variant x platform: cibuildwheel with ``ci/cibuildwheel/<variant>.toml``, testing
with that toolkit wheel), ``index`` (the per-variant package indexes from every wheel,
built by the toolkit's own ``ptkit index build`` without torch).
"""

from __future__ import annotations

from ptkit._version import __version__
from ptkit.release.matrix._text import header, string
from ptkit.release.matrix.cibuildwheel import SCCACHE
from ptkit.release.matrix.plan import TOOLKIT_DIST, Plan

__all__ = ["CIBUILDWHEEL", "INDEX_COMMAND", "workflow_yaml"]

CIBUILDWHEEL = "cibuildwheel==4.3.5"
VARIANTLIB = "variantlib==0.2.2"
INDEX_COMMAND = "ptkit index build dist/*/*.whl --recipes recipes --out site/ --variant-metadata"


def _toolkit_job(plan: Plan) -> str:
    assert plan.toolkit is not None
    return f"""  toolkit:
    name: toolkit ({plan.toolkit.wheel})
    runs-on: ubuntu-24.04
    steps:
      - uses: actions/checkout@v5
      - uses: actions/setup-python@v6
        with:
          python-version: "3.12"
      - name: the toolkit wheel (pure Python, built once for every platform)
        run: {plan.toolkit.build_command()}
      - uses: actions/upload-artifact@v4
        with:
          name: toolkit
          path: {TOOLKIT_DIST}/*.whl
          if-no-files-found: error

"""


_DOWNLOAD_TOOLKIT = f"""      - name: the toolkit wheel
        uses: actions/download-artifact@v4
        with:
          name: toolkit
          path: {TOOLKIT_DIST}
"""


def workflow_yaml(plan: Plan) -> str:
    """The release workflow: the toolkit, a wheel job per (variant, platform), the index."""
    include: list[str] = []
    for job in plan.jobs:
        include += [
            f"          - variant: {string(job.variant)}",
            f"            build: {string(job.name or job.variant)}",
            f"            platform: {string(job.platform.name)}",
            f"            runner: {string(job.platform.runner)}",
            f"            cibw-platform: {string(job.platform.os)}",
            f"            cibw-archs: {string(job.platform.arch)}",
            f"            config-file: {string(job.config_file)}",
        ]
    about = [
        "One job per (variant, platform), and per torch minor of a torch-mode variant:",
        "cibuildwheel builds that py3-none wheel once and tests it on CPython 3.10-3.15 and",
        "3.15t (ci/cibuildwheel/<variant>.toml, <variant>-torch<minor>.toml);",
        "then one job builds the package index from all the wheels.",
    ]
    if plan.toolkit is not None:
        about[-1:] = [
            f"the toolkit's pure wheel is built once first ({plan.toolkit.source}/), tested with",
            "every wheel, and served by every variant's index, which one job builds last.",
        ]
        toolkit_job, download, needs = _toolkit_job(plan), _DOWNLOAD_TOOLKIT, "[toolkit, wheel]"
        wheel_needs = "\n    needs: toolkit"
        # The index is built by the toolkit wheel just built: torch-free, as users run it.
        index_install = f"python -m pip install {TOOLKIT_DIST}/ptkit-*.whl {VARIANTLIB}"
    else:
        toolkit_job, download, needs, wheel_needs = "", "", "wheel", ""
        index_install = f"python -m pip install 'ptkit>={__version__}' {VARIANTLIB}"
    body = f"""name: release

on:
  push:
    tags: ["v*"]
  workflow_dispatch:

permissions:
  contents: read

jobs:
{toolkit_job}  wheel:
    name: ${{{{ matrix.build }}}} ${{{{ matrix.platform }}}}{wheel_needs}
    runs-on: ${{{{ matrix.runner }}}}
    strategy:
      fail-fast: false
      matrix:
        include:
{chr(10).join(include)}
    env:
      # The compiler cache (CMAKE_*_COMPILER_LAUNCHER=sccache in the cibuildwheel files)
      # lives in GitHub's cache service, shared by every run of every job; Linux builds run
      # in a container, which gets these variables through cibuildwheel's environment-pass.
      SCCACHE_GHA_ENABLED: "true"
      # The xpu variant's Windows toolkit: Intel's offline oneAPI installer (a versioned
      # URL from Intel's download page), a repository variable.
      PTKIT_ONEAPI_WINDOWS_INSTALLER: ${{{{ vars.PTKIT_ONEAPI_WINDOWS_INSTALLER }}}}
    steps:
      - uses: actions/checkout@v5
{download}      - uses: actions/setup-python@v6
        with:
          python-version: "3.12"
      - name: sccache (exports the cache service's URL and token)
        uses: mozilla-actions/sccache-action@v0.0.9
        with:
          version: "v{SCCACHE.split("==")[1]}"
      - name: MSVC environment (Ninja and sccache need cl.exe on PATH)
        if: runner.os == 'Windows'
        uses: ilammy/msvc-dev-cmd@v1
      - name: cibuildwheel
        shell: bash
        run: |
          python -m pip install {CIBUILDWHEEL}
          python -m cibuildwheel --platform "${{{{ matrix.cibw-platform }}}}" --archs "${{{{ matrix.cibw-archs }}}}" --config-file "${{{{ matrix.config-file }}}}" --output-dir wheelhouse
      - uses: actions/upload-artifact@v4
        with:
          name: wheel-${{{{ matrix.build }}}}-${{{{ matrix.platform }}}}
          path: wheelhouse/*.whl
          if-no-files-found: error

  index:
    needs: {needs}
    runs-on: ubuntu-24.04
    steps:
      - uses: actions/checkout@v5
      - uses: actions/setup-python@v6
        with:
          python-version: "3.12"
      - uses: actions/download-artifact@v4
        with:
          pattern: wheel-*
          path: dist
{download}      - name: ptkit index build
        # One PEP 503/691/658 index per variant at each recipe's index-path, with PEP 825
        # variant metadata beside the plain wheels; a pure wheel without a variant (the
        # toolkit) goes into every variant's index. ptkit's command line needs no torch.
        # Each variant's folder is a link to its newest generation: the published copy
        # (public/) holds the linked folders themselves.
        run: |
          {index_install}
          {INDEX_COMMAND}
          mkdir public && cp site/index.html public/ && for v in site/*/; do cp -rL "$v" public/; done
      - uses: actions/upload-artifact@v4
        with:
          name: index
          path: public/
          if-no-files-found: error
"""
    return "\n".join(header("recipes/*.toml", about)) + "\n" + body
