"""``locality datasets`` and ``locality generate``: the dataset cards from the command line.

Registered by :mod:`locality.cli`; errors are :class:`~locality.errors.LocalityError`
subclasses, which its ``main`` turns into a one-line message and exit code 2.
"""

from __future__ import annotations

import hashlib
import json

import click

from locality._stdout import write_document
from locality.cli_options import debug_option, json_option
from locality.defaults import DEFAULT_CHECK_SERVERS
from locality.errors import LocalityError

__all__ = ["datasets", "generate"]

_NOT_OK = "NOT OK:"


def _status(entry) -> str:
    """``sha256 ok`` / what is wrong, for a shared card; the recipes, for a generated one."""
    from locality.datasets.catalog import verify

    if not entry.shared:
        return "recipes: " + ", ".join(entry.recipes)
    try:
        verify(entry.name)
    except LocalityError as exc:
        return f"{_NOT_OK} {exc}"
    import pyarrow.parquet as pq

    return f"{pq.ParquetFile(entry.path).metadata.num_rows:,} rows, sha256 ok"


@click.command()
@click.option("--check", "names", multiple=True, metavar="NAME", help="Compute a card's figures (repeatable).")
@click.option("--recipe", help="With --check on a generated card: the recipe (default: its first).")
@click.option("--keys", help="With --check: another chain of the trace's columns, comma-separated.")
@click.option(
    "--servers",
    "n_servers",
    type=int,
    default=DEFAULT_CHECK_SERVERS,
    show_default=True,
    help="Servers of the routing figures.",
)
@json_option
@debug_option
def datasets(names, recipe, keys, n_servers, as_json):
    """List the dataset cards of datasets/ (checksums verified), or compute the figures of some (--check).

    The figures of each card's README come from `locality datasets --check NAME`.
    """
    from locality.datasets.catalog import catalog, load
    from locality.datasets.check import card_figures, format_figures

    cards = catalog()
    if not names:
        rows = [
            {
                "name": e.name,
                "kind": "shared" if e.shared else "generated",
                "keys": e.keys,
                "ts": e.ts,
                "status": _status(e),
                "stands_for": e.stands_for,
            }
            for e in cards.values()
        ]
        if as_json:
            write_document(json.dumps(rows))
        else:
            for row in rows:
                click.echo(f"{row['name']} ({row['kind']}; keys {' -> '.join(row['keys'])}; {row['status']})")
                click.echo(f"    {row['stands_for']}")
        broken = [row for row in rows if row["status"].startswith(_NOT_OK)]
        if broken:  # listed, and the exit code says so: a check that finds a problem does not exit 0
            names = ", ".join(row["name"] for row in broken)
            raise LocalityError(f"{len(broken)} dataset card(s) fail their check ({names}): {broken[0]['status']}")
        return
    chain = [k.strip() for k in keys.split(",")] if keys else None
    figures = [card_figures(load(name, chain, recipe=recipe), n_servers=n_servers) for name in names]
    if as_json:
        write_document(json.dumps(figures))
    else:
        click.echo("\n\n".join(f"## {f['name']}\n\n{format_figures(f)}" for f in figures))


@click.command()
@click.argument("name")
@click.option("--out", required=True, type=click.Path(dir_okay=False), help="Parquet file to write.")
@click.option("--recipe", help="The card's parameters to start from (default: its first recipe).")
@click.option(
    "--param", "-p", "overrides", multiple=True, metavar="KEY=VALUE", help="Override a parameter (repeatable)."
)
@json_option
@debug_option
def generate(name, out, recipe, overrides, as_json):
    """Write the generated trace NAME (a card of datasets/) as Parquet: same parameters, same bytes."""
    from locality._validation import check_output_path
    from locality.datasets.generate import generate as write
    from locality.datasets.generate import parse_parameter

    check_output_path(out, "--out")

    path, used = write(name, out, recipe=recipe, overrides=dict(parse_parameter(p) for p in overrides))
    digest = hashlib.sha256(path.read_bytes()).hexdigest()
    if as_json:
        write_document(json.dumps({"path": str(path), "name": name, "parameters": used, "sha256": digest}, default=str))
    else:
        text = " ".join(f"{k}={v!r}" for k, v in used.items())
        click.echo(f"wrote {path}: {name} {text}; sha256 {digest}")
