"""``locality switch flink``: a published version takes effect in a running Flink job, with its state.

Registered by :mod:`locality.cli`; a refusal or a failed step is an
:class:`~locality.errors.EngineError` or another
:class:`~locality.errors.LocalityError`, which its ``main`` turns into a
one-line message and exit code 2 (the message says where the job was left).
"""

from __future__ import annotations

import json
import os

import click

from locality.cli_options import debug_option, json_option
from locality.defaults import DEFAULT_SWITCH_TIMEOUT
from locality.report import format_switch

__all__ = ["switch"]


@click.group()
def switch() -> None:
    """Make a published version take effect in a running job, state included (docs/engines/flink.md)."""


@switch.command("flink", context_settings={"help_option_names": ["-h", "--help"]})
@click.option(
    "--rest",
    required=True,
    callback=lambda _ctx, _param, value: _rest_endpoint(value),
    help="The cluster's REST endpoint (the JobManager's), e.g. http://jm:8081.",
)
@click.option("--job", "job_id", required=True, help="The running job, keyed by the tables of --from.")
@click.option(
    "--store",
    required=True,
    help="The store: s3://BUCKET/PREFIX (the cluster reads it with the same AWS configuration), or a directory at "
    "the same path on the cluster's machines.",
)
@click.option(
    "--from",
    "from_version",
    type=click.IntRange(min=1),
    help="The version the job runs (default: the one it declares, its global job parameter locality.version).",
)
@click.option(
    "--to",
    "to_version",
    type=click.IntRange(min=1),
    help="The version to switch to (default: the store's current one).",
)
@click.option(
    "--savepoint-dir",
    required=True,
    help="Where the cluster writes the savepoint, e.g. s3://BUCKET/savepoints (a URI it can write); the rewritten "
    "one goes beside it.",
)
@click.option(
    "--operator",
    "operators",
    multiple=True,
    required=True,
    help="OPERATOR=UID[,state=NAME][,key=TYPE][,value=TYPE]: a keyed operator whose real keys' state the table of "
    "OPERATOR routes (its uid in the job; the MapState's name, default the uid; value type default long). Repeatable.",
)
@click.option(
    "--no-restart",
    is_flag=True,
    help="Stop the job with a savepoint and rewrite it, but start no job: print the savepoint to restart from on "
    "--to, for the deployment to restart it (an application cluster, e.g. a FlinkDeployment).",
)
@click.option(
    "--rewrite",
    "rewrite_where",
    type=click.Choice(["cluster", "local"]),
    default="cluster",
    show_default=True,
    help="Where the savepoint is rewritten: as a job on the cluster (uploaded through --rest), or on a MiniCluster "
    "in a JVM here, from --flink-home (an application cluster takes no jar).",
)
@click.option(
    "--flink-home",
    type=click.Path(exists=True, file_okay=False),
    help="With --rewrite local: a Flink distribution (lib/, and plugins/s3-fs-hadoop/ for s3:// savepoints) "
    "[default: $FLINK_HOME].",
)
@click.option("--jar", type=click.Path(exists=True, dir_okay=False), help="The job's jar (uploaded once per content).")
@click.option("--jar-id", help="Instead of --jar: the id of the job's jar already uploaded to the cluster.")
@click.option("--entry-class", help="The job's main class (needed unless --no-restart).")
@click.option(
    "--rewriter-jar",
    type=click.Path(exists=True, dir_okay=False),
    help="locality-flink-state's tool jar (default: the one `mvn -f jvm/pom.xml install` built in this checkout).",
)
@click.option(
    "--timeout",
    type=click.FloatRange(min=0, min_open=True, max=86_400),
    default=DEFAULT_SWITCH_TIMEOUT,
    show_default=True,
    help="Seconds each phase may take.",
)
@json_option
@debug_option
@click.argument("job_args", nargs=-1, type=click.UNPROCESSED, metavar="-- JOB_ARGS...")
def flink(
    rest,
    job_id,
    store,
    from_version,
    to_version,
    savepoint_dir,
    operators,
    no_restart,
    rewrite_where,
    flink_home,
    jar,
    jar_id,
    entry_class,
    rewriter_jar,
    timeout,
    as_json,
    job_args,
):
    """Stop a Flink job with a savepoint, rewrite it for another version, restart the job on it.

    The job's arguments follow `--`; `{version}` in them becomes the version it starts on, e.g.
    `-- --store s3://bucket/store --version {version} --input ...`. The savepoint is a consistent cut: records
    before it were routed by the old version, records after it by --to, and every key's state is on the
    subtask --to names when the job runs again. Nothing is stopped when a check fails; when the rewrite or
    the restart fails, a job that declares its version runs again on it from the untouched savepoint (exit
    2, the message says where the job is). With --no-restart the job stays stopped and the command prints
    the rewritten savepoint, which the deployment restarts the job from on --to.
    """
    from locality._stdout import document_stream
    from locality.engines.flink_rest import FlinkRest
    from locality.engines.flink_switch import check_store_side, switch_flink_job

    # Every option first, then the store, and only then the cluster: a wrong option contacts nothing.
    _check_restart_options(no_restart, jar, jar_id, entry_class, job_args)
    local = _local_rewrite(flink_home, rewriter_jar) if rewrite_where == "local" else None
    if local is not None:
        local.check(savepoint_dir)
    to_version = to_version if to_version is not None else _current_version(store)
    check_store_side(store, to_version, operators, from_version)
    client = FlinkRest(rest)
    result = switch_flink_job(
        client,
        job_id,
        store=store,
        from_version=from_version,
        to_version=to_version,
        savepoint_dir=savepoint_dir,
        operators=operators,
        rewrite=local or _cluster_rewrite(client, rewriter_jar),
        launcher=None if no_restart else _launcher(client, jar, jar_id, entry_class, job_args),
        timeout=timeout,
        progress=lambda line: click.echo(f"locality: {line}", err=True),
    )
    if as_json:
        click.echo(json.dumps(result.to_dict()), file=document_stream())
        return
    click.echo(format_switch(result.to_dict()))


def _check_restart_options(no_restart, jar, jar_id, entry_class, job_args) -> None:
    """The job's jar, main class and arguments: needed to restart it, refused when no job is started."""
    from locality.errors import InvalidParameterError

    if no_restart:
        if jar or jar_id or entry_class or job_args:
            raise InvalidParameterError(
                "--no-restart starts no job: --jar, --jar-id, --entry-class and the job's arguments are not used"
            )
        return
    if (jar is None) == (jar_id is None):
        raise InvalidParameterError("give the job's jar with exactly one of --jar and --jar-id")
    if not entry_class:
        raise InvalidParameterError("give the job's main class with --entry-class (or use --no-restart)")


def _current_version(store) -> int:
    from locality.errors import InvalidParameterError
    from locality.store import ConfigStore

    current = ConfigStore(store).current_version()
    if current is None:
        raise InvalidParameterError(f"the store {store} has no current version: give --to")
    return current


def _cluster_rewrite(client, rewriter_jar):
    """The rewrite as a job on the cluster, the tool jar uploaded through ``client``."""
    from locality.engines.flink_rest import Unreachable
    from locality.engines.flink_rewrite import ClusterRewrite
    from locality.errors import EngineError

    try:
        return ClusterRewrite(client, client.upload_jar(_tool_jar(rewriter_jar)))
    except Unreachable:
        raise
    except EngineError as error:
        raise EngineError(f"{error} (an application cluster takes no jar: rewrite with --rewrite local)") from None


def _local_rewrite(flink_home, rewriter_jar):
    """The rewrite in a local JVM over ``--flink-home`` (or ``$FLINK_HOME``)."""
    from pathlib import Path

    from locality.engines.flink_rewrite import LocalRewrite
    from locality.errors import InvalidParameterError

    home = flink_home or os.environ.get("FLINK_HOME")
    if not home:
        raise InvalidParameterError("--rewrite local needs a Flink distribution: --flink-home, or FLINK_HOME")
    return LocalRewrite(Path(home), _tool_jar(rewriter_jar))


def _tool_jar(rewriter_jar):
    """``--rewriter-jar``, else the tool jar this checkout built."""
    from pathlib import Path

    from locality.engines.flink_rewrite import rewriter_jar as built_rewriter

    return Path(rewriter_jar) if rewriter_jar else built_rewriter()


def _rest_endpoint(value: str) -> str:
    """``--rest`` as ``http(s)://HOST[:PORT]`` (a path prefix allowed, for a proxy); exit 2 naming it otherwise."""
    from urllib.parse import urlparse

    parsed = urlparse(value)
    try:
        port_ok = parsed.port is None or parsed.port > 0
    except ValueError:  # a port that is not a number, or out of range
        port_ok = False
    if parsed.scheme not in ("http", "https") or not parsed.hostname or not port_ok or parsed.query or parsed.fragment:
        raise click.BadParameter(f"expected the JobManager's REST endpoint, http://HOST:PORT; got {value!r}")
    return value


def _launcher(client, jar, jar_id, entry_class, job_args):
    from locality.engines.flink_switch import FlinkJobLauncher

    return FlinkJobLauncher(jar_id or client.upload_jar(jar), entry_class, tuple(job_args))
