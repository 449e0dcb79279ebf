"""Supersession has a direction: self, cycles and older records are not honoured."""

from __future__ import annotations

from datetime import timedelta
from functools import partial

from policy_helpers import fates as _fates
from policy_helpers import graph

from ctxledger.hashing import canonical_json

_graph = partial(graph, system_visibility="conversation")


def _marks(asm, g):
    ext = {r.id: r.external_id for r in g.records.values()}
    return {(ext.get(m["ref"], m["ref"]), m["reason"]) for m in asm.manifest["marks"]}


# -- item 10: supersession direction -----------------------------------------------------------------------


def test_self_supersession_is_ignored_and_flagged():
    ledger, g = _graph()
    g.user("u1", "Plan?")
    g.memory("loop", "plan L", supersedes=["loop"])
    g.user("u2", "Go.")
    asm = ledger.assemble(g.conversation_id, now=g.now)
    inc, out = _fates(asm, g)
    assert "loop" in inc and "loop" not in out
    assert ("loop", "supersession_ignored") in _marks(asm, g)


def test_a_supersession_cycle_omits_neither_and_flags_both():
    ledger, g = _graph()
    g.user("u1", "X?")
    g.memory("x", "X=1", supersedes=["y"])
    g.memory("y", "X=2", supersedes=["x"])
    g.user("u2", "Go.")
    asm = ledger.assemble(g.conversation_id, now=g.now)
    inc, out = _fates(asm, g)
    assert {"x", "y"} <= inc and not {"x", "y"} & set(out)
    assert {("x", "conflict"), ("y", "conflict")} <= _marks(asm, g)
    assert "cycle" in canonical_json(asm.payload)  # the model sees the flag, not two plain facts


def test_a_longer_cycle_is_also_a_conflict():
    ledger, g = _graph()
    g.user("u1", "X?")
    g.memory("a", "X=1", supersedes=["c"])
    g.memory("b", "X=2", supersedes=["a"])
    g.memory("c", "X=3", supersedes=["b"])
    g.user("u2", "Go.")
    asm = ledger.assemble(g.conversation_id, now=g.now)
    inc, out = _fates(asm, g)
    assert {"a", "b", "c"} <= inc and not {"a", "b", "c"} & set(out)


def test_an_older_record_cannot_supersede_a_newer_one():
    """By seq: the claim of the older record is not honoured; both stay, flagged, and the detail gives seqs."""
    ledger, g = _graph()
    g.user("u1", "Quota?")
    g.memory("old", "quota 2 CPUs", supersedes=["new"])
    g.memory("new", "quota 8 CPUs")
    g.user("u2", "Go.")
    asm = ledger.assemble(g.conversation_id, now=g.now)
    inc, out = _fates(asm, g)
    assert {"old", "new"} <= inc and not out.keys() & {"old", "new"}
    details = [m["detail"] for m in asm.manifest["marks"] if m["ref"] == g.id("new")]
    assert details and "older record cannot supersede a newer one" in details[0]
    assert f"seq {g.seq('old')}" in details[0] and f"seq {g.seq('new')}" in details[0]


def test_an_earlier_observation_cannot_supersede_a_later_one():
    """Written later but observed earlier (a backfill) is older too."""
    ledger, g = _graph()
    g.user("u1", "Quota?")
    g.memory("seen-late", "quota 8 CPUs", observed_at=g.now)
    g.memory("backfill", "quota 2 CPUs", observed_at=g.now - timedelta(days=2), supersedes=["seen-late"])
    g.user("u2", "Go.")
    asm = ledger.assemble(g.conversation_id, now=g.now)
    inc, _ = _fates(asm, g)
    assert {"seen-late", "backfill"} <= inc
    assert {("seen-late", "conflict"), ("backfill", "conflict")} <= _marks(asm, g)


def test_supersession_forward_and_trust_rules_are_unchanged():
    """A newer record still omits the older one it names; lower trust still never overrides higher."""
    ledger, g = _graph()
    g.user("u1", "Budget?")
    g.memory("v1", "budget 10k")
    g.memory("v2", "budget 12k", supersedes=["v1"])
    g.memory("firm", "deadline June 10", trust="user")
    g.memory("web", "deadline June 3", trust="untrusted", supersedes=["firm"], tags=["evidence"])
    g.user("u2", "Go.")
    asm = ledger.assemble(g.conversation_id, now=g.now)
    inc, out = _fates(asm, g)
    assert out["v1"] == "superseded" and "v2" in inc
    assert "firm" in inc and ("firm", "conflict") in _marks(asm, g)
