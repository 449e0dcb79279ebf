"""Speakers of multi-participant conversations on both providers."""

from __future__ import annotations

from functools import partial

import pytest
from policy_helpers import graph

from ctxledger.hashing import canonical_json
from ctxledger.ledger import Ledger
from ctxledger.testing import MemoryStore

_graph = partial(graph, system_visibility="conversation")


# -- item 12: speakers -------------------------------------------------------------------------------------


def _debate():
    ledger, g = _graph()
    alice = g.participant("alice")
    bob = g.participant("bob")
    g.user("topic", "Tabs or spaces? Each of you argue once.", visibility="conversation")
    g.assistant("a1", "Tabs: one byte per level.", owner=alice, visibility="conversation")
    g.assistant("b1", "Spaces: the same everywhere.", owner=bob, visibility="conversation")
    g.assistant("a2", "Tabs let readers pick the width.", owner=alice, visibility="conversation")
    g.user("ask", "Bob, your reply?", visibility="conversation")
    return ledger, g, alice, bob


def test_openai_other_participants_turns_are_labelled_user_turns_and_own_turns_are_named():
    ledger, g, _, bob = _debate()
    asm = ledger.assemble(g.conversation_id, api="openai-chat", participant_id=bob, now=g.now)
    by_ref = dict(zip(asm.turn_refs, asm.payload["messages"], strict=True))
    alice_turn = by_ref[g.id("a1")]
    assert alice_turn == {"role": "user", "name": "alice", "content": "alice: Tabs: one byte per level."}
    assert by_ref[g.id("b1")] == {
        "role": "assistant",
        "name": "bob",
        "content": "Spaces: the same everywhere.",
    }
    transforms = {e["external_id"]: e["transform"] for e in asm.manifest["included"]}
    assert transforms["a1"] == "speaker_relayed" and transforms["b1"] == "speaker_named"
    assert asm.input_tokens == asm.manifest["tokens"]["estimated_input"]


def test_anthropic_never_merges_another_participants_words_into_the_assistant_message():
    ledger, g, _, bob = _debate()
    asm = ledger.assemble(g.conversation_id, api="anthropic-messages", participant_id=bob, now=g.now)
    assistant = [b["text"] for m in asm.payload["messages"] if m["role"] == "assistant" for b in m["content"]]
    assert assistant == ["bob: Spaces: the same everywhere."]
    user = [b["text"] for m in asm.payload["messages"] if m["role"] == "user" for b in m["content"]]
    assert "alice: Tabs: one byte per level." in user and "alice: Tabs let readers pick the width." in user


def test_without_a_participant_every_speaker_is_named_but_keeps_the_assistant_role():
    ledger, g, _, _ = _debate()
    asm = ledger.assemble(g.conversation_id, api="openai-chat", now=g.now)
    assistants = [(m["name"], m["content"]) for m in asm.payload["messages"] if m["role"] == "assistant"]
    assert assistants == [
        ("alice", "Tabs: one byte per level."),
        ("bob", "Spaces: the same everywhere."),
        ("alice", "Tabs let readers pick the width."),
    ]


@pytest.mark.parametrize("api", ["openai-chat", "anthropic-messages"])
def test_single_agent_conversations_are_byte_identical(api):
    """One assistant speaker, assembled for it or for nobody: no names, no relabelling, same payload."""
    ledger = Ledger(MemoryStore())
    messages = [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "Hi."},
        {"role": "assistant", "content": "Hello."},
        {"role": "user", "content": "Bye."},
    ]
    ledger.import_messages(messages, conversation_id="solo")
    owner = next(r.owner_participant_id for r in ledger.store.records("default", "solo") if r.kind.value == "message"
                 and str(r.role) == "assistant")  # fmt: skip
    plain = ledger.assemble("solo", api=api)
    mine = ledger.assemble("solo", api=api, participant_id=owner)
    assert plain.payload_hash == mine.payload_hash
    assert not any("name" in m for m in plain.payload["messages"])
    assert "assistant: Hello." not in canonical_json(plain.payload)  # no label either
    assert not any(e["transform"] for e in plain.manifest["included"])
