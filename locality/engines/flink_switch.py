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
Maven module ``jvm/locality-flink-state``: a Flink job on the savepoint's files), and
the job restarts from it on the new version, the sources resuming exactly where
the cut left them. This is the core paper's protocol (Caneill et al.,
Middleware 2016, section 3.4) with Flink's savepoint in the place of its
buffering: no record of a moved key is processed while its state moves,
because none is processed at all.

:func:`switch_flink_job` does it through the cluster's REST API
(:class:`~locality.engines.flink_rest.FlinkRest`), in four phases, each a
function of its own: the checks (:func:`check_switch`: nothing stops when one
fails), the stop, the rewrite (on the cluster or on a MiniCluster here:
:mod:`locality.engines.flink_rewrite`) and the restart; a failed rewrite or
restart falls back on the old version (:func:`_recover`), from each phase. The savepoints are
wherever the cluster writes them (``s3://bucket/savepoints``: no machine needs
a disk another one sees). An application cluster runs one job, takes no jar and
ends with its job; there the switch rewrites locally and hands the rewritten
savepoint back (no ``launcher``), for the user's deployment to restart from.
A rewrite or a restart that fails restarts the job on its old version from the
untouched savepoint, when the switch restarts jobs at all and the old version
is the job's declared one.
"""

from __future__ import annotations

import logging
import re
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlparse

from locality.defaults import DEFAULT_SWITCH_TIMEOUT
from locality.engines.flink_rest import FlinkRest
from locality.engines.flink_rewrite import REWRITE_CLASS, RewriteRequest, Rewritten, rewriter_jar
from locality.errors import EngineError, InvalidParameterError
from locality.storage import is_remote, open_objects

__all__ = [
    "CheckedSwitch",
    "FlinkJobLauncher",
    "REWRITE_CLASS",
    "SwitchResult",
    "VERSION_FIELD",
    "VERSION_PARAMETER",
    "OperatorSpec",
    "check_store_side",
    "check_switch",
    "parse_operator_spec",
    "rewriter_jar",
    "switch_flink_job",
]

logger = logging.getLogger(__name__)

#: What the job's arguments hold where the version goes (``--version {version}``).
VERSION_FIELD = "{version}"
#: The global job parameter in which a job declares the version it runs (Java: ``JobVersion.declare``).
VERSION_PARAMETER = "locality.version"


@dataclass(frozen=True)
class FlinkJobLauncher:
    """How the job is started: an uploaded jar, its main class, and its arguments with ``{version}`` in them."""

    jar_id: str
    entry_class: str
    args: tuple[str, ...]

    def args_for(self, version: int) -> list[str]:
        return [arg.replace(VERSION_FIELD, str(version)) for arg in self.args]

    def check(self, rest: FlinkRest) -> None:
        """Before the stop: the job's jar is on the cluster."""
        if not rest.has_jar(self.jar_id):
            raise EngineError(f"Flink at {rest.url} has no uploaded jar {self.jar_id!r}")

    def start(self, rest: FlinkRest, version: int, savepoint: str, *, timeout: float) -> str:
        """Run the job on ``version`` from ``savepoint`` and wait until every task runs (state restored); its id."""
        job = rest.run_jar(self.jar_id, self.entry_class, self.args_for(version), savepoint=savepoint)
        rest.wait_until_running(job, timeout=timeout)
        return job


@dataclass(frozen=True)
class CheckedSwitch:
    """A switch checked before anything stops: the job, both versions, the operators, the migration plan's moves.

    ``declared`` says whether the job declares ``from_version`` itself (then it may be restarted on it
    by a failed switch); ``store`` is the URI or absolute path the rewrite reads; ``parallelism`` is the
    keyed operators' (the rewrite keeps it).
    """

    job_id: str
    from_version: int
    to_version: int
    declared: bool
    store: str
    operators: tuple[str, ...]
    names: tuple[str, ...]
    plan_moved: dict[str, int]
    parallelism: int

    def rewrite_request(self, savepoint: str) -> RewriteRequest:
        """The rewrite of ``savepoint`` into ``SAVEPOINT-vTO``, beside it."""
        output = f"{savepoint.rstrip('/')}-v{self.to_version}"
        return RewriteRequest(savepoint, output, self.store, self.from_version, self.to_version, self.operators,
                              self.names, self.parallelism)  # fmt: skip


@dataclass
class SwitchResult:
    """What a switch did: the jobs and savepoints, the rewrite's counts, and how long each phase took.

    ``phases`` holds seconds: ``stop`` (stop request to savepoint written and job ended), ``rewrite``
    (rewrite started to finished) and, when the switch restarted the job, ``restart`` (job submitted
    to every task running, state restored) and ``down`` (stop request to running again).
    ``stopped_at`` and ``running_at`` are wall-clock times (seconds since the epoch) of the stop
    request and of the restarted job running. Without a restart (an application cluster: the user's
    deployment restarts it), ``new_job`` and ``running_at`` are None and ``rewritten`` is the
    savepoint to restart from on ``to_version``.
    """

    old_job: str
    new_job: str | None
    from_version: int
    to_version: int
    savepoint: str
    rewritten: str
    rewrite_job: str | None
    rewrite_where: str
    operators: dict[str, dict[str, int]]
    plan_moved_keys: dict[str, int]
    phases: dict[str, float] = field(default_factory=dict)
    stopped_at: float = 0.0
    running_at: float | None = None

    def to_dict(self) -> dict:
        return dict(vars(self))


def check_switch(
    rest: FlinkRest,
    job_id: str,
    *,
    store: str | Path,
    to_version: int,
    operators: Sequence[str],
    from_version: int | None = None,
) -> CheckedSwitch:
    """What can be checked before the job stops (see :func:`switch_flink_job`); raises on the first problem.

    The store first (a wrong option contacts no cluster), each version read whole once.
    """
    from locality.router import load_snapshot
    from locality.store import ConfigStore

    config_store = ConfigStore(store)
    after = _with_operators(load_snapshot(config_store, to_version), operators)
    before = None if from_version is None else _with_operators(load_snapshot(config_store, from_version), operators)
    job = rest.job(job_id)
    if job["state"] != "RUNNING":
        raise EngineError(f"job {job_id} is {job['state']}, not RUNNING: there is nothing to switch")
    declared = _declared_version(rest, job_id)
    from_version = _version_it_runs(job_id, declared, from_version, to_version)
    if before is None:  # the version the job declares
        before = _with_operators(load_snapshot(config_store, from_version), operators)
    names = _operators_of(operators, before.configuration)
    plan = after.plan_from(before)
    plan_moved = {op: int(len(plan.moves_of(op))) for op in names}
    parallelism = max(before.configuration.tables[op].fallback.n_instances for op in names)
    store_arg = str(store) if is_remote(store) else str(Path(store).resolve())
    return CheckedSwitch(job_id, from_version, to_version, declared is not None, store_arg, tuple(operators),
                         tuple(names), plan_moved, parallelism)  # fmt: skip


def switch_flink_job(
    rest: FlinkRest,
    job_id: str,
    *,
    store: str | Path,
    to_version: int,
    savepoint_dir: str,
    operators: Sequence[str],
    rewrite,
    launcher: FlinkJobLauncher | None = None,
    from_version: int | None = None,
    timeout: float = DEFAULT_SWITCH_TIMEOUT,
    progress: Callable[[str], None] = logger.info,
) -> SwitchResult:
    """Switch the running Flink job ``job_id`` to version ``to_version`` of ``store``.

    Parameters
    ----------
    rest : FlinkRest
        The cluster's REST API.
    job_id : str
        The running job, keyed by the tables of the version it runs.
    store : str or path
        The configuration store: ``s3://bucket/prefix``, which the cluster reads with the same AWS
        configuration, or a directory at the same path on the cluster's machines.
    to_version : int
        The version the job restarts on.
    savepoint_dir : str
        Where the savepoint is taken (a URI the cluster writes, e.g. ``s3://bucket/savepoints``); the
        rewritten savepoint goes beside it, named after it with ``-v<to_version>``.
    operators : sequence of str
        ``OPERATOR=UID[,state=NAME][,key=TYPE][,value=TYPE]`` for each keyed operator whose
        real keys' state the tables route (``RealKeyOperator`` in Java).
    rewrite : ClusterRewrite or LocalRewrite
        Where the savepoint is rewritten (:mod:`locality.engines.flink_rewrite`).
    launcher : FlinkJobLauncher, optional
        The job's jar (uploaded), main class and arguments; ``{version}`` in them becomes the
        version it starts on. None: the job is not restarted, the rewritten savepoint is handed
        back (an application cluster, restarted by its deployment).
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
        Flink refused or failed a step. The message says where the job is: still running (a check
        or the savepoint failed), restarted on its version from the untouched savepoint (the rewrite
        or the restart failed, the version being the job's declared one), or stopped with the
        savepoints named (no restart asked, the version not declared, or no restart succeeded).
    """
    checked = check_switch(rest, job_id, store=store, to_version=to_version, operators=operators,
                           from_version=from_version)  # fmt: skip
    rewrite.check(savepoint_dir)
    if launcher is not None:
        launcher.check(rest)
    clock = _Clock()
    savepoint = _stop(rest, checked, savepoint_dir, timeout, progress, clock)
    request = checked.rewrite_request(savepoint)
    rewritten = _rewrite(rest, checked, rewrite, launcher, request, timeout, progress, clock)
    if launcher is None:
        progress(f"job {job_id} stays stopped: restart it on version {to_version} from {request.output}")
        new_job = None
    else:
        new_job = _restart(rest, checked, launcher, request.output, savepoint, timeout, progress, clock)
    return SwitchResult(
        job_id, new_job, checked.from_version, to_version, savepoint, request.output, rewritten.job, rewrite.where,
        rewritten.counts, checked.plan_moved, clock.phases, clock.stopped_at,
        None if new_job is None else clock.stopped_at + clock.phases["down"],
    )  # fmt: skip


# -- the checks ------------------------------------------------------------------------------------------------
def _declared_version(rest: FlinkRest, job_id: str) -> int | None:
    """The version a job declares (its global job parameter ``locality.version``), or None."""
    value = rest.user_config(job_id).get(VERSION_PARAMETER)
    try:
        return None if value is None else int(value)
    except ValueError:
        raise EngineError(f"job {job_id} declares {VERSION_PARAMETER}={value!r}, not a version number") from None


def _version_it_runs(job_id: str, declared: int | None, from_version: int | None, to_version: int) -> int:
    """The version the job runs: the one it declares, checked against ``from_version``, else that one on trust."""
    if from_version is None and declared is None:
        raise InvalidParameterError(
            f"job {job_id} does not declare the version it runs ({VERSION_PARAMETER}): give it (from_version)",
            parameter="from_version",
        )
    if declared is not None and from_version not in (None, declared):
        raise InvalidParameterError(
            f"job {job_id} runs version {declared} ({VERSION_PARAMETER}), not the version given, {from_version}",
            parameter="from_version",
        )
    runs = declared if declared is not None else from_version
    if runs == to_version:
        raise InvalidParameterError(f"job {job_id} already runs version {to_version}: there is nothing to switch")
    return runs


def check_store_side(store: str | Path, to_version: int, operators: Sequence[str], from_version: int | None) -> None:
    """What the store says of the options, before any cluster is contacted: the versions, the operators' tables."""
    from locality.store import ConfigStore

    config_store = ConfigStore(store)
    for version in (to_version, from_version):
        if version is not None:
            _operators_of(operators, config_store.get(version).config)


@dataclass(frozen=True)
class OperatorSpec:
    """``OPERATOR=UID[,state=NAME][,key=TYPE][,value=TYPE]`` parsed as the rewrite tool parses it (Java's
    ``RealKeyOperator.parse``): the value type is a named one or a class the tool looks up on its classpath."""

    operator: str
    uid: str
    state: str
    key: str | None
    value: str


_OPERATOR_FORM = "OPERATOR=UID[,state=NAME][,key=TYPE][,value=TYPE]"
_KEY_TYPES = ("string", "long", "int")
_JAVA_CLASS = re.compile(r"^[A-Za-z_$][\w$]*(\.[A-Za-z_$][\w$]*)+$")
_VALUE_TYPES = ("long", "int", "double", "boolean", "string")


def parse_operator_spec(text: str) -> OperatorSpec:
    """One of the ``operators`` specs, checked part by part; InvalidParameterError naming the part that is wrong."""
    parts = text.split(",")
    operator, _, uid = parts[0].partition("=")
    if not operator.strip() or not uid.strip():
        raise _spec_error(f"an operator spec must be {_OPERATOR_FORM}; got {text!r}")
    fields = {"state": uid, "key": None, "value": "long"}
    for part in parts[1:]:
        name, _, given = part.partition("=")
        if name not in fields:
            raise _spec_error(f"the operator spec {text}: unknown part {name!r} (state, key or value)")
        if not given.strip():
            raise _spec_error(f"the operator spec {text}: {part!r} needs a value")
        fields[name] = given
    if fields["key"] is not None and fields["key"] not in _KEY_TYPES:
        raise _spec_error(f"the operator spec {text}: key must be string, long or int; got {fields['key']!r}")
    if fields["value"] not in _VALUE_TYPES and not _JAVA_CLASS.match(fields["value"]):
        raise _spec_error(
            f"the operator spec {text}: value must be one of {list(_VALUE_TYPES)} or a Java class; "
            f"got {fields['value']!r}"
        )
    return OperatorSpec(operator, uid, fields["state"], fields["key"], fields["value"])


def _spec_error(message: str) -> InvalidParameterError:
    """An error about one of the ``operators`` specs."""
    return InvalidParameterError(message, parameter="operators")


def _with_operators(snapshot, operators: Sequence[str]):
    """``snapshot`` (a version read whole), once its tables are checked to route the ``operators`` specs."""
    _operators_of(operators, snapshot.configuration)
    return snapshot


def _operators_of(specs: Sequence[str], config) -> list[str]:
    """The store operators the ``OPERATOR=UID[,...]`` specs name, checked against the version's tables."""
    names = []
    for spec in specs:
        name = parse_operator_spec(spec).operator
        if name not in config.tables:
            raise _spec_error(
                f"the operator spec {spec!r}: the store's topology has no operator {name!r} (it has "
                f"{list(config.tables)})"
            )
        engine = config.tables[name].fallback.engine
        if engine != "flink":
            raise InvalidParameterError(
                f"the table of {name!r} falls back to {engine!r}; a Java Flink job keyed by the tables needs tables "
                "built on the 'flink' hash"
            )
        names.append(name)
    if not names:
        raise _spec_error(f"name at least one keyed operator ({_OPERATOR_FORM})")
    return names


# -- the phases ------------------------------------------------------------------------------------------------
class _Clock:
    """Wall-clock time of the stop request, and the seconds of each phase since the previous one ended."""

    def __init__(self) -> None:
        self.stopped_at = time.time()
        self._started = self._mark = time.monotonic()
        self.phases: dict[str, float] = {}

    def lap(self, phase: str) -> float:
        now = time.monotonic()
        self.phases[phase], self._mark = now - self._mark, now
        return self.phases[phase]

    def down(self) -> float:
        self.phases["down"] = time.monotonic() - self._started
        return self.phases["down"]


def _stop(rest: FlinkRest, checked: CheckedSwitch, savepoint_dir: str, timeout: float, progress, clock) -> str:
    """Stop the job with a savepoint in ``savepoint_dir``: the cut between the two versions. Its path."""
    progress(f"stopping job {checked.job_id} with a savepoint in {savepoint_dir} (version {checked.from_version})")
    savepoint = rest.stop_with_savepoint(checked.job_id, savepoint_dir, timeout=timeout)
    progress(f"savepoint {savepoint} ({clock.lap('stop'):.1f} s)")
    return savepoint


def _rewrite(
    rest: FlinkRest, checked: CheckedSwitch, rewrite, launcher: FlinkJobLauncher | None, request: RewriteRequest,
    timeout: float, progress, clock,
) -> Rewritten:  # fmt: skip
    """Rewrite the savepoint for the new version, where ``rewrite`` runs it; on failure, the job back on the old one.

    What a failed rewrite wrote is removed; the untouched savepoint stays for :func:`_recover`.
    """
    progress(f"rewriting it for version {request.to_version} ({rewrite.where})")
    try:
        rewritten = rewrite.run(request, timeout=timeout)
    except EngineError as error:
        _remove_partial(request.output)
        raise _recover(rest, checked, launcher, request.savepoint, str(error), timeout) from None
    moved = ", ".join(f"{op} {c['moved']:,} of {c['entries']:,} keys" for op, c in rewritten.counts.items())
    progress(f"rewritten into {request.output} ({clock.lap('rewrite'):.1f} s): moved {moved}")
    return rewritten


def _restart(
    rest: FlinkRest, checked: CheckedSwitch, launcher: FlinkJobLauncher, rewritten: str, savepoint: str,
    timeout: float, progress, clock,
) -> str:  # fmt: skip
    """Start the job on the new version from the rewritten savepoint; on failure, back on the old one."""
    progress(f"restarting on version {checked.to_version}")
    try:
        job = launcher.start(rest, checked.to_version, rewritten, timeout=timeout)
    except EngineError as error:
        also = f" (the rewritten savepoint {rewritten} stays)"
        raise _recover(rest, checked, launcher, savepoint, f"{error}{also}", timeout) from None
    clock.lap("restart")
    progress(f"job {job} runs on version {checked.to_version} ({clock.phases['restart']:.1f} s; "
             f"down {clock.down():.1f} s)")  # fmt: skip
    return job


def _recover(
    rest: FlinkRest, checked: CheckedSwitch, launcher: FlinkJobLauncher | None, savepoint: str, error: str,
    timeout: float,
) -> EngineError:  # fmt: skip
    """After a failed rewrite or restart: the job back on its version from ``savepoint`` when that is sure; the error.

    Restarting a job whose version is not declared on ``from_version`` by guess could put every key's state
    where no record looks: it stays stopped, as does a job the switch was not asked to restart.
    """
    old = checked.from_version
    if launcher is None:
        return EngineError(f"{error}; the job is stopped: restart it on version {old} from {savepoint}")
    if not checked.declared:
        return EngineError(
            f"{error}; the job is stopped (it does not declare its version, so it is not "
            f"restarted on version {old}, the one given it runs, by guess): restart it from {savepoint}"
        )
    try:
        restarted = launcher.start(rest, old, savepoint, timeout=timeout)
    except EngineError as again:
        return EngineError(
            f"{error}; restarting on version {old} from {savepoint} failed too ({again}): the job is stopped"
        )
    return EngineError(f"{error}; job restarted on version {old} from {savepoint} as job {restarted}")


def _remove_partial(savepoint: str) -> None:
    """Remove what a failed rewrite wrote of ``savepoint``, in a directory or a bucket (anything else stays, named).

    Flink names a local savepoint ``file:/path`` (one slash); the store's backends take a path or an
    ``s3://`` URI of the folder it is in.
    """
    parsed = urlparse(savepoint)
    if parsed.scheme in ("", "file"):
        folder = Path(parsed.path if parsed.scheme else savepoint)
        parent, name = str(folder.parent), folder.name
    elif is_remote(savepoint):
        parent, _, name = savepoint.rstrip("/").rpartition("/")
    else:
        return
    try:
        open_objects(parent, owner="locality switch flink", parameter="savepoint").delete_folder(name)
    except Exception as error:  # noqa: BLE001 - the switch's own error says more than a failed cleanup
        logger.warning("could not remove the half-written savepoint %s: %s", savepoint, error)
