"""Compaction and unresolved calls: the protected state after a compaction is the one before it, and a result
that arrives after a compaction is sent with its call.

Generated runs: random tool calls (succeeded, failed, pending, deferred) between user turns, some of which
state constraints, in random order; the run is compacted, then every open call gets its result.
"""

from __future__ import annotations

import json

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ctxledger.hashing import canonical_json
from ctxledger.ledger import Ledger
from ctxledger.scenarios._graph import GraphBuilder
from ctxledger.testing import MemoryStore

_TOOLS = st.sampled_from(["drive.pick_document", "shell", "email.send", "crm.update"])
_STEP = st.one_of(
    st.tuples(st.just("tool"), _TOOLS, st.sampled_from(["succeeded", "failed", "pending", "deferred"])),
    st.tuples(st.just("user"), st.sampled_from(["Do not email the customer yet.", "Thanks, continue."]), st.none()),
    st.tuples(st.just("assistant"), st.sampled_from(["Working on it.", "Step done."]), st.none()),
)


def _protected(asm) -> dict[str, str]:
    """Record → protection reason, for what entered because the policy requires it (compactions aside)."""
    return {
        e["ref"]: e["reason"]
        for e in asm.manifest["included"]
        if e["stage"] == "protection" and e["reason"] != "active_compaction"
    }


def _build(steps) -> tuple[Ledger, GraphBuilder, list[str]]:
    ledger = Ledger(MemoryStore())
    g = GraphBuilder(ledger, "deferred")
    g.system("sys", "You are a careful operations agent.")
    g.user("u0", "Prepare the Q3 board pack and send it when I approve.")
    open_calls = []
    for i, (kind, what, status) in enumerate(steps):
        if kind == "tool":
            output = None if status in ("pending", "deferred") else json.dumps({"step": i, "status": status})
            g.tool(f"t{i}", what, {"step": i}, output, status=status)
            if output is None:
                open_calls.append(f"t{i}")
        elif kind == "user":
            g.user(f"u{i + 1}", what)
        else:
            g.assistant(f"a{i}", what)
    for i in range(5):
        g.user(f"later-{i}", f"Any news on item {i}?")
        g.assistant(f"reply-{i}", f"Item {i} is in progress.")
    g.user("latest", "Where are we?")
    return ledger, g, open_calls


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(steps=st.lists(_STEP, min_size=1, max_size=8))
def test_protected_state_after_compaction_equals_before(steps):
    """Whatever the run, the records the policy protects are the same, verbatim, before and after compact()."""
    ledger, g, _ = _build(steps)
    before = ledger.assemble(g.conversation_id, now=g.now)
    rec = ledger.compact(g.conversation_id, now=g.now)
    after = ledger.assemble(g.conversation_id, now=g.now)
    assert _protected(after) == _protected(before)
    assert rec.id in {e["ref"] for e in after.manifest["included"]}
    left = {e["ref"]: e["reason"] for e in rec.meta["validity"]["left_out"]}
    for name in [
        f"t{i}" for i, (kind, _, status) in enumerate(steps) if kind == "tool" and status in ("pending", "deferred")
    ]:
        assert left[g.id(name)] == "unresolved" and g.id(name) not in rec.source_ids
        assert "is deferred" not in rec.text and "is pending" not in rec.text


def test_a_compaction_written_over_a_deferred_call_does_not_swallow_its_later_result():
    """A compaction from elsewhere (here: the recorder's, covering the open call) still lets the late result in."""
    ledger = Ledger(MemoryStore())
    g = GraphBuilder(ledger, "imported-compaction")
    g.system("sys", "You are a careful operations agent.")
    g.user("u1", "Pick the newest FINAL deck.")
    g.tool("pick", "drive.pick_document", {"candidates": ["a", "b"]}, None, status="deferred")
    names = []
    for i in range(5):
        g.assistant(f"a{i}", f"Waiting ({i}).")
        names.append(f"a{i}")
    g.compaction(
        "compaction-1",
        "The user asked for the newest FINAL deck; drive.pick_document is deferred.",
        covers=["pick", "pick#call", *names],
    )
    g.tool_result("pick#call", json.dumps({"file": "1Q3FINALdeck"}))
    g.user("u2", "Which one did you pick?")
    asm = ledger.assemble(g.conversation_id, now=g.now)
    omitted = {e["ref"]: e["reason"] for e in asm.manifest["omitted"]}
    included = {e["ref"] for e in asm.manifest["included"]}
    assert {g.id("pick"), g.id("pick#call")} <= included and g.id("pick") not in omitted
    assert "1Q3FINALdeck" in canonical_json(asm.payload)
    assert omitted[g.id("a0")] == "summarized"
