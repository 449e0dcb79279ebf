"""The issue's benchmark targets (ctxledger issue 2, "Targets") checked against one run's results.

All on the synthetic traces (``gen_trace.py``) and on SQLite, as the issue measures them:

* warm next-call assembly, median: 10,000 events ≤ 30 ms, 100,000 events ≤ 300 ms;
* after appending one event to an assembled conversation, the next assembly (median) ≤ 10 ms, at
  every size;
* cold assembly at 10,000 events at least 2× faster than langchain-core ``trim_messages`` with an exact
  tiktoken counter on the same messages, in the same run;
* import ≥ 5,000 events/s into SQLite, counting tokens on the way, at every size;
* the bundled tau-bench trajectory at the demo's 8k window: a token reduction against full replay with
  no required item lost (and none lost on any trajectory of the shared tau-bench file).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from bench.report import Target, ms

WARM_MS = {10_000: 30.0, 100_000: 300.0}
APPEND_MS = 10.0
COLD_VS_TRIM = 2.0
IMPORT_EVENTS_PER_S = 5_000.0


def latency_target(workload_kind: str, backend: str, scenario: str, events: int) -> str:
    """The target string to print beside a latency row ("" when the issue sets none)."""
    if workload_kind != "synthetic" or backend != "sqlite":
        return ""
    if scenario == "warm" and events in WARM_MS:
        return f"≤ {WARM_MS[events]:.0f} ms"
    if scenario == "append-one":
        return f"≤ {APPEND_MS:.0f} ms"
    if scenario == "cold" and events == 10_000:
        return f"≥ {COLD_VS_TRIM:.0f}× faster than trim_messages"
    return ""


def _synthetic_sqlite(rows: Sequence[Mapping[str, Any]], scenario: str | None = None) -> list[Mapping[str, Any]]:
    return [
        r
        for r in rows
        if r["kind"] == "synthetic" and r["backend"] == "sqlite" and (scenario is None or r["scenario"] == scenario)
    ]


def _warm(latency: Sequence[Mapping[str, Any]], events: int) -> Target:
    name = f"warm {events:,} events ≤ {WARM_MS[events]:.0f} ms (median, SQLite)"
    row = next((r for r in _synthetic_sqlite(latency, "warm") if r["events"] == events), None)
    if row is None:
        return Target(name, "—", None)
    if row["timing"] is None:
        return Target(name, f"skipped: {row['skipped']}", False)
    median = row["timing"]["median_ms"]
    return Target(name, f"{ms(median)} ms", median <= WARM_MS[events])


def _append(latency: Sequence[Mapping[str, Any]]) -> Target:
    rows = _synthetic_sqlite(latency, "append-one")
    name = f"append one event, next assembly ≤ {APPEND_MS:.0f} ms (median, SQLite)"
    if not rows:
        return Target(name, "—", None)
    measured = ", ".join(f"{r['events']:,}: {_median_or_skip(r)}" for r in rows)
    return Target(name, measured, all(r["timing"] and r["timing"]["median_ms"] <= APPEND_MS for r in rows))


def _median_or_skip(row: Mapping[str, Any]) -> str:
    return f"{ms(row['timing']['median_ms'])} ms" if row["timing"] else f"skipped ({row['skipped']})"


def _cold(peers: Sequence[Mapping[str, Any]]) -> Target:
    name = f"cold 10,000 events ≥ {COLD_VS_TRIM:.0f}× faster than trim_messages + tiktoken"
    row = next((r for r in peers if r["kind"] == "synthetic" and r["events"] == 10_000), None)
    if row is None or not row.get("trim_ms"):
        return Target(name, "—", None)
    if row["ours_cold_ms"] is None:
        return Target(name, f"cold skipped (predicted too slow); trim_messages {ms(row['trim_ms'])} ms", False)
    ratio = row["trim_ms"] / row["ours_cold_ms"]
    measured = f"{ratio:.2f}× (ours {ms(row['ours_cold_ms'])} ms, trim_messages {ms(row['trim_ms'])} ms)"
    return Target(name, measured, ratio >= COLD_VS_TRIM)


def _import(imports: Sequence[Mapping[str, Any]]) -> Target:
    rows = _synthetic_sqlite(imports)
    name = f"import ≥ {IMPORT_EVENTS_PER_S:,.0f} events/s into SQLite, counting tokens"
    if not rows:
        return Target(name, "—", None)
    measured = ", ".join(f"{r['events']:,}: {r['events_per_s']:,.0f}/s" for r in rows)
    return Target(name, measured, all(r["events_per_s"] >= IMPORT_EVENTS_PER_S for r in rows))


def _quality(quality: Mapping[str, Any] | None) -> Target:
    name = "bundled tau-bench trajectory at 8k: token reduction vs full replay, no required item lost"
    if not quality:
        return Target(name, "—", None)
    h, s = quality["headline"], quality["summary"]
    measured = (
        f"{100 * h['reduction']:.1f}% on {h['conversation_id']} ({h['replay_tokens']:,} → {h['input_tokens']:,}); "
        f"required lost: {s['required_lost']} in {s['trajectories']}; failed: {s['failed']}"
    )
    return Target(name, measured, s["required_lost"] == 0 and s["failed"] == 0 and h["reduction"] > 0)


def check_targets(results: Mapping[str, Any]) -> list[Target]:
    """Every target of the issue, in its order, against ``results`` (see :mod:`bench.run`)."""
    latency, peers, imports = results["latency"], results["peers"], results["import"]
    return [
        _warm(latency, 10_000),
        _warm(latency, 100_000),
        _append(latency),
        _cold(peers),
        _import(imports),
        _quality(results.get("quality")),
    ]
