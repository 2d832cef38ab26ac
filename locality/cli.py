"""The ``locality`` command line: thin commands over the library and the Spark jobs.

Exit codes (:class:`ExitCode`, the one place they are defined): 0 success; 1
published, but alpha is infeasible (a key alone is heavier than an instance
may carry: the report names it); 2 could not run (bad input, bad parameters,
an unusable store: the message names the file, column, option or store); 70
unexpected failure (a bug, or a Spark worker that died): a one-line message
names the log file holding the traceback, which ``--debug`` prints on stderr
instead; 75 the store is busy (another writer held its lock past
``--lock-timeout``: retry later); 130 interrupted. No traceback reaches stderr
without ``--debug``. With ``--json`` exactly one JSON document goes to stdout;
progress, logs and errors go to stderr.

``spark-submit locality_job.py COMMAND ...`` (the script at the root of the
repository) runs the same commands inside the session spark-submit starts.

Why one module: each command is a thin function of click
options over the library, and the options shared by several commands are
declared once here (``trace_options``, ``hash_option``, ...), so that every
command spells them the same; the work is in the library and ``pipelines/``.
"""

from __future__ import annotations

import contextlib
import dataclasses
import enum
import functools
import json
import logging
import math
import os
import sys
import tempfile
import traceback
from collections.abc import Callable, Sequence
from datetime import datetime
from pathlib import Path

import click

from locality import cli_datasets, cli_switch
from locality._stdout import document_written, one_document, write_document
from locality._validation import check_integer
from locality.cli_options import RunState, debug_option, json_option, store_option
from locality.defaults import (
    DEFAULT_ALPHA,
    DEFAULT_CAPACITY,
    DEFAULT_DECAY,
    DEFAULT_GRAPH_STATS_BACKEND,
    DEFAULT_HASH,
    DEFAULT_HORIZON,
    DEFAULT_INSTANCES_PER_SERVER,
    DEFAULT_LOCK_TIMEOUT,
    DEFAULT_MAX_IMBALANCE,
    DEFAULT_MIN_GAIN,
    DEFAULT_PERIOD,
    DEFAULT_REBALANCE_EVERY,
    DEFAULT_REBALANCE_FORECAST,
    DEFAULT_REBALANCE_HISTORY,
    DEFAULT_REPLAY_MODE,
    DEFAULT_SEED,
    DEFAULT_SPLIT_MERGE,
    DEFAULT_STATE_WEIGHT,
    DEFAULT_THETA_MAX,
    DEFAULT_TS,
)
from locality.errors import (
    JobError,
    LocalityError,
    StoreBusyError,
    StoreError,
    StoreUnavailableError,
    TopologyError,
    TraceError,
    parameters_of,
)
from locality.hashing import ENGINES
from locality.migration import SPLIT_MERGES
from locality.rebalance import METHODS
from locality.replay import MODES
from locality.report import format_evaluation, format_reconfiguration, format_replay, format_store, point_text

__all__ = ["main", "cli", "ExitCode"]

logger = logging.getLogger(__name__)


class ExitCode(enum.IntEnum):
    """What a ``locality`` run's exit status means (70 and 75 are sysexits.h's EX_SOFTWARE and EX_TEMPFAIL)."""

    OK = 0
    INFEASIBLE = 1  # published, but a key alone is heavier than alpha lets an instance carry
    BAD_INPUT = 2  # could not run: the input, a parameter or the store is unusable (the message names it)
    CRASH = 70  # unexpected failure: a bug, or a Spark worker died (traceback in the log file named)
    BUSY = 75  # the store is busy (another writer's lease past --lock-timeout) or cannot be reached: retry later
    INTERRUPTED = 130  # Ctrl-C / SIGINT


#: Where tracebacks of unexpected failures go (default: the system's temporary directory).
LOG_DIR_VARIABLE = "LOCALITY_LOG_DIR"


# ---------------------------------------------------------------------- shared options
def _keys(value: str) -> list[str]:
    keys = [k.strip() for k in value.split(",") if k.strip()]
    if len(keys) < 2:
        raise click.BadParameter(
            f"needs at least two comma-separated key columns (one per operator); got {value!r}", param_hint="'--keys'"
        )
    return keys


def _apply(command: Callable, options: list[Callable]) -> Callable:
    for option in reversed(options):
        command = option(command)
    return command


quiet_option = click.option("--quiet", "-q", is_flag=True, help="No progress on stderr.")
#: ``--lock-timeout`` (commands that write a store): how long to wait for another writer of the store.
lock_timeout_option = click.option(
    "--lock-timeout",
    type=float,
    default=DEFAULT_LOCK_TIMEOUT,
    show_default=True,
    help="Seconds to wait for another writer of the store before failing (exit 75).",
)


#: ``--hash``: the engine whose own hash places the keys without a table entry.
hash_option = click.option(
    "--hash",
    "hash",
    default=DEFAULT_HASH,
    show_default=True,
    # A plain string, checked by the job, so that a wrong engine gets the same message as every
    # other bad parameter (and exit code 2) from the CLI, the library and spark-submit alike.
    help=f"The engine whose hash places keys without an entry: {', '.join(ENGINES)} "
    "(pyflink: PyFlink's key_by; flink: Java keyBy).",
)


def _forecast(ctx: click.Context, param: click.Parameter, value: str | None) -> str | None:
    """A forecast option (``decay:0.5``), checked as it is parsed: its errors name the option, not parse_forecast's."""
    from locality.forecast import parse_forecast

    if value is not None:
        try:
            parse_forecast(value)
        except LocalityError as exc:
            raise click.BadParameter(str(exc)) from None
    return value


def _trace_or_card(ctx: click.Context, param: click.Parameter, value: str | None) -> str | None:
    """TRACE is a path, a directory or a glob, or the name of a shared dataset card (``locality datasets``)."""
    from locality.datasets.catalog import catalog

    if value is None or Path(value).exists() or any(c in value for c in "/*?["):
        return value
    cards = catalog()
    return str(cards[value].path) if value in cards and cards[value].shared else value


def _trace_option_list(*, weight: bool = True, ts_default: str | None = None, required: bool = True) -> list[Callable]:
    """TRACE and the options naming its columns, time range, format and encoding (one spelling for every command).

    Each option is named as :class:`~pipelines.trace.TraceSpec` names its field (:func:`_trace_spec`).
    ``required=False``: TRACE and ``--keys`` may be left out (``reconfigure --sketches`` reads no trace);
    the command then checks them itself (:func:`_required`).
    """
    ts_help = "Timestamp column" + (" (needed for --start/--end)." if ts_default is None else ".")
    return [
        click.argument("trace", callback=_trace_or_card, required=required),
        click.option("--keys", required=required, help="Key columns in operator order, comma-separated."),
        *(
            [click.option("--weight", help="Column with each row's weight (count or bytes); default 1.")]
            if weight
            else []
        ),
        click.option("--ts", default=ts_default, show_default=ts_default is not None, help=ts_help),
        click.option(
            "--start", help="Keep rows with ts >= START (ISO 8601; UTC when it names no zone, as are naive ts)."
        ),
        click.option("--end", help="Keep rows with ts < END (ISO 8601; UTC when it names no zone)."),
        click.option(
            "--format", "format", type=click.Choice(["parquet", "csv", "json"]), help="Default: from file names."
        ),
        click.option(
            "--encoding",
            help="Text encoding of CSV and JSON traces (utf-8, latin-1, ascii, utf-16[-le|-be], utf-32); "
            "default utf-8.",
        ),
    ]


def _required(trace: str | None, keys: str | None) -> None:
    """What click says of a missing TRACE or ``--keys``, for a command whose trace is optional."""
    if trace is None:
        raise click.UsageError("Missing argument 'TRACE'.")
    if keys is None:
        raise click.UsageError("Missing option '--keys'.")


def trace_options(command: Callable) -> Callable:
    """Options naming the trace's columns, time range, format and encoding."""
    return _apply(command, _trace_option_list())


#: The options that build the topology (:func:`_topology`), named ``topology_*`` so that an error about the
#: topology names all of them (:func:`_options_of`).
_DEPLOYMENT = ("topology_servers", "topology_instances_per_server", "topology_file")


def _deployment_option_list(*, servers_required: bool = False) -> list[Callable]:
    """``--servers`` and ``--instances-per-server``: a uniform topology (:func:`_topology`)."""
    return [
        click.option(
            "--servers",
            "topology_servers",
            type=int,
            required=servers_required,
            help=None if servers_required else "Number of servers (instances placed round-robin).",
        ),
        click.option(
            "--instances-per-server",
            "topology_instances_per_server",
            type=int,
            default=DEFAULT_INSTANCES_PER_SERVER,
            show_default=True,
        ),
    ]


def optimizer_options(command: Callable) -> Callable:
    """Options of the deployment and of the optimizer, shared by optimize and reconfigure."""
    return _apply(
        command,
        [
            *_deployment_option_list(),
            click.option("--topology", "topology_file", type=click.Path(), help="JSON topology (servers, placement)."),
            click.option(
                "--alpha", type=float, default=DEFAULT_ALPHA, show_default=True, help="Per-operator bound (>= 1)."
            ),
            hash_option,
            click.option("--top-pairs", type=int, help="Keep only the N heaviest key pairs per hop."),
            click.option(
                "--capacity", type=int, default=DEFAULT_CAPACITY, show_default=True, help="Counters per sketch."
            ),
            click.option("--exact", is_flag=True, help="Count exactly with Spark aggregations instead of sketches."),
            click.option("--max-entries", type=int, help="Cap on each operator's routing table."),
            click.option("--seed", type=int, default=DEFAULT_SEED, show_default=True, help="METIS seed."),
            lock_timeout_option,
        ],
    )


def rebalance_options(*, rebalance_help: str, policy: bool) -> Callable:
    """``--rebalance`` and its rebalancer's options, each named ``rebalance_<field>`` after the field it sets.

    The fields are :class:`~locality.rebalance.options.RebalanceOptions`' and, with ``policy`` (the replay's
    rebalancer within each window), :class:`~locality.rebalance.window.RebalancePolicy`'s too; :func:`_rebalance`
    builds the object from them, and an error about a field (``rebalance.every``) names its option.
    """
    options = [
        click.option("--rebalance", "rebalance", help=rebalance_help),
        click.option(
            "--theta-max",
            "rebalance_theta_max",
            type=float,
            default=DEFAULT_THETA_MAX,
            show_default=True,
            help="With --rebalance: the bound.",
        ),
        click.option(
            "--state-weight",
            "rebalance_state_weight",
            type=float,
            default=DEFAULT_STATE_WEIGHT,
            show_default=True,
            help="With --rebalance local or follow: hops per unit of state.",
        ),
        click.option(
            "--split-hot-keys",
            "rebalance_split_hot_keys",
            is_flag=True,
            help="--rebalance local, associative state only: split keys too heavy for any instance by "
            "neighbour server (each part keeps a partial state: see --split-merge).",
        ),
        click.option(
            "--split-share",
            "rebalance_split_share",
            type=float,
            help="With --split-hot-keys: also split keys whose expected load exceeds this share of an "
            "instance's fair share.",
        ),
        click.option(
            "--split-merge",
            "rebalance_split_merge",
            type=click.Choice(SPLIT_MERGES),
            default=DEFAULT_SPLIT_MERGE,
            show_default=True,
            help="With --split-hot-keys: how the operator combines a split key's partial states: folded into "
            "the key's instance when the split ends (the partials held elsewhere move: moved state), or merged "
            "downstream by a final aggregation keyed by the key, as with Partial Key Grouping (nothing migrates).",
        ),
    ]
    if policy:
        options += [
            click.option(
                "--rebalance-every",
                "rebalance_every",
                default=DEFAULT_REBALANCE_EVERY,
                show_default=True,
                help="How often the rebalancer runs within a window (docs/design-choices.md: why once a day).",
            ),
            click.option(
                "--balance-window",
                "rebalance_balance_window",
                help="--rebalance local: balance the load of each BALANCE_WINDOW (e.g. 1D) instead of the whole "
                "window.",
            ),
            click.option(
                "--rebalance-forecast",
                "rebalance_forecast",
                default=DEFAULT_REBALANCE_FORECAST,
                show_default=True,
                callback=_forecast,
                help="--rebalance local: per-key load forecast over --rebalance-history (last, decay:D, mean, "
                "percentile:N:Q...).",
            ),
            click.option(
                "--rebalance-history",
                "rebalance_history",
                default=DEFAULT_REBALANCE_HISTORY,
                show_default=True,
                help="What --rebalance-forecast reads.",
            ),
        ]
    return functools.partial(_apply, options=options)


def output_options(command: Callable) -> Callable:
    """``--json``, ``-q/--quiet``, ``--master`` and ``--debug``: the options of every Spark command."""
    return _apply(
        command,
        [
            json_option,
            quiet_option,
            click.option("--master", help="Spark master (default: spark-submit's, else local[*])."),
            debug_option,
        ],
    )


#: The fields of a trace (:class:`~pipelines.trace.TraceSpec`) that options set, besides its path and keys.
_TRACE_FIELDS = ("weight", "ts", "start", "end", "format", "encoding", "state", "newest")


def _trace_spec(trace: str, options: dict):
    """The trace TRACE and the trace's options name; they leave ``options``."""
    from pipelines.trace import TraceSpec

    fields = {name: options.pop(name) for name in _TRACE_FIELDS if name in options}
    return TraceSpec(trace, _keys(options.pop("keys")), **fields)


def _rebalance(options: dict, kind: type):
    """``kind`` (the rebalance options, or a replay's policy) from ``--rebalance`` and its options; None without.

    The options leave ``options``. Without ``--rebalance`` none of them may be given: they set a rebalancer.
    """
    method = options.pop("rebalance")
    prefix = "rebalance_"
    fields = {name.removeprefix(prefix): options.pop(name) for name in list(options) if name.startswith(prefix)}
    if method is not None:
        return kind(method=method, **fields)
    ctx = click.get_current_context()
    given = [_long_option(p) for p in ctx.command.params if p.name.startswith(prefix) and _given(ctx, p.name)]
    if given:
        raise click.UsageError(f"{', '.join(given)} set the rebalancer's options: give --rebalance too")
    return None


def _given(ctx: click.Context, name: str) -> bool:
    """Whether the option ``name`` (its Python name) was given on the command line."""
    return ctx.get_parameter_source(name) is click.core.ParameterSource.COMMANDLINE


def _long_option(param: click.Parameter) -> str:
    """How a user spells an option: its long name (``--rebalance-every``)."""
    return next((o for o in param.opts if o.startswith("--")), param.opts[0])


def _topology(keys: Sequence[str], options: dict):
    """The topology the deployment options name (``--servers`` or ``--topology``); they leave ``options``.

    None when neither is given and ``--servers`` is not required (a later online run keeps the version's).
    """
    from locality.topology import MAX_INSTANCES, Topology

    servers, instances_per_server, topology_file = (options.pop(name, None) for name in _DEPLOYMENT)
    if topology_file:
        if servers is not None:
            raise click.UsageError("give either --servers (with --instances-per-server) or --topology, not both")
        try:
            doc = json.loads(Path(topology_file).read_text())
        except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise TopologyError(f"cannot read the topology file {topology_file!r}: {exc}") from None
        try:
            return Topology.from_document(doc, keys)
        except TopologyError as exc:
            raise TopologyError(f"the topology file {topology_file!r} is not a topology: {exc}") from None
    if servers is None:
        return None
    with parameters_of("topology"):
        check_integer(servers, "servers", "locality optimize", lower=1)
        check_integer(instances_per_server, "instances_per_server", "locality optimize", lower=1)
    if servers * instances_per_server > MAX_INSTANCES:
        raise click.BadParameter(
            f"--servers {servers:,} x --instances-per-server {instances_per_server:,} make "
            f"{servers * instances_per_server:,} instances per operator; a topology has at most {MAX_INSTANCES:,}",
            param_hint="'--servers' / '--instances-per-server'",
        )
    return Topology.uniform(list(keys), servers, instances_per_server)


def _required_topology(keys: Sequence[str], options: dict):
    """The topology of a command that needs one (``optimize``): :func:`_topology`, or exit 2 naming the options."""
    topology = _topology(keys, options)
    if topology is None:
        raise click.UsageError("--servers (or --topology) is required")
    return topology


def _emit(as_json: bool, document: dict, text: str) -> None:
    if as_json:
        write_document(json.dumps(_finite(document), default=str, allow_nan=False))
    else:
        click.echo(text)


def _finite(value):
    """``value`` with every NaN or infinite float as null: JSON has no NaN, and strict parsers refuse Python's."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_finite(v) for v in value]
    return value


def _session(master: str | None):
    from pipelines.session import build_session, interrupt_quietly

    debug = click.get_current_context().find_object(RunState)
    spark = build_session("locality", master=master, log_level="ERROR" if debug and debug.debug else "OFF")
    interrupt_quietly(spark)
    return spark


def _check_before_spark(spec, store: str | None = None) -> None:
    """The checks that need no Spark: the trace's local files, and the store is a writable directory."""
    from locality.store import ConfigStore
    from pipelines.trace import check_trace

    check_trace(spec)
    if store is not None:
        ConfigStore(store).check_writable()


# ---------------------------------------------------------------------- commands
@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.option("-v", "--verbose", count=True, help="More logging on stderr (-v info, -vv debug).")
def cli(verbose: int) -> None:
    """Locality-aware routing for stateful stream processing."""
    level = logging.WARNING if verbose == 0 else logging.INFO if verbose == 1 else logging.DEBUG
    logging.basicConfig(level=level, stream=sys.stderr, format="%(levelname)s %(name)s: %(message)s")
    for handler in logging.getLogger().handlers:
        handler.addFilter(_not_an_interrupt)


def _not_an_interrupt(record: logging.LogRecord) -> bool:
    """Drop a log record that carries a KeyboardInterrupt, or an error raised while handling one: the CLI says it once.

    py4j logs both with their tracebacks: the interrupt of the call it was making, then the broken pipe of the
    connection it shuts after it (a BrokenPipeError whose context is the KeyboardInterrupt).
    """
    return not _broken_by_an_interrupt(record.exc_info[1] if record.exc_info else None)


def _broken_by_an_interrupt(error: BaseException | None) -> bool:
    """Whether ``error`` is a KeyboardInterrupt or was raised while handling one (its cause or context chain)."""
    for _ in range(16):  # an exception's context chain is short; bounded all the same
        if error is None:
            return False
        if isinstance(error, KeyboardInterrupt):
            return True
        error = error.__cause__ or error.__context__
    return False


@cli.command()
@trace_options
@optimizer_options
@click.option("--replay", is_flag=True, help="Replay the trace for exact in-sample figures (one more pass).")
@click.option("--graph-stats/--no-graph-stats", default=True, show_default=True, help="Degrees and components.")
@click.option(
    "--graph-stats-backend",
    default=DEFAULT_GRAPH_STATS_BACKEND,
    show_default=True,
    # A plain string, checked by the job (graph_stats_backend), as --hash is.
    help="Where the graph statistics are computed: auto, graphframes (needs its jar) or driver. auto: the driver "
    "below the graph size from which GraphFrames measured faster (the report says which ran and why).",
)
@store_option
@output_options
def optimize(trace, as_json, quiet, master, **options):
    """Learn routing tables from TRACE and publish them as a new version in --store."""
    from pipelines.offline import run
    from pipelines.params import OfflineParams
    from pipelines.progress import Stages

    spec = _trace_spec(trace, options)
    params = OfflineParams(trace=spec, topology=_required_topology(spec.keys, options), **options)
    _check_before_spark(spec, params.store)
    spark = _session(master)
    with Stages(show=not quiet) as stages:
        result = run(spark, params, stages)
    _emit(as_json, result.report, result.summary)
    return ExitCode.INFEASIBLE if result.report["optimization"]["hot_keys"] else ExitCode.OK


@cli.command()
@trace_options
@store_option
@click.option("--version", "version", type=int, help="Version to evaluate (default: current).")
@output_options
def evaluate(trace, store, version, as_json, quiet, master, **options):
    """Replay TRACE through a stored configuration and through hash routing."""
    from locality.store import ConfigStore
    from pipelines.evaluate import evaluate_trace
    from pipelines.progress import Stages
    from pipelines.trace import read_trace, spark_read_errors

    spec = _trace_spec(trace, options)
    stored = ConfigStore(store).get(version)
    config = stored.config
    spec = dataclasses.replace(spec, keys=_columns_of_operators(spec.keys, config.topology.operators, stored.version))
    _check_before_spark(spec)
    spark = _session(master)
    with Stages(show=not quiet) as stages, stages.stage("replay"), spark_read_errors(spec.path):
        report = evaluate_trace(read_trace(spark, spec), config, spec.keys, weight=spec.weight)
    figures = {"version": stored.version, **report.to_dict()}
    _emit(as_json, figures, "\n".join(format_evaluation(figures, f"version {stored.version} on {trace}")))


def _columns_of_operators(keys: Sequence[str], operators: Sequence[str], version: int) -> tuple[str, ...]:
    """``--keys`` matched to a version's operators by name: the same names in the operators' order, or exit 2.

    A trace's key columns are the operators' names (the optimizer names each operator after its column), so
    columns in another order are read by name, and columns of other names are refused: read by position they
    would replay another trace's keys through these tables and give a figure of nothing.
    """
    if sorted(keys) != sorted(operators):
        raise TopologyError(
            f"version {version} routes {len(operators)} operators {list(operators)}; --keys must name those key "
            f"columns (in any order), got {len(keys)} key columns {list(keys)}"
        )
    return tuple(operators)


@cli.command()
@functools.partial(_apply, options=_trace_option_list(required=False))
@store_option
@click.option(
    "--sketches",
    is_flag=True,
    help="Read the window's sketches the engines published into the store's sketches/ instead of a trace "
    "(docs/store-protocol.md#sketches-the-engines-publish): no TRACE, no Spark; the operators come from the "
    "sketches, in the order their hops chain (--keys, if given, must name them so). --window, --start and --end "
    "select the intervals; an interval straddling the window's bounds is left out.",
)
@click.option(
    "--window",
    help="Use the last WINDOW of the trace before its latest ts (e.g. 7D, 24h); with --sketches, the last "
    "WINDOW of the intervals, ending at the newest one's end.",
)
@click.option("--newest-files", "newest", type=int, help="Use only the newest N files of the trace directory.")
@click.option(
    "--min-gain",
    type=float,
    default=DEFAULT_MIN_GAIN,
    show_default=True,
    help="Hops made local over the window per unit of state moved needed to publish.",
)
@click.option(
    "--max-imbalance",
    type=float,
    default=DEFAULT_MAX_IMBALANCE,
    show_default=True,
    help="Publish whatever the gain when the tables in force exceed this imbalance on the window.",
)
@click.option(
    "--decay",
    type=float,
    default=DEFAULT_DECAY,
    help=f"Weight of each older window (default {DEFAULT_DECAY}; 0 forgets).",
)
@click.option("--state", "state", help="Column whose sum per key is its state size (default: its load).")
@rebalance_options(
    rebalance_help="Rebalance the tables in force on the window's loads instead of reconfiguring: the finer cadence "
    "between two reconfigurations, e.g. follow every 15min with --window 15min. One of "
    f"{', '.join(METHODS)}.",
    policy=False,
)
@click.option(
    "--horizon",
    help="With --rebalance local or follow: how long the moves serve (until the next reconfiguration); "
    f"a key's window load is scaled to it. [default: {DEFAULT_HORIZON}]",
)
@click.option(
    "--balance-since",
    help="With --rebalance local or follow: start of the balance window (ISO 8601, e.g. the last "
    "reconfiguration): balance what each instance served since then plus the window's loads scaled to "
    "what is left of it (needs --balance-until; the store keeps what was served).",
)
@click.option(
    "--balance-until",
    help="With --balance-since: end of the balance window (the next reconfiguration); the moves serve until then.",
)
@click.option(
    "--switch-after",
    help="Schedule the version for routers by point from the window's end + this lead (e.g. 1h), and seal the "
    "store's schedule up to there even when nothing is published; take more than the time between two runs plus "
    "one run's duration (docs/switch.md).",
)
@click.option(
    "--incremental/--full-partition",
    default=False,
    show_default=True,
    help="Start from the version in force: METIS re-partitions only the keys another server now draws more than "
    "their own, with their undecided neighbours; the rest stays (docs/scale.md). Faster on large graphs at a "
    "short period.",
)
@optimizer_options
@output_options
def reconfigure(trace, sketches, window, as_json, quiet, master, **options):
    """Reconfigure from the latest window of TRACE: new tables and a migration plan, published if it pays.

    --servers, --instances-per-server, --topology and --hash set the deployment of the first run into
    an empty store; later runs keep the current version's fallback hash, and its topology unless
    --servers or --topology name another one: servers added or removed, the run then publishes a version
    for the new topology with a plan that moves little state (the least change, or a full
    re-optimization when its extra locality pays for the extra state, by --min-gain). With --rebalance
    the run adjusts the tables in force to the window's loads (no METIS, no new statistics) and
    publishes when a key moves.

    With --sketches the run reads no trace: the window's sketches, which the engines published into the
    store's sketches/, are merged into its counts (docs/store-protocol.md), and no Spark starts.
    """
    from locality.rebalance.options import RebalanceOptions

    options["rebalance"] = _rebalance(options, RebalanceOptions)
    if sketches:
        outcome = _reconfigure_from_sketches(trace, window, quiet, options)
    else:
        _required(trace, options["keys"])
        outcome = _reconfigure_from_trace(_trace_spec(trace, options), window, quiet, master, options)
    _emit(as_json, outcome, format_reconfiguration(outcome))


def _reconfigure_from_trace(spec, window: str | None, quiet: bool, master: str | None, options: dict) -> dict:
    """``reconfigure`` on a trace: the window counted by the Spark job (:func:`pipelines.online.run`)."""
    from pipelines.online import run
    from pipelines.params import OnlineParams
    from pipelines.progress import Stages
    from pipelines.trace import last_window, window_length

    params = OnlineParams(trace=spec, topology=_topology(spec.keys, options), window=window, **options)
    if window:
        window_length(spec, window)
    _check_before_spark(spec, params.store)
    spark = _session(master)
    if window:
        params = dataclasses.replace(params, trace=last_window(spark, spec, window))
    with Stages(show=not quiet) as stages:
        return run(spark, params, stages)


#: What only a trace gives, refused with ``--sketches`` (the Python names of the options).
_TRACE_ONLY = ("weight", "ts", "format", "encoding", "newest", "state", "exact", "capacity")


def _reconfigure_from_sketches(trace: str | None, window: str | None, quiet: bool, options: dict) -> dict:
    """``reconfigure --sketches``: the engines' sketches of the window, merged (:func:`pipelines.online.run_sketches`).

    No Spark starts. The options that describe a trace are refused, naming them; so is ``--capacity``:
    the engines chose the sketches' capacity. The operators come from the sketches (``--keys`` checks them).
    """
    from locality.engine_sketches import SketchSelection
    from locality.store import ConfigStore
    from pipelines.online import run_sketches
    from pipelines.params import OnlineParams
    from pipelines.progress import Stages

    ctx = click.get_current_context()
    given = ["TRACE"] if trace is not None else []
    given += [_long_option(p) for p in ctx.command.params if p.name in (*_TRACE_ONLY, "master") and _given(ctx, p.name)]
    if given:
        raise click.UsageError(
            f"--sketches reads the engines' sketches, not a trace: leave out {', '.join(given)} (a trace's; "
            "the sketches' capacity is the one the engines chose; no Spark runs)"
        )
    for name in _TRACE_ONLY:
        options.pop(name)
    keys = options.pop("keys")
    selection = SketchSelection(start=options.pop("start"), end=options.pop("end"), last=window)
    deployment = {name: options.pop(name) for name in _DEPLOYMENT}
    # checked before the sketches are read: the parameters (capacity: the sketches', set once they are read)
    params = OnlineParams(trace=None, sketches=selection, **options)
    ConfigStore(params.store).check_writable()
    with Stages(show=not quiet) as stages:
        with stages.stage("read the engines' sketches"):
            sketches = selection.read(params.store)
        operators = list(sketches.operators)
        if keys is not None and _keys(keys) != operators:
            raise TopologyError(
                f"--keys names the operators {_keys(keys)}; the sketches' hops chain {operators} (in that order)"
            )
        params = dataclasses.replace(params, topology=_topology(operators, deployment), capacity=sketches.capacity)
        return run_sketches(params, sketches, stages)


@cli.command("replay")
@functools.partial(_apply, options=_trace_option_list(weight=False, ts_default=DEFAULT_TS))
@functools.partial(_apply, options=_deployment_option_list(servers_required=True))
@click.option(
    "--period",
    default=DEFAULT_PERIOD,
    show_default=True,
    help="Window length (7D, 1D, 30D, 12h...) or calendar YS, QS, MS.",
)
@click.option(
    "--mode",
    type=click.Choice(MODES),
    default=DEFAULT_REPLAY_MODE,
    show_default=True,
    help="online: reconfigure every window; offline: tables from the first window, kept; hash: no tables "
    "(with --rebalance, the rebalancer moves keys from the hash).",
)
@click.option("--history", type=int, help="Online: build from the last N windows (default: all, decayed).")
@click.option("--decay", type=float, help=f"Online: weight of each older window (default {DEFAULT_DECAY}).")
@click.option("--min-gain", type=float, help="Online: publish only when the gain pays (default: every window).")
@click.option("--max-imbalance", type=float, help="Online, with --min-gain: publish when in-force tables exceed this.")
@click.option(
    "--incremental",
    is_flag=True,
    help="Online: start each reconfiguration from the tables in force instead of a new METIS partition.",
)
@rebalance_options(
    rebalance_help="Rebalancer run within windows: follow (keys join their neighbours), local (locality-aware "
    f"balancing), or {', '.join(m for m in METHODS if m not in ('follow', 'local'))}.",
    policy=True,
)
@click.option(
    "--forecast",
    callback=_forecast,
    help="Online: balance each reconfiguration on this forecast of next window's key loads (e.g. decay:0.5).",
)
@click.option("--alpha", type=float, default=DEFAULT_ALPHA, show_default=True)
@hash_option
@json_option
@quiet_option
@debug_option
def replay_command(trace, as_json, quiet, **options):
    """Walk TRACE window by window: locality, imbalance and migration cost on data the tables did not see.

    The trace is read as the jobs read it (every format, --format, --encoding;
    UTC where a time names no zone), into memory and without Spark.
    """
    from locality.rebalance.window import RebalancePolicy
    from locality.replay import check_replay_options, replay_trace
    from pipelines.progress import Stages
    from pipelines.trace import read_trace_frame

    spec = _trace_spec(trace, options)
    topology = _topology(spec.keys, options)
    if options["history"] is None and options["decay"] is None:  # all windows, blended as the online job does
        options["decay"] = DEFAULT_DECAY
    check_replay_options(**{name: options[name] for name in ("alpha", "history", "decay", "min_gain", "max_imbalance")})
    policy = _rebalance(options, RebalancePolicy)
    frame = read_trace_frame(spec)
    with Stages(show=not quiet) as stages, stages.stage(f"{options['mode']} replay"), _which_trace(spec):
        result = replay_trace(frame[[*spec.keys, spec.ts]], topology, ts=spec.ts, rebalance=policy, **options)
    _emit(as_json, result.to_dict(), format_replay(result))


@contextlib.contextmanager
def _which_trace(spec):
    """A trace the replay cannot use is named, with the time range read of it."""
    try:
        yield
    except TraceError as error:
        where = f" in [{spec.start or '...'}, {spec.end or '...'})" if spec.start or spec.end else ""
        raise TraceError(f"{spec.path}{where}: {error}", parameter=error.parameter) from None


@cli.command()
@store_option
@json_option
@debug_option
def show(store, as_json):
    """List the versions of a store (* marks the current one) and the history of CURRENT: what, when and why.

    Works on any damaged store: every damaged file is named (``!`` marks a
    damaged version), and the command exits with 2 after the listing when
    anything is damaged (``locality rollback`` repairs CURRENT, the history
    and the lease; a damaged version stays listed until removed by hand). A
    version written by an interrupted run and never made current is marked
    ``retired``.
    """
    from locality.store import ConfigStore

    survey = ConfigStore(store).survey()
    document = {
        "store": store,
        "current": survey.current,
        "damaged": survey.current_damage,
        "damage": survey.damage,
        "versions": [stored.manifest for stored in survey.versions],
        "retired": survey.retired,
        "history": survey.history,
        "schedule": survey.schedule.to_dict(),
    }
    _emit(as_json, document, format_store(store, survey))
    if survey.damage:
        more = len(survey.damage) - 1
        raise StoreError(survey.damage[0] + (f" (and {more} more damaged: see the listing)" if more else ""))


@cli.command()
@store_option
@click.option("--to", "version", type=int, required=True, help="The version to make current.")
@click.option("--reason", help="Why (recorded in the store's history).")
@click.option(
    "--at",
    "point",
    help="For routers by point: the version is in force from this point (ISO time, or an integer such as event "
    "time in ms), at or after the store's seal.",
)
@lock_timeout_option
@json_option
@debug_option
def rollback(store, version, reason, point, lock_timeout, as_json):
    """Make an earlier (or any existing) version current again, explicitly; the move is recorded in the history."""
    from locality.store import ConfigStore

    config_store = ConfigStore(store, lock_timeout=lock_timeout, job="locality rollback")
    if not config_store.objects.exists():
        raise StoreError(f"there is no store at {store}")
    result = config_store.rollback(version, reason=reason, in_force_from=_point(point, "--at"))
    document = {"store": store, "current": result.current_version, "previous": result.previous_version}
    moved = "already current" if result.previous_version == version else f"was {result.previous_version}"
    _emit(as_json, document, f"current version of {store}: {version} ({moved})")


@cli.command()
@store_option
@click.option(
    "--until",
    "point",
    required=True,
    help="Promise that no version will be scheduled before this point (ISO time, or an integer such as event time "
    "in ms); routers by point route up to it without waiting.",
)
@lock_timeout_option
@json_option
@debug_option
def seal(store, point, lock_timeout, as_json):
    """Extend the store's switch schedule: routers by point may route every record before --until.

    The online job seals on every run with --switch-after; this command starts a schedule (the version in force
    becomes its first entry) or extends it by hand, e.g. while the online job is paused (docs/switch.md).
    """
    from locality.store import ConfigStore

    config_store = ConfigStore(store, lock_timeout=lock_timeout, job="locality seal")
    if config_store.current_version() is None:
        raise StoreError(f"the store {store} has no published version to schedule")
    schedule = config_store.seal(_point(point, "--until"))
    _emit(
        as_json,
        {"store": store, **schedule.to_dict()},
        f"schedule of {store} sealed until {point_text(schedule.sealed_until)}",
    )


def _point(value: str | None, option: str) -> int | None:
    """A schedule point from the command line: an integer as it is, a time as milliseconds since the epoch (UTC)."""
    if value is None:
        return None
    if value.lstrip("-").isdigit():
        return int(value)
    from locality.schedule import point_of
    from locality.time_range import parse_time

    return point_of(parse_time(value, option))


@cli.command()
@store_option
@click.option("--operator", required=True, help="The operator whose table to export.")
@click.option("--out", "out", required=True, type=click.Path(), help="The file to write.")
@click.option("--version", "version", type=int, help="Version to export (default: current).")
@click.option(
    "--server",
    help="Write the routes seen from this server (a name of the version's topology, or its 0-based position): "
    "one file per server when the table splits hot keys.",
)
@json_option
@debug_option
def export(store, operator, out, version, server, as_json):
    """Write one operator's table as the file a Flink job loads (--hash flink or pyflink).

    A table that splits hot keys needs one file per server, each loaded by the
    instances on that server: ``--server s3`` writes the routes seen from
    ``s3``, where a split key is an entry for its part there. Without
    ``--server`` split keys are written whole (their home instance), with a
    warning. Kafka and Spark jobs follow the store through ``locality.Router``
    instead, and Storm topologies through ``LocalityGrouping`` (docs/engines/).
    """
    from locality._validation import check_output_path
    from locality.engines.flink import write_routing_file
    from locality.store import ConfigStore

    check_output_path(out, "--out")
    stored = ConfigStore(store).get(version)
    config = stored.config
    if operator not in config.tables:
        raise click.BadParameter(
            f"version {stored.version} has operators {list(config.tables)}", param_hint="'--operator'"
        )
    table = config.tables[operator]
    engine = table.fallback.engine
    if engine not in ("flink", "pyflink"):
        raise click.UsageError(
            f"the tables of version {stored.version} fall back to {engine!r}; only Flink jobs load a file (a Kafka or "
            "Spark job follows the store through locality.Router, a Storm topology through LocalityGrouping of "
            "jvm/locality-storm: see docs/engines/)"
        )
    servers = list(config.topology.servers)
    name = None if server is None else _export_server(server, servers, stored.version)
    split_keys = len(table.splits)
    warning = None
    if split_keys and name is None:
        warning = (
            f"{operator!r} splits {split_keys:,} hot keys and no --server was given: this file routes them whole to "
            f"their home instance; export one file per server with --server (servers: {', '.join(servers)})"
        )
    write_routing_file(config, out, operator, server=name)
    document = {
        "store": store,
        "version": stored.version,
        "operator": operator,
        "engine": engine,
        "entries": len(table),
        "split_keys": split_keys,
        "server": name,
        "file": out,
        "warning": warning,
    }
    split = f" and {split_keys:,} split keys" if split_keys else ""
    seen = "" if name is None else f", as seen from server {name!r}"
    text = f"wrote {len(table):,} {engine} entries{split} of {operator!r} (version {stored.version}{seen}) to {out}"
    _emit(as_json, document, text if warning is None else f"{text}\nwarning: {warning}")


def _export_server(value: str, servers: list[str], version: int) -> str:
    """The server ``--server`` names among the version's ``servers``: a name, else a 0-based position.

    A name wins; text that is a number is a position only when no server
    name is a number (else it could mean either).
    """
    if value in servers:
        return value
    numeric = any(s.isascii() and s.isdigit() for s in servers)
    if value.isascii() and value.isdigit() and not numeric and int(value) < len(servers):
        return servers[int(value)]
    how = "no position: a server name is a number" if numeric else f"or a position 0..{len(servers) - 1}"
    raise click.BadParameter(
        f"{value!r} is not a server of version {version}; its servers are {list(servers)} (a name, {how})",
        param_hint="'--server'",
    )


@cli.command()
@click.option(
    "--workdir",
    type=click.Path(),
    default="demo-output",
    show_default=True,
    help="Where the generated trace and the store go.",
)
@click.option("--rows", type=int, default=200_000, show_default=True, help="Tuples in the generated trace.")
@click.option("--servers", type=int, default=6, show_default=True)
@output_options
def demo(workdir, rows, servers, as_json, quiet, master):
    """Generate a Twitter-like trace with drifting correlations, optimize on week 1, evaluate on week 2."""
    from locality._validation import check_integer, check_output_path
    from locality.datasets.catalog import card
    from locality.datasets.generate import generate
    from locality.topology import Topology
    from pipelines.evaluate import evaluate_trace
    from pipelines.offline import run
    from pipelines.params import OfflineParams
    from pipelines.progress import Stages
    from pipelines.trace import TraceSpec, read_trace

    check_integer(rows, "rows", "locality demo", lower=100, upper=100_000_000)  # both weeks hold rows; fits memory
    work = check_output_path(workdir, "--workdir", directory=True)
    trace_path = work / "twitter_like.parquet"
    work.mkdir(parents=True, exist_ok=True)
    if not trace_path.exists():  # the card's demo recipe (datasets/twitter_like)
        generate("twitter_like", trace_path, recipe="demo", overrides={"n_rows": rows})
    keys = card("twitter_like").keys
    week1 = TraceSpec(str(trace_path), keys, ts="ts", start="2015-06-01", end="2015-06-08")
    week2 = TraceSpec(str(trace_path), keys, ts="ts", start="2015-06-08", end="2015-06-15")
    params = OfflineParams(trace=week1, topology=Topology.uniform(keys, servers), store=str(work / "store"))
    spark = _session(master)
    with Stages(show=not quiet) as stages:
        result = run(spark, params, stages)
        with stages.stage("evaluate on week 2"):
            next_week = evaluate_trace(read_trace(spark, week2), result.config, keys)
    figures = next_week.to_dict()
    document = {"trace": str(trace_path), "store": str(work / "store"), "optimize": result.report, "next_week": figures}
    text = "\n".join(
        [
            f"demo trace: {trace_path} ({rows:,} tuples, 14 days, {servers} servers)",
            result.summary,
            "",
            *format_evaluation(figures, "week 2 (not seen by the optimizer)"),
        ]
    )
    _emit(as_json, document, text)


cli.add_command(cli_datasets.datasets)
cli.add_command(cli_datasets.generate)
cli.add_command(cli_switch.switch)


# ---------------------------------------------------------------------- entry point
def main(argv: list[str] | None = None) -> int:
    """Run the CLI and turn every outcome into its :class:`ExitCode`, with a one-line message on stderr.

    Errors of the input (:class:`~locality.errors.LocalityError`) print their
    message; anything else is an unexpected failure whose traceback goes to a
    log file the message names (or to stderr with ``--debug``).
    """
    state = RunState()
    args = sys.argv[1:] if argv is None else list(argv)
    as_json = "--json" in args
    with one_document(as_json):
        code = _run(args, state)
        if as_json and code != ExitCode.OK and not document_written():
            # a scheduler that parses stdout gets a document whatever happened: what failed, and the exit code
            write_document(json.dumps({"error": state.message, "exit_code": int(code)}))
        return code


def _run(args: list[str], state: RunState) -> int:
    """:func:`main`'s body: the command's outcome as an exit code."""
    try:
        code = cli.main(args=args, prog_name="locality", standalone_mode=False, obj=state)
    except click.exceptions.Exit as exc:
        return exc.exit_code
    except click.ClickException as exc:
        exc.show()
        state.message = exc.format_message()
        return ExitCode.BAD_INPUT
    except (click.Abort, KeyboardInterrupt):
        return _interrupted(state)
    except (StoreBusyError, StoreUnavailableError) as exc:
        return _report(state, exc, f"locality: {_with_options(exc, args)}", ExitCode.BUSY)
    except LocalityError as exc:
        return _report(state, exc, f"error: {_with_options(exc, args)}", ExitCode.BAD_INPUT)
    except Exception as exc:  # the one place an unexpected failure becomes an exit code
        if _broken_by_an_interrupt(exc):  # py4j's cleanup of a call Ctrl-C cut, failing in its turn (a dead JVM)
            return _interrupted(state)
        what = "failed" if isinstance(exc, JobError) else f"unexpected failure: {type(exc).__name__}:"
        return _report(state, exc, f"locality: {what} {_first_line(exc)}", ExitCode.CRASH, log=True)
    return int(code or 0)


def _interrupted(state: RunState) -> int:
    state.message = "interrupted"
    click.echo(f"locality: {state.message}", err=True)
    return ExitCode.INTERRUPTED


def _with_options(error: LocalityError, args: list[str]) -> str:
    """The message of ``error`` and the options that set the parameter it is about: ``... (option --max-entries)``.

    The library names its parameters (:attr:`~locality.errors.LocalityError.parameter`); a user of the command
    line typed options, found among the command's (:func:`_options_of`). The options go at the end, so the
    message reads as the library wrote it.
    """
    message = str(error)
    options = [o for o in _options_of(error.parameter, _command_of(args)) if o not in message]
    if not options:
        return message
    return f"{message} (option{'s' if len(options) > 1 else ''} {', '.join(options)})"


def _command_of(args: list[str]) -> click.Command | None:
    """The (sub)command ``args`` run: ``switch flink`` is ``flink`` of the group ``switch``."""
    command = None
    group: click.Command = cli
    for arg in args:
        if isinstance(group, click.Group) and arg in group.commands:
            command = group = group.commands[arg]
    return command


def _options_of(parameter: str | None, command: click.Command | None) -> list[str]:
    """The options of ``command`` that set the library's ``parameter``.

    Each option is named (its Python name, click's ``name``) after the parameter it sets, a field of an
    object its holder's and its own (``rebalance_every`` sets ``rebalance.every``). So ``parameter`` names
    the option of its name; else the options that together build it (``topology``: ``--servers``,
    ``--instances-per-server``, ``--topology``); else the option of the object it belongs to
    (``store.location``: ``--store``).
    """
    if parameter is None or command is None:
        return []
    spelled = {p.name: _long_option(p) for p in command.params if isinstance(p, click.Option)}
    name = parameter.replace(".", "_")
    if name in spelled:
        return [spelled[name]]
    parts = [option for other, option in spelled.items() if other.startswith(name + "_")]
    if parts:
        return parts
    path = parameter.split(".")[:-1]
    while path:
        if "_".join(path) in spelled:
            return [spelled["_".join(path)]]
        path.pop()
    return []


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return (text.splitlines()[0] if text else repr(exc))[:300]


def _report(state: RunState, exc: BaseException, message: str, code: ExitCode, log: bool = False) -> int:
    """Print ``message`` (one line) on stderr; the traceback goes to stderr with --debug, else (``log``) to a file."""
    if state.debug:
        traceback.print_exception(exc, file=sys.stderr)
    elif log:
        message += f" (traceback in {_log_traceback(exc)}; --debug prints it here)"
    click.echo(message, err=True)
    state.message = message
    return code


def _log_traceback(exc: BaseException) -> str:
    """Write the traceback of ``exc`` to a new log file and return its path (or why it could not)."""
    directory = Path(os.environ.get(LOG_DIR_VARIABLE) or tempfile.gettempdir())
    path = directory / f"locality-{datetime.now():%Y%m%d-%H%M%S}-{os.getpid()}.log"
    try:
        directory.mkdir(parents=True, exist_ok=True)
        with open(path, "a") as fh:
            fh.write(f"locality {' '.join(sys.argv[1:])}\n")
            traceback.print_exception(exc, file=fh)
    except OSError as error:
        return f"no log: {path} could not be written ({error.strerror})"
    return str(path)


if __name__ == "__main__":
    raise SystemExit(main())
