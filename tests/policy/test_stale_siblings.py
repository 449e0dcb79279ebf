"""A stale memory omits only itself: its source's parallel siblings stay, and explain names the record that caused
an omission.

Generated runs: a parallel call with 2-4 results, a volatile memory over one random result observed long ago (so
it is stale), in random order among other turns.
"""

from __future__ import annotations

import json
from datetime import timedelta

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ctxledger.hashing import canonical_json
from ctxledger.ledger import Ledger
from ctxledger.scenarios._graph import GraphBuilder
from ctxledger.testing import MemoryStore

SETTINGS = ["batch_size", "retries", "timeout_s", "workers"]


def _parallel(g: GraphBuilder, n: int) -> list[str]:
    """One assistant message with ``n`` calls and their results (Recorder.tool_calls); the artifact ids."""
    calls = [
        {
            "tool": "config.get",
            "arguments": {"key": SETTINGS[i]},
            "output": json.dumps({"key": SETTINGS[i], "value": 500 + i}),
        }
        for i in range(n)
    ]
    g.tool_calls(calls, name="read")
    return [g.id(f"art-read-{i}") for i in range(n)]


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(n=st.integers(2, 4), data=st.data(), chatter=st.integers(0, 3))
def test_only_the_stale_memory_leaves_and_explain_names_it(n, data, chatter):
    """The stale memory is omitted; every sibling result of the parallel call is still sent, the source flagged."""
    stale_at = data.draw(st.integers(0, n - 1))
    ledger = Ledger(MemoryStore())
    g = GraphBuilder(ledger, "parallel")
    g.system("sys", "You are the ETL operator.")
    g.user("u1", "Read the importer settings.")
    arts = _parallel(g, n)
    for i in range(chatter):
        g.assistant(f"a{i}", f"Noted setting {i}.")
    g.memory(
        "mem",
        f"{SETTINGS[stale_at]} is {500 + stale_at}.",
        sources=[f"art-read-{stale_at}"],
        freshness="volatile",
        observed_at=g.now - timedelta(days=2),
    )
    g.user("u2", "What batch size and retries are configured?")
    asm = ledger.assemble(g.conversation_id, now=g.now)
    omitted = {e["ref"]: e for e in asm.manifest["omitted"]}
    assert omitted[g.id("mem")]["reason"] == "stale"
    body = canonical_json(asm.payload)
    for i in range(n):
        assert arts[i] not in omitted
        if i != stale_at:
            assert f'\\"value\\": {500 + i}' in body or f'"value": {500 + i}' in body
    marks = {(m["ref"], m["reason"]) for m in asm.manifest["marks"]}
    assert (arts[stale_at], "stale") in marks


@settings(max_examples=10, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(chatter=st.integers(0, 3))
def test_explain_names_the_record_that_took_a_unit_out(chatter):
    """A single call's stale source takes its call out; each co-omitted record names the record that caused it."""
    ledger = Ledger(MemoryStore())
    g = GraphBuilder(ledger, "single")
    g.system("sys", "You are the ETL operator.")
    g.user("u1", "How many unread alerts?")
    g.tool("alerts", "alerts.unread", {}, json.dumps({"unread": 17}))
    for i in range(chatter):
        g.assistant(f"a{i}", f"Checking {i}.")
    g.memory(
        "mem", "17 unread alerts.", sources=["art-alerts"], freshness="volatile", observed_at=g.now - timedelta(days=1)
    )
    g.user("u2", "And now?")
    asm = ledger.assemble(g.conversation_id, now=g.now)
    omitted = {e["ref"]: e for e in asm.manifest["omitted"]}
    assert omitted[g.id("art-alerts")]["detail"] == f"raw source of stale memory {g.id('mem')}"
    for name in ("alerts", "alerts#call"):
        assert omitted[g.id(name)]["reason"] == "stale"
        assert omitted[g.id(name)]["detail"].endswith(f"with {g.id('art-alerts')} (stale)")
