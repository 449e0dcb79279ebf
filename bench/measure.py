"""One workload on one backend (import + the four scenarios), and the peers beside it, as result rows.

Rows are plain dicts (they go to the JSON file as they are). A latency row whose scenario was skipped by
the :class:`~bench.plan.Predictor` has ``timing: None`` and ``skipped`` saying why.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from bench import ours, peers, report, targets
from bench.backends import Backend
from bench.ours import Repeat
from bench.plan import SCENARIOS, Limits, Predictor
from bench.workloads import Workload
from ctxledger.ledger import Ledger

Log = Callable[[str], None]


def latency_row(
    wl: Workload, backend: Backend, scenario: str, series: ours.LatencySeries | None, skipped: str | None = None
) -> dict[str, Any]:
    """A latency row (``series`` ``None`` → a skipped row)."""
    row: dict[str, Any] = {
        "workload": wl.name,
        "kind": wl.kind,
        "events": wl.events,
        "backend": backend.name,
        "scenario": scenario,
        "target": targets.latency_target(wl.kind, backend.name, scenario, wl.events),
        "timing": None,
        "skipped": skipped,
    }
    if series is not None:
        row |= {
            "timing": series.timing.as_dict(),
            "phases": {k: round(v, 3) for k, v in series.phases.items()},
            "input_tokens": series.input_tokens,
            "extra": series.extra,
        }
    return row


def _import_row(wl: Workload, backend: Backend, import_ms: float, records: int) -> dict[str, Any]:
    return {
        "workload": wl.name,
        "kind": wl.kind,
        "events": wl.events,
        "backend": backend.name,
        "seconds": import_ms / 1000,
        "events_per_s": wl.events / (import_ms / 1000),
        "records": records,
    }


def _too_slow(predictor: Predictor, wl: Workload, backend: Backend, scenario: str, limit_s: float) -> str | None:
    if wl.kind != "synthetic":
        return None
    predicted = predictor.predict(backend.name, scenario, wl.events)
    if predicted is None or predicted / 1000 <= limit_s:
        return None
    return f"predicted {predicted / 1000:,.0f} s per call (> {limit_s:.0f} s)"


def _run(
    wl: Workload, backend: Backend, scenario: str, measure: Callable[[], ours.LatencySeries], ctx: _Context
) -> dict[str, Any]:
    reason = _too_slow(ctx.predictor, wl, backend, scenario, ctx.limits.max_call_seconds)
    if reason:
        ctx.log(f"  {backend.name}: {scenario} skipped: {reason}")
        return latency_row(wl, backend, scenario, None, reason)
    row = latency_row(wl, backend, scenario, measure())
    median = row["timing"]["median_ms"]
    if wl.kind == "synthetic":
        ctx.predictor.record(backend.name, scenario, wl.events, median)
    ctx.log(f"  {backend.name}: {scenario} median {report.ms(median)} ms (n={row['timing']['n']})")
    return row


class _Context:
    def __init__(self, predictor: Predictor, limits: Limits, log: Log) -> None:
        self.predictor, self.limits, self.log = predictor, limits, log


def measure_ours(
    wl: Workload,
    backend: Backend,
    params: ours.AssemblyParams,
    repeats: Mapping[str, Repeat],
    predictor: Predictor,
    limits: Limits,
    log: Log,
) -> dict[str, Any]:
    """Import ``wl`` into ``backend``, then run every scenario (or skip it, see :mod:`bench.plan`).

    Returns:
        ``{"import": row | None, "latency": [rows], "conversation_id": str | None}``.
    """
    ctx = _Context(predictor, limits, log)
    skips = [_too_slow(predictor, wl, backend, s, limits.max_call_seconds) for s in SCENARIOS]
    if skips[SCENARIOS.index("restart")]:  # warm and append-one start from the restart sample's Ledger
        skips = [
            r or (f"needs a restart-priced warm-up call, {skips[1]}" if i > 1 else None) for i, r in enumerate(skips)
        ]
    import_skip = _too_slow(predictor, wl, backend, "import", limits.max_import_seconds)
    if import_skip or all(skips):
        reason = f"import {import_skip}" if import_skip else "every scenario predicted too slow"
        log(f"  {backend.name}: skipped: {reason}")
        rows = [latency_row(wl, backend, s, None, skips[i] or reason) for i, s in enumerate(SCENARIOS)]
        return {"import": None, "latency": rows, "conversation_id": None}
    import_ms, conversation = ours.import_workload(backend, wl, params.model)
    if wl.kind == "synthetic":
        predictor.record(backend.name, "import", wl.events, import_ms)
    with ours.open_ledger(backend) as ledger:
        records = len(ledger.store.records(ours.TENANT, conversation))
    log(f"  {backend.name}: imported {wl.events:,} events ({records:,} records) in {import_ms / 1000:.1f} s")
    rows = [_run(wl, backend, "cold", lambda: ours.cold(backend, conversation, params, repeats["cold"]), ctx)]
    rows.extend(_warm_rows(wl, backend, conversation, params, repeats, ctx))
    return {"import": _import_row(wl, backend, import_ms, records), "latency": rows, "conversation_id": conversation}


def _warm_rows(
    wl: Workload,
    backend: Backend,
    conversation: str,
    params: ours.AssemblyParams,
    repeats: Mapping[str, Repeat],
    ctx: _Context,
) -> list[dict[str, Any]]:
    """restart, then warm and append-one on the Ledger of the last restart sample (its warm-up)."""
    reason = _too_slow(ctx.predictor, wl, backend, "restart", ctx.limits.max_call_seconds)
    if reason:
        ctx.log(f"  {backend.name}: restart, warm, append-one skipped: restart {reason}")
        after = f"needs a restart-priced warm-up call, {reason}"
        return [latency_row(wl, backend, "restart", None, reason)] + [
            latency_row(wl, backend, s, None, after) for s in ("warm", "append-one")
        ]
    ledger: Ledger | None = None

    def restart() -> ours.LatencySeries:
        nonlocal ledger
        series, ledger = ours.restart(backend, conversation, params, repeats["restart"])
        return series

    rows = [_run(wl, backend, "restart", restart, ctx)]
    assert ledger is not None
    with ledger:
        rows.append(_run(wl, backend, "warm", lambda: ours.warm(ledger, conversation, params, repeats["warm"]), ctx))
        append = repeats["append-one"]
        rows.append(_run(wl, backend, "append-one", lambda: ours.append_one(ledger, conversation, params, append), ctx))
    return rows


def _median(rows: Mapping[str, Mapping[str, Any]], scenario: str) -> float | None:
    row = rows.get(scenario)
    return row["timing"]["median_ms"] if row and row["timing"] else None


def measure_peers(
    wl: Workload,
    params: ours.AssemblyParams,
    repeat: Repeat,
    latency: Sequence[Mapping[str, Any]],
    trim: bool,
    log: Log,
) -> dict[str, Any]:
    """The peers on ``wl``'s messages, beside ctxledger's SQLite cold and warm medians (``None`` if skipped)."""
    count = peers.tiktoken_count()
    budget = params.input_tokens
    mine = {r["scenario"]: r for r in latency if r["backend"] == "sqlite" and r["workload"] == wl.name}
    warm = mine.get("warm") if mine.get("warm", {}).get("timing") else None
    nf = peers.time_newest_fit(wl.messages, budget, count, repeat.times)
    row: dict[str, Any] = {
        "workload": wl.name,
        "kind": wl.kind,
        "events": wl.events,
        "budget_tokens": budget,
        "ours_cold_ms": _median(mine, "cold"),
        "ours_warm_ms": _median(mine, "warm"),
        "ours_tokens": warm["input_tokens"] if warm else None,
        "ours_omitted_by_reason": warm["extra"]["omitted_by_reason"] if warm else None,
        "newest_fit_counting_ms": nf["counting"].median_ms,
        "newest_fit_cached_ms": nf["cached"].median_ms,
        "newest_fit_tokens": nf["kept_tokens"],
        "newest_fit_messages": nf["kept_messages"],
        "replay_tokens": nf["replay_tokens"],
        "trim_ms": None,
    }
    if trim:
        result = peers.time_trim_messages(wl.messages, budget, count, repeat.times)
        row |= {
            "trim_ms": result["timing"].median_ms,
            "trim_p95_ms": result["timing"].p95_ms,
            "trim_tokens": result["kept_tokens"],
            "trim_messages": result["kept_messages"],
        }
    newest, trimmed = report.ms(row["newest_fit_counting_ms"]), report.ms(row["trim_ms"])
    log(f"  peers: newest-fit {newest} ms, trim_messages {trimmed} ms")
    return row
