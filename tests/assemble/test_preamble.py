"""Turns before the first user turn (autonomous, scheduled and cron agents) are kept, never dropped for role order.

Generated runs: assistant turns and tool exchanges in random order, with no user turn or with the first user
turn at a random later position; assembled for OpenAI Chat (sent as they are) and Anthropic Messages (carried
inside the first user turn as delimited data).
"""

from __future__ import annotations

import json

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ctxledger.hashing import canonical_json
from ctxledger.ledger import Ledger
from ctxledger.scenarios._graph import GraphBuilder
from ctxledger.testing import MemoryStore

_STEP = st.one_of(
    st.tuples(st.just("say"), st.sampled_from(["Nightly sync started.", "Checking the queue.", "Batch done."])),
    st.tuples(st.just("tool"), st.sampled_from(["queue.depth", "db.vacuum", "s3.list", "metrics.read"])),
)


def _run(steps, user_at):
    ledger = Ledger(MemoryStore())
    g = GraphBuilder(ledger, "cron")
    g.system("sys", "You are the nightly maintenance agent. Report anomalies.")
    names = []
    for i, (kind, what) in enumerate(steps):
        if user_at == i:
            g.user("u-first", "Operator here: anything unusual tonight?")
        if kind == "say":
            g.assistant(f"s{i}", what)
        else:
            g.tool(f"t{i}", what, {"run": i}, json.dumps({"tool": what, "value": 1000 + i, "marker": f"evidence-{i}"}))
        names.append(f"s{i}" if kind == "say" else f"t{i}")
    return ledger, g, names


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(steps=st.lists(_STEP, min_size=1, max_size=7), user_at=st.one_of(st.none(), st.integers(1, 7)))
def test_openai_keeps_the_turns_before_the_first_user_turn(steps, user_at):
    """OpenAI Chat accepts an assistant turn first: every turn before the first user turn is sent, in order."""
    ledger, g, names = _run(steps, user_at)
    asm = ledger.assemble(g.conversation_id, now=g.now, window_tokens=16_000)
    omitted = {e["ref"]: e["reason"] for e in asm.manifest["omitted"]}
    assert "role_order" not in omitted.values()
    body = canonical_json(asm.payload)
    for i, (kind, _) in enumerate(steps):
        if kind == "tool":
            assert f"evidence-{i}" in body
    refs = [r for r in asm.turn_refs if r != g.id("sys")]
    assert refs[0] == g.id(names[0])


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(steps=st.lists(_STEP, min_size=1, max_size=7), user_at=st.one_of(st.none(), st.integers(1, 7)))
def test_anthropic_carries_them_inside_the_first_user_turn_as_data(steps, user_at):
    """Anthropic needs a user turn first: the earlier turns ride in the first user message, delimited as data."""
    ledger, g, names = _run(steps, user_at)
    asm = ledger.assemble(
        g.conversation_id, now=g.now, window_tokens=16_000, api="anthropic-messages", model="claude-sonnet-4-5"
    )
    omitted = {e["ref"]: e["reason"] for e in asm.manifest["omitted"]}
    assert "role_order" not in omitted.values()
    first = asm.payload["messages"][0]
    assert first["role"] == "user"
    text = json.dumps(first["content"])
    for i, (kind, what) in enumerate(steps):
        if user_at is not None and i >= user_at:
            break
        assert 'note=\\"recorded before the first user turn\\"' in text
        assert (f"evidence-{i}" if kind == "tool" else what) in text
    carried = {e["unit"] for e in asm.manifest["included"] if e.get("transform") == "carried_as_data"}
    lead = names[: user_at if user_at is not None else len(names)]
    assert carried == {g.id(n) for n in lead}
