"""Promotion reaches the promoting subagent's parent (and the checkpoint's shared_with), not siblings or
unrelated participants (seed 004 §4.13-4.14)."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ctxledger import Ledger
from ctxledger.hashing import canonical_json

T0 = datetime(2026, 9, 1, 9, 0, tzinfo=UTC)
RAW = "S1-RAW: export failed, disk full on /var/export"


def _run(shared_with=(), *, with_lead=True):
    ledger = Ledger.open("memory://")
    rec = ledger.recorder("c", clock=T0)
    who = {
        "lead": rec.participant("lead"),
        "bob": rec.participant("bob"),
    }
    who["s1"] = rec.participant("s1", role="subagent", parent=who["lead"])
    who["s2"] = rec.participant("s2", role="subagent", parent=who["lead"])
    rec.system("Answer from the recorded evidence.")
    rec.user("Why did the export fail?")
    private = {"owner": who["s1"], "visibility": "participant_private"}
    report = rec.assistant("S1-REPORT: the export disk is full.", name="report", **private)
    logs = rec.tool_call("logs.search", {"job": "export"}, RAW, name="logs", **private)
    fact = rec.memory(
        "Export failed: disk full.", sources=[logs], owner=who["s1"], visibility="conversation", tags=["safe_summary"]
    )
    lead = [who["lead"]] if with_lead else []
    env = {"shared_with": [*lead, *(who[p] for p in shared_with)]} if shared_with else {}
    rec.checkpoint("s1-run", {"status": "done"}, promote=[report, logs], owner=who["s1"], **env)
    rec.user("Quote the exact log line.")
    return ledger, who, report, logs, fact


def _assemble(ledger, participant, **kw):
    return ledger.assemble("c", participant_id=participant, provider="openai", now=T0, **kw)


def _omitted(asm):
    return {o["ref"]: o["reason"] for o in asm.manifest["omitted"]}


def test_promoted_records_reach_the_parent_only():
    """The parent sees the promoted report and tool exchange; a sibling, an unrelated participant and None do not."""
    ledger, who, report, logs, _ = _run()
    lead = _assemble(ledger, who["lead"])
    assert "S1-REPORT" in canonical_json(lead.payload)
    assert _omitted(lead).get(logs.artifact) in (None, "covered_by_memory")  # visible; the safe memory may stand in
    for name, reason in (("s2", "private_to_participant"), ("bob", "private_to_participant"), (None, None)):
        asm = _assemble(ledger, who[name] if name else None)
        text = canonical_json(asm.payload)
        assert "S1-REPORT" not in text and "S1-RAW" not in text, name
        if reason:
            assert _omitted(asm)[report] == reason and _omitted(asm)[logs.artifact] == reason, name


def test_the_checkpoints_shared_with_joins_the_audience():
    """A checkpoint shared with bob as well promotes to bob too, still not to the sibling s2."""
    ledger, who, report, _, _ = _run(shared_with=["bob"])
    assert "S1-REPORT" in canonical_json(_assemble(ledger, who["bob"]).payload)
    assert _omitted(_assemble(ledger, who["s2"]))[report] == "private_to_participant"


@pytest.mark.parametrize(("name", "decision"), [("lead", "rehydrated"), ("s2", "reference"), ("bob", "reference")])
def test_rehydration_reads_a_promoted_artifact_back_for_the_audience_only(name, decision):
    """The safe memory is visible to all; its promoted raw artifact comes back exactly only for the parent."""
    ledger, who, _, logs, fact = _run()
    asm = _assemble(ledger, who[name], exact_evidence=[fact])
    (entry,) = asm.manifest["rehydrations"]
    assert entry["artifact"] == logs.artifact and entry["decision"] == decision
    text = canonical_json(asm.payload)
    assert (RAW in text) is (decision == "rehydrated")
    if decision == "reference":
        assert entry["reason"] == "private_to_participant"


@settings(max_examples=12, deadline=None)
@given(shared=st.lists(st.sampled_from(["s2", "bob"]), min_size=1, max_size=2, unique=True))
def test_a_checkpoint_shared_with_others_still_promotes_to_the_parent(shared):
    """``shared_with`` adds to the audience: the parent need not be listed, and only those listed join it."""
    ledger, who, _, _, _ = _run(shared_with=shared, with_lead=False)
    for name in ("lead", "s2", "bob"):
        text = canonical_json(_assemble(ledger, who[name]).payload)
        assert ("S1-REPORT" in text) is (name == "lead" or name in shared), name
