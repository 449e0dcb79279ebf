"""Ledger.compact: a checked compaction with lineage at a stable boundary, or nothing written at all."""

from __future__ import annotations

import dataclasses

import pytest

from ctxledger.assemble.compaction import compaction_sources, default_boundary
from ctxledger.errors import CompactionRefused, InputError
from ctxledger.records import Compaction, Message
from ctxledger.represent import compact

CONV = "gpt-4o-airline_tasks0-39-task0-trial0"
"""tau-bench task 0: the user states two constraints the agent must respect."""


def _head(ledger) -> int:
    return ledger.store.head_seq("default", CONV)


def test_compaction_is_written_with_lineage_and_replaces_all_but_protected_history(fresh_tau):
    """Compacted history leaves later assemblies as summarized, except the user constraints (kept verbatim)."""
    ledger = fresh_tau
    before = ledger.assemble(CONV, persist=False)
    constraints = {d["ref"] for d in before.manifest["decisions"] if d["reason"] == "user_constraint"}
    snap = ledger.snapshots.load("default", CONV, ledger.store.get("default", CONV).branch_id)
    rec = ledger.compact(CONV)
    assert isinstance(rec, Compaction) and rec.seq == _head(ledger) == snap.seq + 1
    assert rec.through_seq == default_boundary(snap.units) and rec.policy_version == ledger.policy.version
    assert rec.body["fidelity"]["ok"] is True and constraints <= set(rec.source_ids)
    after = ledger.assemble(CONV, persist=False)
    included = {e["ref"]: e for e in after.manifest["included"]}
    assert included[rec.id]["reason"] == "active_compaction"
    omitted = {e["ref"]: e["reason"] for e in after.manifest["omitted"]}
    for ref in rec.source_ids:
        assert ref in included if ref in constraints else omitted.get(ref) == "summarized"
    for ref in constraints:
        text = ledger.store.get("default", ref).content
        assert after.payload["messages"][after.turn_refs.index(ref)]["content"] == text
    assert after.input_tokens < before.input_tokens


def _forgetful(records, **kwargs):
    """A compactor that drops the user's constraints from its text (the B09 failure)."""
    rec = compact(records, **kwargs)
    kept = [line for line in rec.text.splitlines() if "User constraints" not in line and "do not" not in line.lower()]
    return dataclasses.replace(rec, text="\n".join(kept))


def test_a_compaction_that_loses_a_constraint_is_refused_and_nothing_is_written(tau):
    """The fidelity check refuses the forgetful compaction: the error names what was lost; the store is unchanged."""
    head = _head(tau)
    with pytest.raises(CompactionRefused) as caught:
        tau.compact(CONV, compactor=_forgetful)
    assert caught.value.reason == "lost_invariants"
    assert any(item.kind == "user_constraints" for item in caught.value.missing)
    assert _head(tau) == head
    assert not any(isinstance(r, Compaction) for r in tau.store.records("default", CONV))


def test_a_boundary_inside_a_tool_exchange_is_refused(tau):
    """A ``through_seq`` between a tool call and its result is no stable boundary: InputError naming the unit."""
    snap = tau.snapshots.load("default", CONV, tau.store.get("default", CONV).branch_id)
    unit = next(u for u in snap.units if u.last_seq > u.seq)
    head = _head(tau)
    with pytest.raises(InputError, match=f"splits unit {unit.id}") as caught:
        tau.compact(CONV, through_seq=unit.seq)
    assert caught.value.field == "through_seq"
    with pytest.raises(InputError, match="beyond the head"):
        tau.compact(CONV, through_seq=head + 10)
    assert _head(tau) == head


def test_instructions_are_never_compaction_sources(tau):
    """The system prompt is not summarised: it stays a fixed block, outside the compaction's sources."""
    snap = tau.snapshots.load("default", CONV, tau.store.get("default", CONV).branch_id)
    sources = compaction_sources(snap.records, default_boundary(snap.units))
    assert sources and not any(isinstance(r, Message) and r.role.value == "system" for r in sources)
