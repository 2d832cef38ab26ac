"""A new table version in a running Flink job: stop it with a savepoint, rewrite the savepoint, restart it.

A Flink job keyed by the tables (``RoutingKeySelector`` in Java) copies the routes
into its job graph, so a running job cannot change them; and each real key's
state sits in the ``MapState`` of its routing key, in that routing key's key
group. A switch is therefore a restart, and the engine gives the switch point:
**stop-with-savepoint** is a consistent cut of the stream (every record before
the savepoint's barrier was processed by the old job with the old routes, none
after it), so every upstream instance switches at the same record without any
coordination of ours, as ``docs/switch.md`` requires of a switch. Between the
stop and the restart, the savepoint is rewritten so that every real key's state
sits under the routing key of the new version (``RewriteSavepoint`` of the
Maven module ``jvm/locality-flink-state``, on Flink's State Processor API), and
the job restarts from it on the new version, the sources resuming exactly where
the cut left them. This is the core paper's protocol (Caneill et al.,
Middleware 2016, section 3.4) with Flink's savepoint in the place of its
buffering: no record of a moved key is processed while its state moves,
because none is processed at all.

:func:`switch_flink_job` does it through the cluster's REST API
(:class:`~locality.engines.flink_rest.FlinkRest`): the rewrite runs as a Flink
job on the same cluster (its slots are free while the job is stopped), so it
reads the savepoint and the store where the cluster does. What can be checked
before the stop is checked first; a rewrite that fails restarts the job on the
old version from the untouched savepoint.
"""

from __future__ import annotations

import logging
import shutil
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlparse

from locality.engines.flink_rest import FlinkRest
from locality.errors import EngineError, InvalidParameterError

__all__ = [
    "FlinkJobLauncher",
    "SwitchResult",
    "switch_flink_job",
    "rewriter_jar",
    "REWRITE_CLASS",
    "VERSION_FIELD",
    "VERSION_PARAMETER",
]

logger = logging.getLogger(__name__)

#: The main of the savepoint rewrite, in ``locality-flink-state``'s tool jar.
REWRITE_CLASS = "io.locality.flink.state.RewriteSavepoint"
#: What the job's arguments hold where the version goes (``--version {version}``).
VERSION_FIELD = "{version}"
#: The global job parameter in which a job declares the version it runs (Java: ``JobVersion.declare``).
VERSION_PARAMETER = "locality.version"
_REWRITE_PREFIX = "locality-rewrite/"


def rewriter_jar() -> Path:
    """The tool jar built in this checkout (``mvn -f jvm/pom.xml install``): ``locality-flink-state-*-tool.jar``."""
    target = Path(__file__).resolve().parents[2] / "jvm" / "locality-flink-state" / "target"
    found = sorted(target.glob("locality-flink-state-*-tool.jar"))
    if not found:
        raise InvalidParameterError(
            f"no savepoint rewriter jar in {target}: build it with `mvn -f jvm/pom.xml install`, or give --rewriter-jar"
        )
    return found[-1]


@dataclass(frozen=True)
class FlinkJobLauncher:
    """How the job is started: an uploaded jar, its main class, and its arguments with ``{version}`` in them."""

    jar_id: str
    entry_class: str
    args: tuple[str, ...]

    def args_for(self, version: int) -> list[str]:
        return [arg.replace(VERSION_FIELD, str(version)) for arg in self.args]


@dataclass
class SwitchResult:
    """What a switch did: the jobs and savepoints, the rewrite's counts, and how long each phase took.

    ``phases`` holds seconds: ``stop`` (stop request to savepoint written and job ended),
    ``rewrite`` (rewrite job submitted to finished), ``restart`` (job submitted to every task
    running, state restored) and ``down`` (stop request to running again). ``stopped_at`` and
    ``running_at`` are wall-clock times (seconds since the epoch) of the stop request and of
    the restarted job running.
    """

    old_job: str
    new_job: str
    from_version: int
    to_version: int
    savepoint: str
    rewritten: str
    rewrite_job: str
    operators: dict[str, dict[str, int]]
    plan_moved_keys: dict[str, int]
    phases: dict[str, float] = field(default_factory=dict)
    stopped_at: float = 0.0
    running_at: float = 0.0

    def to_dict(self) -> dict:
        return dict(vars(self))


def _operators_of(specs: Sequence[str], config) -> list[str]:
    """The store operators the ``OPERATOR=UID[,...]`` specs name, checked against the version's tables."""
    names = []
    for spec in specs:
        name = spec.split("=", 1)[0]
        if "=" not in spec or not name:
            raise InvalidParameterError(
                f"--operator must be OPERATOR=UID[,state=NAME][,key=TYPE][,value=TYPE]; got {spec!r}"
            )
        if name not in config.tables:
            raise InvalidParameterError(
                f"--operator {spec!r}: the store's topology has no operator {name!r} (it has {list(config.tables)})"
            )
        engine = config.tables[name].fallback.engine
        if engine != "flink":
            raise InvalidParameterError(
                f"the table of {name!r} falls back to {engine!r}; a Java Flink job keyed by "
                "the tables needs --hash flink"
            )
        names.append(name)
    if not names:
        raise InvalidParameterError("name at least one keyed operator with --operator OPERATOR=UID")
    return names


def switch_flink_job(
    rest: FlinkRest,
    job_id: str,
    *,
    store: str | Path,
    to_version: int,
    savepoint_dir: str,
    operators: Sequence[str],
    launcher: FlinkJobLauncher,
    rewriter_jar_id: str,
    from_version: int | None = None,
    timeout: float = 300.0,
    progress: Callable[[str], None] = logger.info,
) -> SwitchResult:
    """Switch the running Flink job ``job_id`` to version ``to_version`` of ``store``.

    Parameters
    ----------
    rest : FlinkRest
        The cluster's REST API.
    job_id : str
        The running job, keyed by the tables of the version it runs.
    store : path
        The configuration store, at the same path on the cluster's machines.
    to_version : int
        The version the job restarts on.
    savepoint_dir : str
        Where the savepoint is taken (a URI or path the cluster writes); the rewritten
        savepoint goes beside it, named after it with ``-v<to_version>``.
    operators : sequence of str
        ``OPERATOR=UID[,state=NAME][,key=TYPE][,value=TYPE]`` for each keyed operator whose
        real keys' state the tables route (``RealKeyOperator`` in Java).
    launcher : FlinkJobLauncher
        The job's jar (uploaded), main class and arguments; ``{version}`` in them becomes the
        version it starts on.
    rewriter_jar_id : str
        The uploaded tool jar of ``locality-flink-state``.
    from_version : int, optional
        The version the job runs. A job that declares it (``JobVersion.declare``, the global
        job parameter ``locality.version``) needs none, and a wrong one is refused before
        anything stops; an undeclared one is taken on trust (the rewrite still refuses a
        savepoint whose state is not where this version puts it).
    timeout : float
        Seconds each phase (stop, rewrite, restart) may take.
    progress : callable
        Receives one line per step.

    Returns
    -------
    SwitchResult

    Raises
    ------
    InvalidParameterError, StoreError
        Before anything is stopped: a version, operator or table that cannot be switched.
    EngineError
        Flink refused or failed a step. The message says where the job is: still running (the
        savepoint failed), restarted on its version from the untouched savepoint (the rewrite
        or the restart failed, the version being the job's declared one), or stopped with the
        savepoints named (the version was not declared, or no restart succeeded).
    """
    from locality.router import load_snapshot
    from locality.store import ConfigStore

    job = rest.job(job_id)
    if job["state"] != "RUNNING":
        raise EngineError(f"job {job_id} is {job['state']}, not RUNNING: there is nothing to switch")
    declared = _declared_version(rest, job_id)
    if from_version is None and declared is None:
        raise InvalidParameterError(
            f"job {job_id} does not declare the version it runs ({VERSION_PARAMETER}): give --from"
        )
    if declared is not None and from_version not in (None, declared):
        raise InvalidParameterError(
            f"job {job_id} runs version {declared} ({VERSION_PARAMETER}), not --from {from_version}"
        )
    from_version = declared if declared is not None else from_version
    if from_version == to_version:
        raise InvalidParameterError(f"job {job_id} already runs version {to_version}: there is nothing to switch")
    config_store = ConfigStore(store)
    before, after = load_snapshot(config_store, from_version), load_snapshot(config_store, to_version)
    names = _operators_of(operators, before.configuration)
    _operators_of(operators, after.configuration)
    plan = after.plan_from(before)
    plan_moved = {op: int(len(plan.moves_of(op))) for op in names}
    parallelism = max(before.configuration.tables[op].fallback.n_instances for op in names)
    for jar in (launcher.jar_id, rewriter_jar_id):
        if not rest.has_jar(jar):
            raise EngineError(f"Flink at {rest.url} has no uploaded jar {jar!r}")

    def back_to_old(error: EngineError, savepoint: str, also: str = "") -> EngineError:
        """Restart the job on its version from ``savepoint`` when that version is sure; the error to raise."""
        if declared is None:
            return EngineError(
                f"{error}{also}; the job is stopped (it does not declare its version, so it is not "
                f"restarted on --from {from_version} by guess): restart it from {savepoint}"
            )
        try:
            restarted = _restart(rest, launcher, from_version, savepoint, timeout)
        except EngineError as again:
            return EngineError(
                f"{error}{also}; restarting on version {from_version} from {savepoint} failed too "
                f"({again}): the job is stopped"
            )
        return EngineError(
            f"{error}{also}; job restarted on version {from_version} from {savepoint} as job {restarted}"
        )

    phases: dict[str, float] = {}
    stopped_at = time.time()
    started = time.monotonic()
    progress(f"stopping job {job_id} with a savepoint in {savepoint_dir} (version {from_version})")
    savepoint = rest.stop_with_savepoint(job_id, savepoint_dir, timeout=timeout)
    phases["stop"] = time.monotonic() - started
    progress(f"savepoint {savepoint} ({phases['stop']:.1f} s); rewriting it for version {to_version}")

    rewritten = f"{savepoint.rstrip('/')}-v{to_version}"
    mark = time.monotonic()
    rewrite_args = [
        "--savepoint",
        savepoint,
        "--output",
        rewritten,
        "--store",
        str(Path(store).resolve()),
        "--from",
        str(from_version),
        "--to",
        str(to_version),
        "--parallelism",
        str(parallelism),
    ]
    for spec in operators:
        rewrite_args += ["--operator", spec]
    try:
        rewrite_job = rest.run_jar(rewriter_jar_id, REWRITE_CLASS, rewrite_args, parallelism=parallelism)
        state = rest.wait_for_end(rewrite_job, timeout=timeout)
        if state != "FINISHED":
            raise EngineError(f"the savepoint rewrite (job {rewrite_job}) ended {state}: {rest.failure(rewrite_job)}")
    except EngineError as error:
        _remove_local(rewritten)
        raise back_to_old(error, savepoint) from None
    phases["rewrite"] = time.monotonic() - mark
    counts = _rewrite_counts(rest.accumulators(rewrite_job), names)
    moved = ", ".join(f"{op} {c['moved']:,} of {c['entries']:,} keys" for op, c in counts.items())
    progress(
        f"rewritten into {rewritten} ({phases['rewrite']:.1f} s): moved {moved}; restarting on version {to_version}"
    )

    mark = time.monotonic()
    try:
        new_job = _restart(rest, launcher, to_version, rewritten, timeout)
    except EngineError as error:
        raise back_to_old(error, savepoint, f" (the rewritten savepoint {rewritten} stays)") from None
    phases["restart"] = time.monotonic() - mark
    phases["down"] = time.monotonic() - started
    progress(f"job {new_job} runs on version {to_version} ({phases['restart']:.1f} s; down {phases['down']:.1f} s)")
    return SwitchResult(
        job_id,
        new_job,
        from_version,
        to_version,
        savepoint,
        rewritten,
        rewrite_job,
        counts,
        plan_moved,
        phases,
        stopped_at,
        stopped_at + phases["down"],
    )


def _declared_version(rest: FlinkRest, job_id: str) -> int | None:
    """The version a job declares (its global job parameter ``locality.version``), or None."""
    value = rest.user_config(job_id).get(VERSION_PARAMETER)
    try:
        return None if value is None else int(value)
    except ValueError:
        raise EngineError(f"job {job_id} declares {VERSION_PARAMETER}={value!r}, not a version number") from None


def _restart(rest: FlinkRest, launcher: FlinkJobLauncher, version: int, savepoint: str, timeout: float) -> str:
    """Run the job on ``version`` from ``savepoint`` and wait until it runs; its id."""
    job = rest.run_jar(launcher.jar_id, launcher.entry_class, launcher.args_for(version), savepoint=savepoint)
    rest.wait_until_running(job, timeout=timeout)
    return job


def _rewrite_counts(accumulators: dict[str, str], operators: Sequence[str]) -> dict[str, dict[str, int]]:
    """The rewrite job's counters (``locality-rewrite/OPERATOR/FIELD``) per operator (Java's ``RewriteSummary``)."""
    counts: dict[str, dict[str, int]] = {op: {} for op in operators}
    for name, value in accumulators.items():
        if name.startswith(_REWRITE_PREFIX):
            op, _, what = name[len(_REWRITE_PREFIX) :].partition("/")
            counts.setdefault(op, {})[what] = int(value)
    fields = ("entries", "bytes", "moved", "moved_bytes", "rekeyed")
    return {op: {f: fields_of.get(f, 0) for f in fields} for op, fields_of in counts.items()}


def _remove_local(path: str) -> None:
    """Remove a half-written savepoint when it is on this machine's file system (a remote one stays, named)."""
    parsed = urlparse(path)
    if parsed.scheme in ("", "file"):
        shutil.rmtree(parsed.path if parsed.scheme else path, ignore_errors=True)
