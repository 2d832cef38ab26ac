"""A Flink cluster's REST API, as far as a version switch needs it: jobs, savepoints, jars.

Every Flink cluster (standalone, YARN, Kubernetes, a MiniCluster with a REST
endpoint) serves the same REST API on its JobManager (``rest.port``, 8081 by
default), so a switch driven through it works wherever the cluster runs; no
Flink client or distribution is needed where ``locality`` runs. The calls are
those of Flink's REST API reference (``/jobs/:jobid/stop``,
``/jobs/:jobid/savepoints/:triggerid``, ``/jars/upload``, ``/jars/:jarid/run``,
``/jobs/:jobid``, ``/jobs/:jobid/accumulators``, ``/jobs/:jobid/exceptions``),
made with the standard library. Every wait is bounded; a refusal or an
unreachable endpoint raises :class:`~locality.errors.EngineError` quoting Flink.
"""

from __future__ import annotations

import hashlib
import json
import logging
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Callable
from pathlib import Path

from locality.errors import EngineError

__all__ = ["FlinkRest", "SAVEPOINT_FORMAT", "Unreachable"]

logger = logging.getLogger(__name__)

#: The savepoint format a switch asks for: the one the rewrite reads and writes, whatever the state backend.
SAVEPOINT_FORMAT = "CANONICAL"
#: Vertex states of a job that is not yet processing records (Flink's ExecutionState before RUNNING).
_STARTING = {"CREATED", "SCHEDULED", "DEPLOYING", "INITIALIZING", "RECONCILING"}
_ENDED = {"FINISHED", "CANCELED", "FAILED"}


class Unreachable(EngineError):
    """Nobody answers at the REST endpoint (a refused connection, a timeout), as opposed to Flink refusing a call."""


class FlinkRest:
    """The REST API of the Flink cluster at ``url`` (e.g. ``http://jobmanager:8081``).

    Parameters
    ----------
    url : str
        The JobManager's REST endpoint.
    request_timeout : float, default 60
        Seconds one HTTP request may take (an upload or a job submission runs the job's main).
    poll_interval : float, default 0.2
        Seconds between two looks at a job or a savepoint while waiting.
    """

    def __init__(self, url: str, *, request_timeout: float = 60.0, poll_interval: float = 0.2) -> None:
        self.url = url.rstrip("/")
        self.request_timeout = request_timeout
        self.poll_interval = poll_interval

    # ------------------------------------------------------------------ requests
    def _request(
        self,
        method: str,
        path: str,
        body: dict | None = None,
        *,
        data: bytes | None = None,
        content_type: str = "application/json",
    ) -> dict:
        if body is not None:
            data = json.dumps(body).encode()
        request = urllib.request.Request(self.url + path, data=data, method=method)
        if data is not None:
            request.add_header("Content-Type", content_type)
        try:
            with urllib.request.urlopen(request, timeout=self.request_timeout) as response:
                text = response.read().decode()
        except urllib.error.HTTPError as error:
            raise EngineError(
                f"Flink at {self.url} refused {method} {path} (HTTP {error.code}): "
                f"{_flink_errors(error.read().decode(errors='replace'))}"
            ) from None
        except (urllib.error.URLError, TimeoutError, ConnectionError) as error:
            reason = getattr(error, "reason", error)
            raise Unreachable(f"cannot reach Flink's REST API at {self.url} ({method} {path}): {reason}") from None
        return json.loads(text) if text else {}

    def overview(self) -> dict:
        """The cluster's overview: TaskManagers, slots, jobs, Flink's version."""
        return self._request("GET", "/overview")

    def job(self, job_id: str) -> dict:
        """A job's details: ``state``, ``vertices`` (each with ``status``, ``parallelism`` and ``metrics``)."""
        return self._request("GET", f"/jobs/{job_id}")

    def user_config(self, job_id: str) -> dict[str, str]:
        """A job's global job parameters (``execution-config.user-config`` of ``/jobs/:jobid/config``)."""
        return self._request("GET", f"/jobs/{job_id}/config").get("execution-config", {}).get("user-config", {})

    def jobs(self) -> list[dict]:
        """Every job the cluster knows: ``id`` and ``status``."""
        return self._request("GET", "/jobs")["jobs"]

    def accumulators(self, job_id: str) -> dict[str, str]:
        """A job's user accumulators, name -> value as Flink prints it."""
        found = self._request("GET", f"/jobs/{job_id}/accumulators")
        return {a["name"]: a["value"] for a in found.get("user-task-accumulators", [])}

    def failure(self, job_id: str) -> str:
        """Why a job failed, from its latest failure: the exception thrown by locality's code if one was.

        A failure in one task makes Flink fail the others, and the exception reported first
        may be one of those consequences (a lost operator event, a cancelled task); the one
        thrown from ``io.locality`` classes is the reason a user can act on.
        """
        found = self._request("GET", f"/jobs/{job_id}/exceptions")
        entries = found.get("exceptionHistory", {}).get("entries", [])
        if not entries:
            return ""
        traces = [e.get("stacktrace", "") for e in [entries[0], *entries[0].get("concurrentExceptions", [])]]
        return _cause_lines(next((t for t in traces if "at io.locality." in t), traces[0]))

    # ------------------------------------------------------------------ jars and jobs
    def upload_jar(self, path: str | Path) -> str:
        """Upload a jar (once per content: an identical jar uploaded before is reused); its jar id."""
        path = Path(path)
        if not path.is_file():
            raise EngineError(f"jar {path} does not exist")
        content = path.read_bytes()
        name = f"{path.stem}-{hashlib.sha256(content).hexdigest()[:12]}.jar"
        for uploaded in self._request("GET", "/jars").get("files", []):
            if uploaded.get("name") == name:
                return uploaded["id"]
        boundary = uuid.uuid4().hex
        body = b"".join(
            [
                f'--{boundary}\r\nContent-Disposition: form-data; name="jarfile"; filename="{name}"\r\n'.encode(),
                b"Content-Type: application/x-java-archive\r\n\r\n",
                content,
                f"\r\n--{boundary}--\r\n".encode(),
            ]
        )
        done = self._request(
            "POST", "/jars/upload", data=body, content_type=f"multipart/form-data; boundary={boundary}"
        )
        logger.info("uploaded %s to %s", path, self.url)
        return Path(done["filename"]).name

    def has_jar(self, jar_id: str) -> bool:
        return any(f.get("id") == jar_id for f in self._request("GET", "/jars").get("files", []))

    def run_jar(
        self,
        jar_id: str,
        entry_class: str,
        args: list[str],
        *,
        savepoint: str | None = None,
        parallelism: int | None = None,
    ) -> str:
        """Run the main of an uploaded jar (detached), restoring ``savepoint`` if given; the new job's id.

        Every piece of the savepoint's state must find its operator (``allowNonRestoredState`` is false).
        """
        body: dict = {"entryClass": entry_class, "programArgsList": list(args), "allowNonRestoredState": False}
        if savepoint is not None:
            body["savepointPath"] = savepoint
        if parallelism is not None:
            body["parallelism"] = parallelism
        return self._request("POST", f"/jars/{jar_id}/run", body)["jobid"]

    def stop_with_savepoint(self, job_id: str, directory: str, *, timeout: float) -> str:
        """Stop a job with a savepoint (not drained: event time does not jump) in ``directory``; its path.

        Flink takes the savepoint as one consistent cut: every record before its barrier has
        been processed, none after it, and the sources' positions are saved with it. The job
        then ends (``FINISHED``). If the savepoint fails, Flink keeps the job running. An
        application cluster may stop serving once its job has ended (unless it is configured
        with ``execution.shutdown-on-application-finish: false``, as Flink's Kubernetes
        Operator configures it): a REST endpoint gone after the savepoint completed counts as
        the job's end.
        """
        body = {"targetDirectory": directory, "drain": False, "formatType": SAVEPOINT_FORMAT}
        trigger = self._request("POST", f"/jobs/{job_id}/stop", body)["request-id"]
        status = self._wait(
            lambda: self._request("GET", f"/jobs/{job_id}/savepoints/{trigger}"),
            lambda s: s["status"]["id"] == "COMPLETED",
            timeout,
            f"the savepoint of job {job_id}",
        )
        operation = status.get("operation", {})
        if "location" not in operation:
            cause = _cause_lines(operation.get("failure-cause", {}).get("stack-trace", ""))
            raise EngineError(f"Flink did not stop job {job_id} with a savepoint (the job keeps running): {cause}")
        try:
            self.wait_for_end(job_id, timeout=timeout)
        except Unreachable:
            logger.info("%s stopped serving after job %s stopped: an application cluster ends with its job", self.url,
                        job_id)  # fmt: skip
        return operation["location"]

    # ------------------------------------------------------------------ waits
    def wait_for_end(self, job_id: str, *, timeout: float) -> str:
        """Wait until a job has ended; its final state (``FINISHED``, ``CANCELED`` or ``FAILED``)."""
        return self._wait(lambda: self.job(job_id), lambda j: j["state"] in _ENDED, timeout, f"job {job_id} to end")[
            "state"
        ]

    def wait_until_running(self, job_id: str, *, timeout: float) -> dict:
        """Wait until every task of a job runs (state restored); its details.

        Raises
        ------
        EngineError
            If the job ends instead (the message quotes its failure).
        """
        job = self._wait(
            lambda: self.job(job_id),
            lambda j: (
                j["state"] in _ENDED
                or (j["state"] == "RUNNING" and not any(v["status"] in _STARTING for v in j["vertices"]))
            ),
            timeout,
            f"job {job_id} to run",
        )
        if job["state"] in _ENDED and job["state"] != "FINISHED":
            raise EngineError(f"job {job_id} ended {job['state']} instead of running: {self.failure(job_id)}")
        return job

    def _wait(self, look: Callable[[], dict], done: Callable[[dict], bool], timeout: float, what: str) -> dict:
        deadline = time.monotonic() + timeout
        while True:
            seen = look()
            if done(seen):
                return seen
            if time.monotonic() > deadline:
                raise EngineError(f"waited {timeout:g} s for {what} at {self.url}; last seen: {_short(seen)}")
            time.sleep(self.poll_interval)


def _flink_errors(text: str) -> str:
    """Flink's ``{"errors": [...]}`` reply, down to the lines that say what went wrong."""
    try:
        errors = json.loads(text).get("errors", [text])
    except (ValueError, AttributeError):
        errors = [text]
    return _cause_lines("\n".join(str(e) for e in errors))


def _cause_lines(stacktrace: str, causes: int = 4) -> str:
    """A Java stack trace down to its message and its last ``Caused by:`` lines (where the reason is)."""
    lines = [line.strip() for line in stacktrace.strip().splitlines()]
    kept = lines[:1] + [line for line in lines[1:] if line.startswith("Caused by:")][-causes:]
    return " | ".join(kept)[:2000]


def _short(seen: dict) -> str:
    return json.dumps({k: seen[k] for k in ("state", "status") if k in seen}) or str(seen)[:200]
