"""What each command prints for a person: the text beside the JSON document, which is the source of truth.

One function per command's output, each reading the document the command
prints with ``--json`` (or the library object it is made from), so that the
two never disagree: :func:`format_summary` (``optimize``, and a version's
``report.txt``), :func:`format_evaluation` (``evaluate``, ``demo``),
:func:`format_reconfiguration` (``reconfigure``), :func:`format_replay`
(``replay``), :func:`format_store` (``show``), :func:`format_switch`
(``switch flink``), with :func:`format_sketches` and :func:`point_text`
beside them.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime, timezone
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from locality.replay import ReplayResult
    from locality.store import StoreSurvey

__all__ = [
    "format_summary",
    "format_evaluation",
    "format_sketches",
    "format_reconfiguration",
    "format_replay",
    "format_store",
    "format_switch",
    "point_text",
]


def _pct(value: float) -> str:
    return f"{100 * value:.1f}%"


def format_evaluation(figures: Mapping, title: str) -> list[str]:
    """Lines for an evaluation dict (``EvaluationReport.to_dict()``), each figure beside hash routing's."""
    lines = [
        f"{title}: {figures['tuples']:,} tuples",
        f"  locality        {_pct(figures['locality']):>7}   (hash {_pct(figures['hash_locality'])})",
    ]
    for op, value in figures["imbalance"].items():
        lines.append(f"  imbalance {op:<12} {value:6.3f}   (hash {figures['hash_imbalance'][op]:.3f})")
    entries = ", ".join(f"{op} {n:,}" for op, n in figures["table_entries"].items())
    lines.append(f"  table entries   {entries}")
    if figures.get("dropped_rows"):
        lines.append(f"  dropped rows    {figures['dropped_rows']:,} (null or empty key, or bad weight)")
    return lines


def format_sketches(sketches: Mapping) -> list[str]:
    """Lines for the engines' sketches a run read (``SketchWindow.summary()``): what, and how exact."""
    window = sketches["window"]
    lines = [
        f"sketches: {sketches['intervals']:,} intervals from {window['start']} to {window['end']}"
        f" ({sketches['intervals_left_out']:,} straddling the window left out), {sketches['publishers']:,} publishers,"
        f" {sketches['objects']:,} objects, {sketches['bytes']:,} bytes",
        f"  sketch capacity {sketches['capacity']:,}, count error <= {sketches['error_bound']:g}"
        f" ({sketches['error_bound_share']:.3%} of the window's weight; a priori total/capacity"
        f" {sketches['apriori_error_bound']:g})",
    ]
    exact = sketches["exact_capacity"]
    if exact is None:
        lines.append("  the sketches held every key of the window: the counts are exact")
    else:
        least = "at least " if sketches["exact_capacity_is_lower_bound"] else ""
        lines.append(f"  a capacity of {least}{exact:,} would have made them exact (error 0)")
    return lines


def format_summary(report: Mapping) -> str:
    """A short text summary of an ``optimize`` / ``reconfigure`` report."""
    lines = []
    if report.get("reused"):
        version, current = report["version"], report.get("current_version")
        where = (
            "it is current"
            if version == current
            else f"CURRENT stays at {current} (`locality rollback --store STORE --to {version}` moves it back)"
        )
        lines.append(f"nothing published: version {version} was made from the same input and parameters; {where}")
    elif "version" in report:
        lines.append(f"version {report['version']} (previous {report.get('previous_version')})")
    counting = report.get("counting")
    if counting and counting["mode"] == "sketches":
        lines += format_sketches(counting["sketches"])
    elif counting:
        dropped = {k: v for k, v in counting["dropped"].items() if v}
        lines.append(
            f"trace: {counting['rows']:,} rows read, counted {counting['mode']}"
            + (f", dropped {dropped}" if dropped else "")
        )
        if counting["mode"] == "sketch":
            bound = max(counting["sketch_error_bound"].values(), default=0)
            lines.append(
                f"  sketch capacity {counting['sketch_capacity']:,}, count error <= {bound:g} "
                f"(pair coverage {', '.join(_pct(v) for v in counting['pair_coverage'].values())})"
            )
    if "in_sample" in report:
        how = "replayed" if report["in_sample"].get("method") == "replay" else "from the counts"
        lines += format_evaluation(report["in_sample"], f"in-sample ({how})")
    opt = report.get("optimization")
    if opt:
        lines.append(
            f"graph: {opt['vertices']:,} keys, {opt['edges']:,} pairs; METIS {opt['metis_seconds']:.2f} s, "
            f"{opt['repair_moves']} balance moves"
        )
        for hot in opt.get("hot_keys", []):
            lines.append(
                f"  INFEASIBLE: key {hot['key']!r} of {hot['operator']!r} carries {hot['load']:g}, "
                f"more than one instance may take ({hot['bound']:g})"
            )
    migration = report.get("migration")
    if migration and migration.get("relabeled"):
        lines.append(
            f"migration from version {migration['from_version']}: {migration['moved_keys']:,} keys move, "
            f"{_pct(migration['migration_cost_share'])} of the state (relabeled onto the servers that hold it)"
        )
        if migration.get("topology_change"):
            lines.append(f"  {migration['topology_change']}")
    elif migration and migration.get("from_version") is not None:
        lines.append(f"no migration plan: {migration['reason']}")
    stats = report.get("graph_statistics")
    if stats:
        lines.append(
            f"  components {stats['components']:,} (largest: {stats['largest_component_vertices']:,} keys, "
            f"{_pct(stats['largest_component_weight_share'])} of the load; via {stats['backend']})"
        )
        lines.append(f"  graph statistics via {stats['backend']}: {stats['backend_reason']}")
    return "\n".join(lines)


def point_text(point: int) -> str:
    """A schedule point as the user most likely gave it: a UTC time when it reads as epoch milliseconds of this era."""
    if 0 <= point < 10**14:
        return f"{datetime.fromtimestamp(point / 1000, tz=timezone.utc).isoformat()} ({point} ms)"
    return str(point)


def format_reconfiguration(outcome: Mapping) -> str:
    """What one online run did (``reconfigure``'s outcome): the decision, locality on the window, what moves."""
    verb = "published version" if outcome["published"] else "kept version"
    before = outcome["locality_before"]
    text = (
        f"{verb} {outcome['version']} (previous {outcome['previous_version']}): {outcome['reason']}\n"
        f"  locality on the window {'-' if before is None else f'{before:.1%}'} -> {outcome['locality_after']:.1%}"
        f" (hash {outcome['hash_locality']:.1%}); moves {outcome['moved_keys']:,} keys, "
        f"{outcome['migration_cost_share']:.1%} of the state"
    )
    if any(outcome.get("split_keys", {}).values()):
        text += f"; split keys {outcome['split_keys']}"
    if outcome.get("in_force_from") is not None:
        text += f"\n  in force for routers by point from {point_text(outcome['in_force_from'])}"
    if "served" in outcome:
        loads = outcome["served"]["loads"]
        served = ", ".join(f"{op} {max(v):,.0f} / {sum(v) / len(v):,.0f}" for op, v in loads.items())
        text += f"\n  served since {outcome['served']['since']} (most / mean per instance): {served}"
    if "sketches" in outcome:
        text += "\n" + "\n".join(format_sketches(outcome["sketches"]))
    return text


def format_replay(result: ReplayResult) -> str:
    """A replay window by window (``replay``): each window's figures, then their means after the first."""
    doc = result.to_dict()
    lines = [f"{result.mode} replay, {len(result.windows)} windows of {result.period}:"]
    for w in result.windows:
        lines.append(
            f"  {w.start[:10]}  {w.tuples:>8,} tuples  locality {w.locality:6.1%} (hash {w.hash_locality:5.1%})  "
            f"worst imbalance {w.worst_imbalance:.2f}  moved {w.migration_cost:5.1%}"
        )
    lines.append(
        f"mean over windows after the first: locality {doc['mean_locality']:.1%} "
        f"(hash {doc['mean_hash_locality']:.1%}),"
        f" worst imbalance {doc['mean_worst_imbalance']:.3f} (per day {doc['mean_daily_worst_imbalance']:.3f}),"
        f" state moved per window {doc['mean_state_moved']:.1%}"
    )
    return "\n".join(lines)


def format_store(store: str, survey: StoreSurvey) -> str:
    """A store's versions (``*`` the current one), the history of CURRENT, the switch schedule and what is damaged."""
    from locality.schedule import BEGINNING

    current, history = survey.current, survey.history
    since = next((e for e in reversed(history) if e["version"] == current), None) if current is not None else None
    why = (
        f" since {since.get('at') or '?'} ({since.get('action') or '?'}: {since.get('reason') or ''})" if since else ""
    )
    shown = current if survey.current_damage is None else "DAMAGED"
    lines = [f"store {store}: {len(survey.versions)} readable versions, current {shown}{why}"]
    for stored in survey.versions:
        manifest = stored.manifest
        mark = "*" if stored.version == current else " "
        retired = "  retired (never current: its run was interrupted)" if stored.version in survey.retired else ""
        lines.append(
            f"{mark} {stored.version:>4}  {manifest.get('created', '?')}  {manifest.get('job', '')}  "
            f"{_headline_figures(manifest.get('summary', {}))}{retired}".rstrip()
        )
    if history:
        lines.append("history of CURRENT (oldest first):")
        for entry in history:
            lines.append(
                f"  {entry.get('at') or '?'}  -> {entry['version']:>4}  (from {entry.get('previous')})  "
                f"{entry.get('action') or ''}: {entry.get('reason') or ''}"
            )
    schedule = survey.schedule
    if schedule.versions:
        lines.append(f"switch schedule (routers by point), sealed until {point_text(schedule.sealed_until)}:")
        for start, version in zip(schedule.starts, schedule.versions):
            lines.append(f"  from {'the beginning' if start == BEGINNING else point_text(start)}  -> {version:>4}")
    if survey.damage:
        lines.append(f"damaged ({len(survey.damage)}):")
        lines += [f"! {problem}" for problem in survey.damage]
    return "\n".join(lines)


def _headline_figures(summary: object) -> str:
    """A version's locality beside hash routing, from its manifest's summary (blank when it holds no such figures)."""
    if not isinstance(summary, dict):
        return ""
    figures = [summary.get("locality"), summary.get("hash_locality")]
    if not all(isinstance(f, (int, float)) and not isinstance(f, bool) for f in figures):
        return ""
    return f"locality {figures[0]:.1%} (hash {figures[1]:.1%})"


def format_switch(result: Mapping) -> str:
    """One line of a Flink switch (``switch flink``'s result): where the job is, how long it was down, what moved."""
    moved = "; ".join(
        f"{op}: {c['moved']:,} of {c['entries']:,} keys moved ({c['moved_bytes']:,} of {c['bytes']:,} bytes)"
        for op, c in result["operators"].items()
    )
    if result["new_job"] is None:
        return (
            f"job {result['old_job']} stopped on version {result['from_version']}; restart it on version "
            f"{result['to_version']} from {result['rewritten']}; {moved}; savepoint {result['savepoint']}"
        )
    return (
        f"job {result['new_job']} runs on version {result['to_version']} (was {result['old_job']} on "
        f"{result['from_version']}), down {result['phases']['down']:.1f} s; {moved}; savepoints "
        f"{result['savepoint']} -> {result['rewritten']}"
    )
