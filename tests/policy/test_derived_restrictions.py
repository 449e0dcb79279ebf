"""Derived records are as restricted as their sources, transitively, unless declared safe (seed 004 §4.5, §8 R3)."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from ctxledger import Ledger
from ctxledger.hashing import canonical_json
from ctxledger.records import ToolMemory

T0 = datetime(2026, 9, 1, 9, 0, tzinfo=UTC)


def _ledger():
    ledger = Ledger.open("memory://")
    rec = ledger.recorder("c", clock=T0)
    lead = rec.participant("lead")
    alice = rec.participant("alice")
    rec.system("Answer from the recorded evidence.")
    rec.user("hi")
    return ledger, rec, lead, alice


def _assemble(ledger, conversation="c", **kw):
    kw.setdefault("provider", "openai")
    return ledger.assemble(conversation, now=T0, window_tokens=8000, output_tokens=500, **kw)


def _omitted(asm):
    return {o["ref"]: (o["reason"], o.get("detail", "")) for o in asm.manifest["omitted"]}


def _text(asm):
    return canonical_json(asm.payload)


@pytest.mark.parametrize(
    ("env", "reason", "detail"),
    [
        ({"provider_scope": "google"}, "provider_restricted", "(provider_scope google"),
        ({"privacy_class": "secret"}, "privacy_restricted", "(privacy class 'secret'"),
    ],
)
def test_a_memory_of_restricted_data_is_omitted_naming_its_source(env, reason, detail):
    """The memory carries the artifact's restriction; the manifest detail names the artifact that restricts it."""
    ledger, rec, lead, _ = _ledger()
    g = rec.tool_call("gmail.read", {}, "launch 9/9", name="g", **env)
    mem = rec.memory("DERIVED: launch is 9/9", sources=[g], name="m")
    rec.user("status?")
    asm = _assemble(ledger, participant_id=lead)
    assert "DERIVED" not in _text(asm)
    got_reason, got_detail = _omitted(asm)[mem]
    assert got_reason == reason
    assert got_detail.startswith(f"derived from c/art-g {detail}")


def test_a_google_derived_memory_still_goes_to_google():
    """Provider routing, not a blanket ban: the scope's own provider receives the derived memory."""
    ledger, rec, lead, _ = _ledger()
    g = rec.tool_call("gmail.read", {}, "launch 9/9", provider_scope="google")
    rec.memory("DERIVED: launch is 9/9", sources=[g])
    rec.user("status?")
    assert "DERIVED" in _text(_assemble(ledger, participant_id=lead, provider="google"))


def test_a_memory_declared_safe_keeps_only_its_own_restrictions():
    """tags=["safe_summary"] stops the inheritance: the summary goes, its raw source does not."""
    ledger, rec, lead, _ = _ledger()
    g = rec.tool_call("gmail.read", {}, "RAWBODY launch 9/9", provider_scope="google", name="g")
    mem = rec.memory("SAFE: 1 unread email", sources=[g], tags=["safe_summary"])
    rec.user("status?")
    asm = _assemble(ledger, participant_id=lead)
    assert "SAFE: 1 unread email" in _text(asm) and "RAWBODY" not in _text(asm)
    assert mem not in _omitted(asm)
    assert _omitted(asm)["c/art-g"][0] == "provider_restricted"


def test_a_memory_of_another_participants_private_result_is_private_to_that_owner():
    """Derived from alice's private notes: hidden from lead and from a request without participant, seen by alice."""
    ledger, rec, lead, alice = _ledger()
    p = rec.tool_call("notes", {}, "x", owner=alice, visibility="participant_private", name="p")
    mem = rec.memory("ALICE-DERIVED: culprit is payroll", sources=[p])
    rec.user("status?")
    for who in (lead, None):
        asm = _assemble(ledger, participant_id=who)
        assert "ALICE-DERIVED" not in _text(asm)
        reason, detail = _omitted(asm)[mem]
        assert reason == "private_to_participant"
        whom = f"not {who}" if who is not None else "and the call names no participant"
        assert detail == f"derived from c/art-p (participant_private, owned by {alice}, {whom})"
    assert "ALICE-DERIVED" in _text(_assemble(ledger, participant_id=alice))


def test_a_memory_of_an_audit_only_result_is_shown_to_nobody_unless_declared_safe():
    """An audit-only source hides what was derived from it even from its owner; the safe tag lifts that."""
    ledger, rec, _, alice = _ledger()
    a = rec.tool_call("scan", {}, "raw", owner=alice, visibility="audit_only", name="a")
    hidden = rec.memory("AUDIT-DERIVED: 3 findings", sources=[a], owner=alice)
    rec.memory("SAFE-AUDIT: scan done", sources=[a], owner=alice, tags=["safe_summary"])
    rec.user("status?")
    asm = _assemble(ledger, participant_id=alice)
    assert _omitted(asm)[hidden] == ("audit_only", "derived from c/art-a (audit_only)")
    assert "AUDIT-DERIVED" not in _text(asm) and "SAFE-AUDIT" in _text(asm)


def test_restrictions_flow_transitively_and_stop_at_a_safe_record():
    """A compaction of a memory of a Google result is Google-restricted; a memory of a safe summary is not."""
    ledger, rec, lead, _ = _ledger()
    g = rec.tool_call("gmail.read", {}, "launch 9/9", provider_scope="google", name="g")
    mem = rec.memory("MEM-DERIVED: launch is 9/9", sources=[g], name="m")
    comp = rec.compaction("RECAP-DERIVED: the launch date was read", covers=[mem], name="k")
    safe = rec.compaction("SAFE-RECAP: mail was read", covers=[mem], tags=["safe_summary"], name="safe")
    base = {"tenant_id": "default", "conversation_id": "c", "branch_id": "c/main", "created_at": T0}
    after = ToolMemory(id="c/after", summary="AFTER-SAFE: mail read", source_artifact_ids=(safe,), **base)
    ledger.store.append([after])
    rec.user("status?")
    asm = _assemble(ledger, participant_id=lead)
    omitted = _omitted(asm)
    assert omitted[comp][0] == "provider_restricted"
    assert omitted[comp][1].startswith("derived from c/art-g (provider_scope google")  # two hops away
    assert "RECAP-DERIVED" not in _text(asm)
    assert safe not in omitted and "c/after" not in omitted and "AFTER-SAFE" in _text(asm)


def test_sources_outside_the_candidates_are_looked_up_in_the_store():
    """A memory in another conversation, derived from a Google artifact of this one, is still restricted."""
    ledger, rec, _, _ = _ledger()
    g = rec.tool_call("gmail.read", {}, "launch 9/9", provider_scope="google", name="g")
    other = ledger.recorder("d", clock=T0)
    other.system("s")
    other.user("hi")
    mem = other.memory("CROSS-DERIVED: launch is 9/9", sources=[g.artifact], name="m")
    other.user("status?")
    asm = _assemble(ledger, "d")
    assert "CROSS-DERIVED" not in _text(asm)
    assert _omitted(asm)[mem][1].startswith("derived from c/art-g (provider_scope google")


def test_a_missing_source_does_not_restrict_and_a_cycle_of_sources_ends():
    """Sources found nowhere add nothing; memories that name each other (and themselves) are still decided."""
    ledger, rec, lead, _ = _ledger()
    base = {"tenant_id": "default", "conversation_id": "c", "branch_id": "c/main", "created_at": T0}
    g = rec.tool_call("gmail.read", {}, "launch 9/9", provider_scope="google", name="g")
    ledger.store.append(
        [
            ToolMemory(id="c/m1", summary="M1-LOOP", source_artifact_ids=("c/m2", "c/m1", "c/gone"), **base),
            ToolMemory(id="c/m2", summary="M2-LOOP", source_artifact_ids=("c/m1",), **base),
            ToolMemory(id="c/m3", summary="M3-GONE", source_artifact_ids=("c/gone",), **base),
            ToolMemory(id="c/m4", summary="M4-LOOP", source_artifact_ids=("c/m5",), **base),
            ToolMemory(id="c/m5", summary="M5-LOOP", source_artifact_ids=("c/m4", g.artifact), **base),
        ]
    )
    rec_text = _text(_assemble(ledger, participant_id=lead))
    assert "M1-LOOP" in rec_text and "M2-LOOP" in rec_text and "M3-GONE" in rec_text
    assert "M4-LOOP" not in rec_text and "M5-LOOP" not in rec_text  # the loop reaches the Google artifact


def test_compact_stamps_the_shared_provider_scope_and_fails_closed_on_mixed_scopes():
    """ledger.compact() over Google data is Google-scoped; over Google and Microsoft data it goes to neither."""
    ledger, rec, lead, _ = _ledger()
    rec.tool_call("gmail.read", {"q": "GMAILARGS"}, "GMAILBODY", provider_scope="google", name="g")
    for i in range(3):
        rec.user(f"filler {i}")
        rec.assistant(f"ok {i}")
    rec.user("status?")
    comp = ledger.compact("c")
    assert comp.provider_scope == "google"
    asm = _assemble(ledger, participant_id=lead)
    assert "GMAILARGS" not in _text(asm) and "gmail.read" not in _text(asm)
    assert _omitted(asm)[comp.id][0] == "provider_restricted"
    assert comp.id not in _omitted(_assemble(ledger, participant_id=lead, provider="google"))

    ledger2, rec2, lead2, _ = _ledger()
    rec2.tool_call("gmail.read", {}, "a", provider_scope="google")
    rec2.tool_call("outlook.read", {}, "b", provider_scope="microsoft")
    rec2.tool_call("local.read", {}, "c")
    rec2.user("status?")
    mixed = ledger2.compact("c")
    assert mixed.provider_scope == "mixed:google,microsoft"
    for provider in ("openai", "google", "microsoft"):
        asm = _assemble(ledger2, participant_id=lead2, provider=provider)
        assert _omitted(asm)[mixed.id][0] == "provider_restricted", provider
