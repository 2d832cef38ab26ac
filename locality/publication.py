"""Publish a run: its tables, with the report, the load plot and the migration plan that explain them.

Both jobs end a run the same way (the nightly :mod:`pipelines.offline` and the
online :mod:`locality.online`): the configuration goes into the store as a new
version beside what a person or a job reads of it, under the names
:mod:`locality.store` gives them: the report (:data:`~locality.store.REPORT`,
JSON, and :data:`~locality.store.REPORT_TEXT`, its text), the instance loads
beside their bound (:data:`~locality.store.LOAD_PLOT`), and the migration plan
from the version in force (:data:`~locality.store.MIGRATION_PLAN`, numbered
from that version to the one published), with the evaluation's headline
figures in the manifest, which ``locality show`` lists. :func:`publish_run`
does it, under the store's lock the caller holds, so that the number the plan
leads to is the version published.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from locality.evaluation import EvaluationReport
from locality.migration import MigrationPlan
from locality.plots import figure_png, instance_load_figure
from locality.report import format_summary
from locality.routing import RoutingConfiguration
from locality.store import LOAD_PLOT, MIGRATION_PLAN, REPORT, REPORT_TEXT, ConfigStore, PublishResult

__all__ = ["publish_run", "headline"]


def headline(evaluation: EvaluationReport) -> dict:
    """The figures a version's manifest keeps: locality beside hash routing's, imbalance, table entries."""
    figures = evaluation.to_dict()
    return {name: figures[name] for name in ("locality", "hash_locality", "imbalance", "table_entries")}


def publish_run(
    store: ConfigStore,
    config: RoutingConfiguration,
    evaluation: EvaluationReport,
    *,
    job: str,
    report: Callable[[MigrationPlan | None], dict],
    plan: MigrationPlan | None,
    from_version: int | None,
    alpha: float,
    fingerprint: str,
    metadata: Mapping | None = None,
    text: Callable[[dict], str] = format_summary,
    in_force_from: int | None = None,
) -> tuple[PublishResult, dict]:
    """Publish ``config`` as the store's next version, with its report, load plot and migration plan.

    Parameters
    ----------
    store : ConfigStore
        Held locked by the caller (the plan is numbered to its next version).
    config : RoutingConfiguration
        The tables to publish.
    evaluation : EvaluationReport
        Their figures beside hash routing's (the plot, the manifest's headline).
    job : str
        The job that made them (``"offline"``, ``"online"``), in the manifest.
    report : callable
        ``report(plan)``: the JSON report, made once ``plan`` is numbered.
    plan : MigrationPlan or None
        The moves from the version in force (None: the first version, or a redeployment).
    from_version : int or None
        The version in force, where the plan starts.
    alpha : float
        The balance bound the plot draws.
    fingerprint : str
        The run's identity in the store (:meth:`ConfigStore.publish`).
    metadata : mapping, optional
        More of the manifest (the trace, the window).
    text : callable
        The report's text from the report (default :func:`~locality.report.format_summary`).
    in_force_from : int, optional
        The point from which the version is in force for routers by point.

    Returns
    -------
    (PublishResult, dict)
        What the store did, and the report published.
    """
    if plan is not None:
        plan.from_version, plan.to_version = from_version, store.next_version()
    document = report(plan)
    topology = config.topology
    shares = {op: topology.instance_shares(op) for op in topology.operators}
    artifacts = {
        REPORT: document,
        REPORT_TEXT: text(document),
        LOAD_PLOT: figure_png(instance_load_figure(evaluation, shares, alpha)),
    }
    if plan is not None:
        artifacts[MIGRATION_PLAN] = plan.to_dict(config)
    published = store.publish(
        config,
        fingerprint=fingerprint,
        artifacts=artifacts,
        metadata={"job": job, **dict(metadata or {}), "summary": headline(evaluation)},
        in_force_from=in_force_from,
    )
    return published, document
