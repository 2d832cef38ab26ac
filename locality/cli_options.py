"""The options every ``locality`` command shares, written once: ``--debug``, ``--json``, ``--store``.

They live apart from :mod:`locality.cli` so that the commands of :mod:`locality.cli_datasets` and
:mod:`locality.cli_switch` take the same options, with the same help and effect, without importing the
CLI they are part of.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

import click

__all__ = ["RunState", "debug_option", "json_option", "store_option"]


@dataclass
class RunState:
    """What a run's options say about reporting failures (shared with ``locality.cli.main`` through click's ``obj``)."""

    debug: bool = False
    #: The one-line message of a failed run (what ``--json`` puts in its document).
    message: str | None = None


def _set_debug(ctx: click.Context, _param: click.Parameter, value: bool) -> None:
    if value:
        ctx.ensure_object(RunState).debug = True
        logging.getLogger("locality").setLevel(logging.DEBUG)
        logging.getLogger("pipelines").setLevel(logging.DEBUG)


#: ``--debug`` (every command): tracebacks and debug logs on stderr, Spark's own logs too.
debug_option = click.option(
    "--debug",
    is_flag=True,
    expose_value=False,
    is_eager=True,
    callback=_set_debug,
    help="Print tracebacks and debug logs on stderr (and Spark's logs).",
)
#: ``--json`` (every command): one JSON document on stdout, also when the command fails.
json_option = click.option("--json", "as_json", is_flag=True, help="Print one JSON document on stdout.")
#: Where a store is: every command that reads or writes one takes it the same way.
store_option = click.option(
    "--store",
    required=True,
    help="The store: a directory, or s3://BUCKET/PREFIX with the AWS SDKs' credentials and AWS_ENDPOINT_URL "
    "(docs/store-protocol.md).",
)
