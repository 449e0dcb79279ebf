"""Subagent promotion of whole units, and request inputs that name nothing."""

from __future__ import annotations

from functools import partial

import pytest
from policy_helpers import fates as _fates
from policy_helpers import graph

from ctxledger.hashing import canonical_json

_graph = partial(graph, system_visibility="conversation")


# -- item 9: promotion -------------------------------------------------------------------------------------


def _subagent_run(g, promote):
    lead = g.participant("lead")
    kid = g.participant("kid", "subagent", parent="lead")
    g.user("u1", "Have the subagent fetch the mirror list.", visibility="conversation")
    private = {"owner": kid, "visibility": "participant_private"}
    g.tool("fetch", "http_get", {"url": "https://mirrors.example/list"}, "mirror-a\nmirror-b\n", **private)
    g.checkpoint(
        "kid-done", "kid-run", {"status": "succeeded", "promote": [g.id(p) for p in promote]},
        owner=kid, visibility="shared", shared_with=[lead],
    )  # fmt: skip
    g.user("u2", "Which mirrors did it find?", visibility="conversation")
    return lead


@pytest.mark.parametrize("listed", ["art-fetch", "fetch#call", "fetch"])
def test_promoting_any_record_of_a_tool_exchange_promotes_the_whole_unit(listed):
    """The artifact, the call or the assistant message alone promotes message, call and result together."""
    ledger, g = _graph()
    lead = _subagent_run(g, [listed])
    asm = ledger.assemble(g.conversation_id, participant_id=lead, now=g.now)
    inc, out = _fates(asm, g)
    assert {"fetch", "fetch#call", "art-fetch"} <= inc, out
    assert "mirror-a" in canonical_json(asm.payload)
    assert asm.manifest["warnings"] == []


def test_unpromoted_exchange_stays_out_and_an_unknown_promoted_id_is_a_warning():
    """Nothing listed that exists: the exchange stays not_promoted and the unknown id is named in warnings."""
    ledger, g = _graph()
    lead = _subagent_run(g, ["no-such-record"])
    asm = ledger.assemble(g.conversation_id, participant_id=lead, now=g.now)
    _, out = _fates(asm, g)
    assert out["art-fetch"] == "not_promoted" and out["fetch"] == "not_promoted"
    assert "mirror-a" not in canonical_json(asm.payload)
    (warning,) = asm.manifest["warnings"]
    assert warning["code"] == "unknown_promoted_record" and warning["value"] == g.id("no-such-record")
    assert g.id("kid-done") in warning["detail"]


def test_promotion_never_publishes_an_audit_only_record_of_the_unit():
    """Promotion does not publish an audit-only result, even listed by id: the unit stays out whole."""
    ledger, g = _graph()
    lead = g.participant("lead")
    kid = g.participant("kid", "subagent", parent="lead")
    g.user("u1", "Scan.", visibility="conversation")
    g.tool(
        "scan", "scan", {}, "raw scan output", owner=kid, visibility="participant_private",
        result_env={"visibility": "audit_only"},
    )  # fmt: skip
    g.checkpoint(
        "kid-done", "kid-run", {"status": "succeeded", "promote": [g.id(n) for n in ("scan", "scan#call", "art-scan")]},
        owner=kid, visibility="shared", shared_with=[lead],
    )  # fmt: skip
    g.user("u2", "Done?", visibility="conversation")
    asm = ledger.assemble(g.conversation_id, participant_id=lead, now=g.now)
    inc, out = _fates(asm, g)
    assert out["art-scan"] == "audit_only" and "scan" not in inc
    assert "raw scan output" not in canonical_json(asm.payload)


# -- item 15: unknown inputs -------------------------------------------------------------------------------


def test_unknown_inputs_fail_closed_and_are_named_in_warnings():
    ledger, g = _graph()
    g.user("u1", "Export.")
    g.tool("csv", "export", {}, "a,b\n1,2\n", media_type="text/csv")
    g.memory("m-csv", "1 row", sources=["art-csv"])
    g.memory("goog", "3 unread mails", provider_scope="google")
    g.user("u2", "Exact data please.")
    asm = ledger.assemble(
        g.conversation_id, exact_evidence=("nope", "m-csv"), participant_id="p/ghost", provider="nonsense", now=g.now
    )
    warnings = {(w["code"], w["input"], w["value"]) for w in asm.manifest["warnings"]}
    assert warnings == {
        ("unknown_exact_evidence", "exact_evidence", "nope"),
        ("unknown_participant", "participant_id", "p/ghost"),
        ("unknown_provider", "provider", "nonsense"),
    }
    _, out = _fates(asm, g)
    assert out["goog"] == "provider_restricted"  # still fails closed
    assert [r["artifact"] for r in asm.manifest["rehydrations"]] == [g.id("art-csv")]
    known = ledger.assemble(g.conversation_id, provider="google", exact_evidence=("m-csv",), now=g.now)
    assert known.manifest["warnings"] == []
