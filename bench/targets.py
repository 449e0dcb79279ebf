"""The benchmark's targets checked against one run's results.

All on the synthetic traces (``gen_trace.py``) and on SQLite, W 128,000, manifests persisted:

* warm next-call assembly at 10,000 events ≤ 30 ms (median CPU time);
* after appending one event to an assembled conversation, the next assembly ≤ 10 ms at every size;
* warm and append-one at the largest size ≤ 1.5× their cost at the smallest (1,000 → 100,000 events);
* the first call of a new process (store populated, counts stored, nothing in memory;
  :mod:`bench.first_call`) at 10,000 events at least 2× faster than langchain-core ``trim_messages`` with an
  exact tiktoken counter on the same messages, and ≤ 1 s at 100,000 events;
* the persisted manifest ≤ 256 KB, and at the largest size ≤ 1.5× its size at the smallest;
* peak memory of that new process ≤ 1 GB for a 100,000-event conversation;
* import ≥ 5,000 events/s into SQLite with every write-path fact computed, at every size;
* the bundled tau-bench trajectory at the demo's 8k window: a token reduction against full replay with
  no required item lost (and none lost on any trajectory of the shared tau-bench file).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from bench.report import Target, ms

WARM_MS = {10_000: 30.0}
APPEND_MS = 10.0
GROWTH = 1.5
FIRST_VS_TRIM = 2.0
FIRST_MS = {100_000: 1_000.0}
MANIFEST_KB = 256.0
RSS_MB = {100_000: 1_024.0}
IMPORT_EVENTS_PER_S = 5_000.0


def latency_target(workload_kind: str, backend: str, scenario: str, events: int) -> str:
    """The target string to print beside a latency row ("" when none is set)."""
    if workload_kind != "synthetic" or backend != "sqlite":
        return ""
    if scenario == "warm" and events in WARM_MS:
        return f"≤ {WARM_MS[events]:.0f} ms"
    if scenario == "append-one":
        return f"≤ {APPEND_MS:.0f} ms"
    return ""


def _synthetic_sqlite(rows: Sequence[Mapping[str, Any]], scenario: str | None = None) -> list[Mapping[str, Any]]:
    return [
        r
        for r in rows
        if r["kind"] == "synthetic" and r["backend"] == "sqlite" and (scenario is None or r.get("scenario") == scenario)
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


def _ends(rows: Sequence[Mapping[str, Any]]) -> tuple[Mapping[str, Any], Mapping[str, Any]] | None:
    measured = sorted((r for r in rows if r.get("timing")), key=lambda r: r["events"])
    return (measured[0], measured[-1]) if len(measured) >= 2 else None


def _growth(latency: Sequence[Mapping[str, Any]], scenario: str) -> Target:
    name = f"{scenario} at the largest size ≤ {GROWTH}× the smallest (median, SQLite)"
    ends = _ends(_synthetic_sqlite(latency, scenario))
    if ends is None:
        return Target(name, "—", None)
    small, large = ends
    ratio = large["timing"]["median_ms"] / small["timing"]["median_ms"]
    measured = (
        f"{ratio:.2f}× ({small['events']:,}: {ms(small['timing']['median_ms'])} ms, "
        f"{large['events']:,}: {ms(large['timing']['median_ms'])} ms)"
    )
    return Target(name, measured, ratio <= GROWTH)


def _manifest(latency: Sequence[Mapping[str, Any]]) -> Target:
    name = f"persisted manifest ≤ {MANIFEST_KB:.0f} KB, largest size ≤ {GROWTH}× the smallest (warm, SQLite)"
    rows = [r for r in _synthetic_sqlite(latency, "warm") if (r.get("extra") or {}).get("manifest_bytes")]
    if not rows:
        return Target(name, "—", None)
    rows.sort(key=lambda r: r["events"])
    sizes = [(r["events"], r["extra"]["manifest_bytes"] / 1024) for r in rows]
    ratio = sizes[-1][1] / sizes[0][1]
    measured = ", ".join(f"{e:,}: {kb:,.0f} KB" for e, kb in sizes) + f" ({ratio:.2f}×)"
    return Target(name, measured, all(kb <= MANIFEST_KB for _, kb in sizes) and ratio <= GROWTH)


def _first_vs_trim(first: Sequence[Mapping[str, Any]], peers: Sequence[Mapping[str, Any]]) -> Target:
    name = f"first call of a new process, 10,000 events, ≥ {FIRST_VS_TRIM:.0f}× faster than trim_messages + tiktoken"
    row = next((r for r in _synthetic_sqlite(first) if r["events"] == 10_000), None)
    peer = next((r for r in peers if r["kind"] == "synthetic" and r["events"] == 10_000), None)
    if row is None or peer is None or not peer.get("trim_ms"):
        return Target(name, "—", None)
    ratio = peer["trim_ms"] / row["call_cpu_ms"]
    measured = f"{ratio:.2f}× (ours {ms(row['call_cpu_ms'])} ms, trim_messages {ms(peer['trim_ms'])} ms)"
    return Target(name, measured, ratio >= FIRST_VS_TRIM)


def _first_at(first: Sequence[Mapping[str, Any]], events: int, key: str, limit: float, what: str) -> Target:
    name = f"{what}, {events:,} events ≤ {limit:,.0f} {'ms' if key.endswith('ms') else 'MB'} (new process)"
    row = next((r for r in _synthetic_sqlite(first) if r["events"] == events), None)
    if row is None:
        return Target(name, "—", None)
    return Target(name, f"{row[key]:,.0f}", row[key] <= limit)


def _import(imports: Sequence[Mapping[str, Any]]) -> Target:
    rows = _synthetic_sqlite(imports)
    name = f"import ≥ {IMPORT_EVENTS_PER_S:,.0f} events/s into SQLite with every write-path fact"
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
    """Every target, in the module docstring's order, against ``results`` (see :mod:`bench.run`)."""
    latency, peers, imports = results["latency"], results["peers"], results["import"]
    first = results.get("first_call", [])
    return [
        _warm(latency, 10_000),
        _append(latency),
        _growth(latency, "warm"),
        _growth(latency, "append-one"),
        _first_vs_trim(first, peers),
        _first_at(first, 100_000, "call_cpu_ms", FIRST_MS[100_000], "first call CPU time"),
        _manifest(latency),
        _first_at(first, 100_000, "peak_rss_mb", RSS_MB[100_000], "peak memory"),
        _import(imports),
        _quality(results.get("quality")),
    ]
