"""The human-readable summary of a job report (the JSON report is the source of truth)."""

from __future__ import annotations

from collections.abc import Mapping

__all__ = ["format_summary", "format_evaluation", "format_sketches"]


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
