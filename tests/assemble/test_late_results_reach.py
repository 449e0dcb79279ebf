"""Late tool results: a refreshed snapshot's reach index is the one a fresh build makes, and so is the assembly.

A late result rebuilds its call's exchange and every unit after it; the records rebuilt with them include the
results of older exchanges that arrived late too, which stay in the older (kept) units. Generated histories open
several calls at once and answer them in any order, each answer in its own append; after every append a warm
ledger (its snapshot refreshed) and a cold one (built at once) must assemble the same payload and the same stored
manifest (candidate count, omission summary, included items), and the refreshed :class:`ReachIndex` must equal
the fresh one field by field.
"""

from __future__ import annotations

import json
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ctxledger import manifest_codec
from ctxledger.assemble.snapshot import SnapshotLoader
from ctxledger.errors import CtxledgerError
from ctxledger.ledger import Ledger
from ctxledger.scenarios._graph import GraphBuilder
from ctxledger.testing import MemoryStore

_VOLATILE = ("id", "created_at", "timings", "prefix")
"""Keys that name the call or measure the process (``prefix`` compares with the previous assembly of this process)."""

_STEPS = st.one_of(
    st.tuples(st.just("open"), st.integers(1, 3)),  # an exchange of n calls, none answered yet
    st.tuples(st.just("answer"), st.integers(0, 50)),  # answers the pending call at this index (mod their count)
    st.tuples(st.just("user"), st.integers(1, 40)),
    st.tuples(st.just("assistant"), st.integers(1, 40)),
    st.tuples(st.just("tool"), st.integers(1, 300)),
)


def _write(g: GraphBuilder, pending: list[str], i: int, kind: str, size: int) -> None:
    """Write one step; ``pending`` holds the unanswered calls' ids in the order they were made."""
    if kind == "open":
        calls = [{"tool": "fetch_page", "arguments": {"page": i, "part": k}} for k in range(size)]
        g.tool_calls(calls, name=f"w{i}")
        pending += [f"w{i}#call{k}" for k in range(size)]
    elif kind == "answer" and pending:
        call = pending.pop(size % len(pending))
        failed = size % 5 == 0
        words = " ".join(f"page{i}-{k}" for k in range(size * 4 + 1))
        g.tool_result(call, words, status="failed" if failed else "succeeded", media_type="text/plain")
    elif kind in ("user", "answer"):
        g.user(f"u{i}", " ".join(f"question{(i + k) % 7}" for k in range(max(size, 1))))
    elif kind == "assistant":
        g.assistant(f"a{i}", " ".join(f"note{i}-{k}" for k in range(size)))
    else:
        rows = [{"line": k, "text": f"step {i} log line {k} ok"} for k in range(size)]
        g.tool(f"t{i}", "read_log", {"part": i}, json.dumps(rows))


def _stored(asm: Any) -> dict[str, Any]:
    return {k: v for k, v in manifest_codec.encode(asm.persisted()).items() if k not in _VOLATILE}


def _assemble(ledger: Ledger, g: GraphBuilder, request: dict[str, Any], persist: bool) -> Any:
    try:
        return ledger.assemble(g.conversation_id, now=g.now, persist=persist, **request)
    except CtxledgerError as exc:  # too small a window for what is required: both must refuse alike
        return exc


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    history=st.lists(_STEPS, min_size=16, max_size=40),
    appended=st.lists(_STEPS, min_size=1, max_size=8),
    window=st.integers(400, 2000),
)
def test_late_results_leave_the_refreshed_reach_index_as_a_fresh_one(
    history: list[tuple[str, int]], appended: list[tuple[str, int]], window: int
) -> None:
    store = MemoryStore()
    warm = Ledger(store)
    g = GraphBuilder(warm, "late-reach")
    g.system("sys", "You are a careful build engineer.")
    g.user("u", "The nightly build fails; find out why.")
    pending: list[str] = []
    steps = [*history, ("open", 1), ("open", 2), ("answer", 0), *appended, ("answer", 0)]
    request = {"window_tokens": window, "output_tokens": 300, "margin_tokens": 50}
    for i, (kind, size) in enumerate(steps):
        _write(g, pending, i, kind, size)
        if i < len(history):
            continue
        cached = _assemble(warm, g, request, persist=True)
        cold = _assemble(Ledger(store), g, request, persist=False)
        if isinstance(cached, CtxledgerError):
            assert type(cached) is type(cold) and str(cached) == str(cold)
        else:
            assert cached.payload == cold.payload and cached.payload_hash == cold.payload_hash
            assert _stored(cached) == _stored(cold)
        refreshed = warm.snapshots.load("default", g.conversation_id, g.branch_id)
        fresh = SnapshotLoader(store).load("default", g.conversation_id, g.branch_id)
        assert [u.record_ids for u in refreshed.units] == [u.record_ids for u in fresh.units]
        assert list(refreshed.reach_index.loose) == list(fresh.reach_index.loose)
        assert refreshed.reach_index == fresh.reach_index
