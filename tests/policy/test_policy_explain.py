"""`explain` answers with the chain memory → artifact → branch → policy version → stage (seed 004 §4.4)."""

from __future__ import annotations

import pytest

from ctxledger.errors import RecordNotFound
from ctxledger.ledger import Ledger
from ctxledger.scenarios._graph import GraphBuilder
from ctxledger.testing import MemoryStore


@pytest.fixture
def explained():
    """A Gmail summary inherited by a branch, its raw Google artifact restricted for OpenAI, one assembly."""
    ledger = Ledger(MemoryStore())
    g = GraphBuilder(ledger, "why")
    g.system("sys", "Be brief.")
    g.user("u1", "Check my inbox.")
    g.tool(
        "gmail",
        "gmail.get",
        {"q": "unread"},
        "From: a@b.example\nBody: meet at 5",
        result_env={"provider_scope": "google"},
    )
    g.memory(
        "mem-123",
        "1 unread email (meeting at 5).",
        sources=["art-gmail"],
        revalidation_tool="gmail.get",
        tags=["safe_summary"],  # declared safe: it does not carry the Google scope of its source
    )
    branch = g.branch("b2", fork_after="mem-123")
    g.user("u2", "Anything new?")
    asm = ledger.assemble(g.conversation_id, branch_id=branch, provider="openai", now=g.now)
    return ledger, g, asm


def test_why_did_the_model_see_this_memory(explained):
    """An included memory explains its artifact, the branch it was inherited from, the policy and the stage."""
    ledger, g, asm = explained
    why = ledger.explain(asm.id, "mem-123")
    assert why["status"] == "included" and why["stage"] == "selection"
    chain = " | ".join(why["chain"])
    assert f"derived from {g.id('art-gmail')}" in chain
    assert f"inherited from branch {g.main}" in chain and f"active branch {g.id('b2')}" in chain
    assert "under policy ctxledger-default version 4 (sha256:" in chain
    assert "admitted by stage selection" in chain and "the compact memory was sufficient" in chain


def test_why_did_the_model_not_see_that_artifact(explained):
    """An omitted raw artifact explains the stage and reason code, with the provider route in words, no content."""
    ledger, g, asm = explained
    why = ledger.explain(asm.id, g.id("art-gmail"))
    assert why["status"] == "omitted" and (why["stage"], why["reason"]) == ("privacy", "provider_restricted")
    chain = " | ".join(why["chain"])
    assert "left out by stage privacy: provider_restricted" in chain and "provider 'openai'" in chain
    assert "meet at 5" not in chain
    assert [d["outcome"] for d in why["decisions"]] == ["omit"]


def test_explain_unknown_ref_names_the_assembly(explained):
    """Asking about a record that was not a candidate raises RecordNotFound naming the assembly."""
    ledger, _, asm = explained
    with pytest.raises(RecordNotFound, match=asm.id):
        ledger.explain(asm.id, "no-such-record")


def test_explain_past_the_fork_point_does_not_say_inherited():
    """A record on the parent branch after the fork is explained as not inherited (it used to say 'inherited')."""
    ledger = Ledger(MemoryStore())
    g = GraphBuilder(ledger, "fork")
    g.system("sys", "Be brief.")
    g.user("u1", "Draft a reply.")
    g.memory("shared-note", "The user signs as Ana.", visibility="conversation")
    b1 = g.branch("b1", fork_after="shared-note")
    g.memory("sib-note", "Formal tone chosen.", visibility="conversation")
    g.on(g.main)
    g.user("later", "Also check last year's memo.")
    b2 = g.branch("b2", fork_after="u1")
    g.user("u2", "Make it casual.")
    asm = ledger.assemble(g.conversation_id, branch_id=b2, now=g.now)
    later = " | ".join(ledger.explain(asm.id, "later")["chain"])
    assert "not inherited" in later and "inherited from" not in later and "not_in_lineage" in later
    note = " | ".join(ledger.explain(asm.id, "u1")["chain"])
    assert f"inherited from branch {g.main}" in note
    sib = " | ".join(ledger.explain(asm.id, "sib-note")["chain"])
    assert f"outside the lineage of the active branch {b2}" in sib and "may fill room" in sib
    assert b1 in sib
