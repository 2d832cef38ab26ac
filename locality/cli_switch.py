"""``locality switch flink``: a published version takes effect in a running Flink job, with its state.

Registered by :mod:`locality.cli`; a refusal or a failed step is an
:class:`~locality.errors.EngineError` or another
:class:`~locality.errors.LocalityError`, which its ``main`` turns into a
one-line message and exit code 2 (the message says where the job was left).
"""

from __future__ import annotations

import json

import click

__all__ = ["switch"]


@click.group()
def switch() -> None:
    """Make a published version take effect in a running job, state included (docs/engines/flink.md)."""


@switch.command("flink", context_settings={"help_option_names": ["-h", "--help"]})
@click.option("--rest", required=True, help="The cluster's REST endpoint (the JobManager's), e.g. http://jm:8081.")
@click.option("--job", "job_id", required=True, help="The running job, keyed by the tables of --from.")
@click.option(
    "--store",
    required=True,
    type=click.Path(exists=True, file_okay=False),
    help="The store (same path on the cluster).",
)
@click.option(
    "--from",
    "from_version",
    type=int,
    help="The version the job runs (default: the one it declares, its global job parameter locality.version).",
)
@click.option("--to", "to_version", type=int, help="The version to switch to (default: the store's current one).")
@click.option(
    "--savepoint-dir",
    required=True,
    help="Where the cluster writes the savepoint (a path or URI it can write); the rewritten one goes beside it.",
)
@click.option(
    "--operator",
    "operators",
    multiple=True,
    required=True,
    help="OPERATOR=UID[,state=NAME][,key=TYPE][,value=TYPE]: a keyed operator whose real keys' state the table of "
    "OPERATOR routes (its uid in the job; the MapState's name, default the uid; value type default long). Repeatable.",
)
@click.option("--jar", type=click.Path(exists=True, dir_okay=False), help="The job's jar (uploaded once per content).")
@click.option("--jar-id", help="Instead of --jar: the id of the job's jar already uploaded to the cluster.")
@click.option("--entry-class", required=True, help="The job's main class.")
@click.option(
    "--rewriter-jar",
    type=click.Path(exists=True, dir_okay=False),
    help="locality-flink-state's tool jar (default: the one `mvn -f jvm/pom.xml install` built in this checkout).",
)
@click.option("--timeout", type=float, default=300.0, show_default=True, help="Seconds each phase may take.")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON document on stdout.")
@click.argument("job_args", nargs=-1, type=click.UNPROCESSED, metavar="-- JOB_ARGS...")
def flink(
    rest,
    job_id,
    store,
    from_version,
    to_version,
    savepoint_dir,
    operators,
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
    `-- --store /data/store --version {version} --input ...`. The savepoint is a consistent cut: records
    before it were routed by the old version, records after it by --to, and every key's state is on the
    subtask --to names when the job runs again. Nothing is stopped when a check fails; when the rewrite or
    the restart fails, a job that declares its version runs again on it from the untouched savepoint (exit
    2, the message says where the job is).
    """
    from locality._stdout import document_stream
    from locality.engines.flink_rest import FlinkRest
    from locality.engines.flink_switch import FlinkJobLauncher, switch_flink_job
    from locality.engines.flink_switch import rewriter_jar as built_rewriter
    from locality.errors import InvalidParameterError
    from locality.store import ConfigStore

    if (jar is None) == (jar_id is None):
        raise InvalidParameterError("give the job's jar with exactly one of --jar and --jar-id")
    if to_version is None:
        to_version = ConfigStore(store).current_version()
        if to_version is None:
            raise InvalidParameterError(f"the store {store} has no current version: give --to")
    client = FlinkRest(rest)
    jar_id = jar_id or client.upload_jar(jar)
    rewriter = client.upload_jar(rewriter_jar or built_rewriter())
    result = switch_flink_job(
        client,
        job_id,
        store=store,
        from_version=from_version,
        to_version=to_version,
        savepoint_dir=savepoint_dir,
        operators=operators,
        launcher=FlinkJobLauncher(jar_id, entry_class, tuple(job_args)),
        rewriter_jar_id=rewriter,
        timeout=timeout,
        progress=lambda line: click.echo(f"locality: {line}", err=True),
    )
    if as_json:
        click.echo(json.dumps(result.to_dict()), file=document_stream())
        return
    moved = "; ".join(
        f"{op}: {c['moved']:,} of {c['entries']:,} keys moved ({c['moved_bytes']:,} of {c['bytes']:,} bytes)"
        for op, c in result.operators.items()
    )
    click.echo(
        f"job {result.new_job} runs on version {to_version} (was {job_id} on {result.from_version}), down "
        f"{result.phases['down']:.1f} s; {moved}; savepoints {result.savepoint} -> {result.rewritten}"
    )
