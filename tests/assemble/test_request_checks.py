"""Assembly requests are checked at the edge: snapshots, conversations, participant names, inputs without effect."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from ctxledger import Ledger
from ctxledger.errors import InputError, RecordNotFound
from ctxledger.policy import loads_policy
from ctxledger.records import Checkpoint, Participant
from ctxledger.testing import MemoryStore
from ctxledger.units import render_checkpoint

START = datetime(2026, 9, 1, 9, 0, tzinfo=UTC)
LATER = START + timedelta(hours=1)
SIZE = {"window_tokens": 4000, "output_tokens": 200}


def _branched():
    """main: system, user, fork point; b forks after it; bb forks from b."""
    ledger = Ledger(MemoryStore())
    rec = ledger.recorder("c", clock=START)
    rec.system("Be brief.")
    rec.user("main question")
    fork = rec.assistant("fork point")
    b = rec.branch("b", fork_after=fork)
    last = rec.user("on b")
    bb = rec.branch("bb", fork_after=last)
    rec.user("on bb")
    return ledger, rec, b, bb


def test_a_snapshot_past_the_head_names_as_of_seq_and_the_head():
    """as_of_seq beyond the conversation's head is an InputError, not a silent 'head' assembly."""
    ledger, _, _, _ = _branched()
    head = ledger.store.head_seq("default", "c")
    with pytest.raises(InputError) as info:
        ledger.assemble("c", as_of_seq=head + 1, now=LATER, **SIZE)
    assert info.value.field == "as_of_seq" and f"head of conversation c (seq {head})" in str(info.value)
    assert ledger.assemble("c", as_of_seq=head, now=LATER, **SIZE).manifest["snapshot_seq"] == head


def test_a_snapshot_before_the_branch_existed_says_where_it_begins():
    """A snapshot of bb before bb's Branch record is refused with the seq bb begins at; at that seq it assembles."""
    ledger, rec, b, bb = _branched()
    begins = rec.seq(bb)
    with pytest.raises(InputError) as info:
        ledger.assemble("c", branch_id=bb, as_of_seq=3, now=LATER, **SIZE)
    assert info.value.field == "as_of_seq"
    assert f"branch {bb} begins at seq {begins}" in str(info.value) and f"forked from {b}" in str(info.value)
    asm = ledger.assemble("c", branch_id=bb, as_of_seq=begins, now=LATER, **SIZE)
    assert [m["role"] for m in asm.payload["messages"]][:2] == ["system", "user"]
    assert ledger.assemble("c", as_of_seq=3, now=LATER, **SIZE).manifest["snapshot_seq"] == 3  # main has no fork


def test_an_unknown_conversation_is_named_as_a_conversation():
    """assemble('nope') says the conversation is not found in the tenant, with or without a branch."""
    ledger, _, _, bb = _branched()
    for kwargs in ({}, {"branch_id": bb}):
        with pytest.raises(RecordNotFound, match="conversation 'nope' not found in tenant 'default'"):
            ledger.assemble("nope", now=LATER, **kwargs, **SIZE)


def _two_speakers():
    ledger = Ledger(MemoryStore())
    rec = ledger.recorder("inc", clock=START)
    lead = rec.participant("lead")
    other = rec.participant("other")
    rec.system("Be brief.")
    rec.user("What broke?")
    rec.assistant("LEAD-SAYS the disk filled.", owner=lead)
    rec.assistant("OTHER-SAYS check the cron host.", owner=other)
    rec.user("Summarise.")
    return ledger, rec, lead


def test_a_participant_given_by_name_resolves_to_its_id():
    """participant_id='lead' is the Recorder's participant inc/participant/lead: its own turns stay assistant turns."""
    ledger, _, lead = _two_speakers()
    asm = ledger.assemble("inc", participant_id="lead", now=LATER, **SIZE)
    assert asm.manifest["participant_id"] == lead
    assert [w["code"] for w in asm.manifest["warnings"]] == []
    roles = {m["content"]: m["role"] for m in asm.payload["messages"] if isinstance(m.get("content"), str)}
    own = next(c for c in roles if "LEAD-SAYS" in c)
    relayed = next(c for c in roles if "OTHER-SAYS" in c)
    assert roles[own] == "assistant" and roles[relayed] == "user" and relayed.startswith("other: ")
    full = ledger.assemble("inc", participant_id=lead, now=LATER, **SIZE)
    assert full.payload_hash == asm.payload_hash


def test_an_ambiguous_or_unknown_participant_name():
    """A name two participants share is an InputError naming participant_id; an unknown name stays a warning."""
    ledger, _, _ = _two_speakers()
    env = {"tenant_id": "default", "conversation_id": "inc", "branch_id": "inc/main", "created_at": START}
    twin = Participant(id="inc/p-lead-2", name="lead", **env)
    ledger.append([twin])  # another participant record named "lead", under another id (e.g. an importer's)
    with pytest.raises(InputError) as info:
        ledger.assemble("inc", participant_id="lead", now=LATER, **SIZE)
    assert info.value.field == "participant_id"
    assert "inc/p-lead-2" in str(info.value) and "inc/participant/lead" in str(info.value)
    asm = ledger.assemble("inc", participant_id="ghost", now=LATER, **SIZE)
    assert [w["code"] for w in asm.manifest["warnings"]] == ["unknown_participant"]


def test_contract_inputs_under_a_policy_without_contracts_are_warned_about():
    """--agent/--call-type/--phase/--check-passed do nothing without a contract: one warning each, naming the field."""
    ledger, _, _ = _two_speakers()
    asm = ledger.assemble(
        "inc", agent="router", call_type="routing", phase="action", checks_passed=("approval",), now=LATER, **SIZE
    )
    warnings = [(w["code"], w["input"], w["value"]) for w in asm.manifest["warnings"]]
    assert warnings == [
        ("unused_contract_input", "agent", "router"),
        ("unused_contract_input", "call_type", "routing"),
        ("unused_contract_input", "phase", "action"),
        ("unused_contract_input", "checks_passed", "approval"),
    ]
    assert "has no working-set contracts" in asm.manifest["warnings"][0]["detail"]
    policy = loads_policy(
        '[policy]\nname = "p"\nversion = "1"\n[[contracts]]\nagent = "router"\ncall_type = "routing"\n'
        'sources = ["instructions", "latest_user_turn"]\n'
    )
    bound = ledger.assemble("inc", policy=policy, agent="router", call_type="routing", phase="x", now=LATER, **SIZE)
    assert bound.manifest["warnings"] == []  # bound to a contract: the inputs took effect
    unbound = ledger.assemble("inc", policy=policy, phase="action", now=LATER, **SIZE)
    assert [(w["code"], w["input"]) for w in unbound.manifest["warnings"]] == [("unused_contract_input", "phase")]
    assert "no contract of policy p@1 is bound" in unbound.manifest["warnings"][0]["detail"]


def test_now_earlier_than_the_newest_record_is_warned_about():
    """A now before records the call still sees is a now_before_records warning; a default or later now is not."""
    ledger, rec, _ = _two_speakers()
    early = START - timedelta(days=1)
    asm = ledger.assemble("inc", now=early, **SIZE)
    (warning,) = asm.manifest["warnings"]
    assert (warning["code"], warning["input"], warning["value"]) == ("now_before_records", "now", early.isoformat())
    assert rec.now.isoformat() in warning["detail"]
    assert ledger.assemble("inc", now=rec.now, **SIZE).manifest["warnings"] == []


def test_a_checkpoint_without_through_does_not_claim_seq_0():
    """through_seq 0 (covers nothing) renders without 'through seq 0'; a real through_seq is still shown."""
    base = {"id": "c/k", "tenant_id": "t", "conversation_id": "c", "branch_id": "c/main", "run_id": "r1"}
    assert render_checkpoint(Checkpoint(**base, state={"a": 1})) == 'Checkpoint of run r1:\n{"a": 1}'
    assert render_checkpoint(Checkpoint(**base, through_seq=7)).startswith("Checkpoint of run r1 through seq 7:")
