"""``ptkit index build`` and ``ptkit index serve``: the per-variant package index."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import click

from ptkit.cli import SuggestingGroup
from ptkit.cli.options import PORT, InputFile, WritableFolder


@click.group(cls=SuggestingGroup)
def index() -> None:
    """The package index: one PEP 503/691/658 index per accelerator variant."""


@index.command("build")
@click.argument("wheels", nargs=-1, required=True, type=InputFile())
@click.option(
    "--out",
    required=True,
    type=WritableFolder(),
    help="Index root: <out>/<variant>/simple/ is written for each wheel's variant.",
)
@click.option(
    "--base-url",
    envvar="PTKIT_INDEX_BASE_URL",
    help="Absolute URL the files will be served from (default: relative links). "
    "Env: PTKIT_INDEX_BASE_URL.",
)
@click.option(
    "--recipes",
    "recipes",
    type=click.Path(exists=True, file_okay=False, path_type=Path),
    help="Recipes that map variants to index paths and labels (default: ptkit-ops' own).",
)
@click.option(
    "--variant-metadata",
    is_flag=True,
    help="Also write WheelNext (PEP 825, draft) variant wheels and {name}-{version}-variants.json.",
)
@click.option("--json", "as_json", is_flag=True, help="Print what changed as JSON.")
def build(
    wheels: tuple[Path, ...],
    out: Path,
    base_url: str | None,
    recipes: Path | None,
    variant_metadata: bool,
    as_json: bool,
) -> None:
    """Add WHEELS to the per-variant indexes under --out.

    The variant of each wheel is read from its manifests (else its version label).
    Existing files stay; rebuilding with the same wheels changes nothing; each variant's
    new index replaces the old one atomically; concurrent runs take turns. A malformed
    or self-contradicting wheel is refused (exit 1) and nothing is written.
    """
    from ptkit.index import build_index
    from ptkit.selection.recipes import recipes_dir

    # An IndexBuildError names the wheel and the fix: the CLI's boundary prints it.
    results = build_index(
        list(wheels),
        out,
        base_url=base_url,
        recipes_dir=recipes if recipes is not None else recipes_dir(),
        variant_metadata=variant_metadata,
    )
    if as_json:
        click.echo(json.dumps([r.to_json() for r in results], indent=2))
        return
    for r in results:
        state = f"{len(r.added)} added" if r.changed else "unchanged"
        click.echo(f"{r.index_path}/simple/: {len(r.files)} files, {state} ({r.generation})")
        for name in r.added:
            click.echo(f"  + {name}")


@index.command("serve")
@click.argument("root", type=click.Path(exists=True, file_okay=False, path_type=Path))
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to bind.")
@click.option("--port", default=8000, show_default=True, type=PORT, help="0 picks a free port.")
@click.option(
    "--allow-remote",
    is_flag=True,
    help="Allow a --host beyond loopback (the index is then reachable from the network).",
)
def serve(root: Path, host: str, port: int, allow_remote: bool) -> None:
    """Serve an index folder over HTTP (HTML and PEP 691 JSON, chosen by Accept)."""
    from ptkit.index import IndexServer
    from ptkit.index.server import RemoteListenError

    try:
        server = IndexServer(root, host, port, allow_remote=allow_remote)
    except RemoteListenError as exc:
        raise click.UsageError(str(exc)) from None
    except OSError as exc:
        click.echo(f"ptkit index serve: cannot listen on {host}:{port}: {exc}", err=True)
        sys.exit(1)
    variants = sorted(p.name for p in root.iterdir() if (p / "simple").is_dir())
    click.echo(f"Serving {root} at {server.url}/ (Ctrl-C stops)", err=True)
    for variant in variants:
        click.echo(f"  pip install <project> --index-url {server.url}/{variant}/simple", err=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()
