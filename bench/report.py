"""The benchmark's output: pipe tables (Markdown, so the README can quote them) and the target checks.

Input is the results dict :mod:`bench.run` builds and writes as JSON; every number is in milliseconds,
events per second or tokens, as the column headers say.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

Row = Sequence[str]


@dataclass(frozen=True, slots=True)
class Target:
    """One target, its measured value and whether it is met.

    Attributes:
        name: the target, stated.
        measured: the measured value, formatted.
        met: ``None`` when it was not measured in this run.
    """

    name: str
    measured: str
    met: bool | None


def table(headers: Row, rows: Sequence[Row]) -> str:
    """A Markdown pipe table with columns padded to their widest cell."""
    widths = [max(len(str(c)) for c in col) for col in zip(headers, *rows, strict=True)]

    def line(cells: Row) -> str:
        return "| " + " | ".join(str(c).ljust(w) for c, w in zip(cells, widths, strict=True)) + " |"

    sep = "|" + "|".join("-" * (w + 2) for w in widths) + "|"
    return "\n".join([line(headers), sep, *(line(r) for r in rows)])


def ms(value: float | None) -> str:
    """Milliseconds with precision that suits their size."""
    if value is None:
        return "—"
    if value < 10:
        return f"{value:.2f}"
    if value < 1000:
        return f"{value:.1f}"
    return f"{value:,.0f}"


def _phases(phases: Mapping[str, float]) -> str:
    short = {
        "graph_query_ms": "graph",
        "policy_ms": "policy",
        "selection_ms": "select",
        "serialization_ms": "serial",
        "persist_other_ms": "persist+other",
    }
    return " ".join(f"{short[k]} {ms(v)}" for k, v in phases.items())


def _latency_cells(r: Mapping[str, Any]) -> tuple[str, ...]:
    head = (r["workload"], f"{r['events']:,}", r["backend"], r["scenario"])
    if r["timing"] is None:
        return (*head, "skipped", "—", "0", r.get("target", ""), r.get("skipped") or "")
    t = r["timing"]
    extra = r.get("extra") or {}
    size = extra.get("manifest_bytes")
    rss = extra.get("peak_rss_mb")
    return (
        *head,
        ms(t["median_ms"]),
        ms(t["p95_ms"]),
        str(t["n"]),
        r.get("target", ""),
        _phases(r["phases"]),
        "—" if size is None else f"{size / 1024:,.1f}",
        "—" if rss is None else f"{rss:,.0f}",
    )


def latency_table(latency: Sequence[Mapping[str, Any]]) -> str:
    """Assembly CPU time per workload, backend and scenario (skipped scenarios say why).

    Also the persisted manifest's size (KB of canonical JSON) and the process's peak resident memory so
    far (MB: the whole run shares one process, so it only grows).
    """
    headers = (
        "workload",
        "events",
        "backend",
        "scenario",
        "median ms",
        "p95 ms",
        "n",
        "target",
        "median phases (wall ms)",
        "manifest KB",
        "peak RSS MB",
    )
    return table(headers, [_latency_cells(r) for r in latency])


def growth_table(latency: Sequence[Mapping[str, Any]]) -> str:
    """Per backend and scenario, the synthetic workloads' median CPU time and manifest size over the smallest's.

    The target is a ratio of at most 1.5 between 100,000 and 1,000 events (warm, append-one, and
    the manifest size).
    """
    synthetic = [r for r in latency if str(r["workload"]).startswith("synthetic") and r["timing"] is not None]
    rows = []
    for backend in sorted({r["backend"] for r in synthetic}):
        for scenario in ("cold", "restart", "warm", "append-one"):
            runs = sorted(
                (r for r in synthetic if r["backend"] == backend and r["scenario"] == scenario),
                key=lambda r: r["events"],
            )
            if len(runs) < 2:
                continue
            base, top = runs[0], runs[-1]
            size_base = (base.get("extra") or {}).get("manifest_bytes")
            size_top = (top.get("extra") or {}).get("manifest_bytes")
            rows.append(
                (
                    backend,
                    scenario,
                    f"{base['events']:,} → {top['events']:,}",
                    f"{top['timing']['median_ms'] / base['timing']['median_ms']:.2f}×",
                    f"{size_top / size_base:.2f}×" if size_base and size_top else "—",
                )
            )
    return table(("backend", "scenario", "events", "CPU time ratio", "manifest size ratio"), rows)


def first_call_table(rows: Sequence[Mapping[str, Any]]) -> str:
    """The first call of a new process per synthetic size (:mod:`bench.first_call`): CPU, wall, memory."""
    cells = [
        (
            r["workload"],
            f"{r['events']:,}",
            r["backend"],
            ms(r["call_cpu_ms"]),
            ms(r["call_wall_ms"]),
            ms(r["tokenizer_ms"]),
            ms(r.get("embedder_ms", 0.0)),
            ms(r["process_cpu_ms"]),
            f"{r['rss_before_mb']:,.0f}",
            f"{r['peak_rss_mb']:,.0f}",
        )
        for r in rows
    ]
    headers = (
        "workload",
        "events",
        "backend",
        "call CPU ms",
        "call wall ms",
        "tokenizer load CPU ms",
        "embedding model load CPU ms",
        "process CPU ms",
        "RSS before MB",
        "peak RSS MB",
    )
    return table(headers, cells)


def import_table(imports: Sequence[Mapping[str, Any]]) -> str:
    """Import throughput per workload and backend."""
    rows = [
        (
            r["workload"],
            f"{r['events']:,}",
            r["backend"],
            f"{r['seconds']:.2f}",
            f"{r['events_per_s']:,.0f}",
            f"{r['records']:,}",
            "≥ 5,000 events/s" if r["backend"] == "sqlite" else "",
        )
        for r in imports
    ]
    return table(("workload", "events", "backend", "seconds", "events/s", "records", "target"), rows)


def _ratio(baseline: float | None, ours: float | None) -> str:
    if not baseline or not ours:
        return "—"
    ratio = baseline / ours
    return f"{ratio:.2f}×" if ratio >= 0.1 else f"{ratio:.2g}×"


def _pct(part: int | None, whole: int) -> str:
    return f"{100 * part / whole:.0f}%" if whole and part is not None else "—"


def _num(value: int | None) -> str:
    return "—" if value is None else f"{value:,}"


def peers_table(peers: Sequence[Mapping[str, Any]]) -> str:
    """Same-run latency of ctxledger (SQLite) and the peers on the same messages; ratios = peer / ours."""
    rows = []
    for r in peers:
        trim = r.get("trim_ms")
        rows.append(
            (
                r["workload"],
                f"{r['events']:,}",
                ms(r["ours_cold_ms"]),
                ms(r["ours_warm_ms"]),
                ms(r["newest_fit_counting_ms"]),
                ms(r["newest_fit_cached_ms"]),
                ms(trim),
                _ratio(trim, r["ours_cold_ms"]),
                _ratio(r["newest_fit_counting_ms"], r["ours_cold_ms"]),
                _ratio(r["newest_fit_cached_ms"], r["ours_warm_ms"]),
                f"{_num(r['ours_tokens'])} / {r['newest_fit_tokens']:,} / {r['replay_tokens']:,}",
                f"{_pct(r['ours_tokens'], r['budget_tokens'])} / {_pct(r['newest_fit_tokens'], r['budget_tokens'])}",
            )
        )
    headers = (
        "workload",
        "events",
        "ours cold",
        "ours warm",
        "newest-fit counting",
        "newest-fit cached",
        "trim_messages",
        "trim ÷ cold",
        "newest-fit counting ÷ cold",
        "newest-fit cached ÷ warm",
        "tokens ours / newest-fit / replay",
        "B_input filled ours / newest-fit",
    )
    return table(headers, rows)


def _reasons(counts: Mapping[str, int] | None) -> str:
    if counts is None:
        return "— (not measured)"
    return ", ".join(f"{k} {v:,}" for k, v in counts.items()) or "none"


def omitted_table(peers: Sequence[Mapping[str, Any]]) -> str:
    """Records the warm SQLite assembly left out, per reason code (why the payload is as full as it is)."""
    rows = [(r["workload"], _reasons(r["ours_omitted_by_reason"])) for r in peers]
    return table(("workload", "omitted records by reason (warm, SQLite)"), rows)


def quality_table(quality: Mapping[str, Any]) -> str:
    """The tau-bench result: the bundled (headline) trajectory, then every trajectory of the dataset."""
    h, s = quality["headline"], quality["summary"]
    rows = [
        (
            h["conversation_id"],
            "1",
            str(h["events"]),
            f"{h['replay_tokens']:,}",
            f"{h['input_tokens']:,}",
            f"{100 * h['reduction']:.1f}%",
            str(len(h["lost"])),
            "1" if h["error"] else "0",
        ),
        (
            f"all of {Path(quality['dataset']).name}",
            str(s["trajectories"]),
            f"{s['over_budget']} over budget",
            f"{s['total_replay_tokens']:,}",
            f"{s['total_input_tokens']:,}",
            f"{100 * s['median_reduction_over_budget']:.1f}% (median of those over budget)",
            str(s["required_lost"]),
            str(s["failed"]),
        ),
    ]
    headers = (
        "trajectory",
        "trajectories",
        "events",
        "replay tokens",
        "assembled tokens",
        "reduction",
        "required lost",
        "failed",
    )
    return table(headers, rows)


def targets_table(targets: Sequence[Target]) -> str:
    """Each target beside what was measured."""
    verdict = {True: "met", False: "MISSED", None: "not measured"}
    return table(("target", "measured", "verdict"), [(t.name, t.measured, verdict[t.met]) for t in targets])
