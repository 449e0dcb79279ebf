"""Rehydration reads back only what no hard filter omitted."""

from __future__ import annotations

import json
from datetime import UTC, datetime

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ctxledger import Ledger, loads_policy
from ctxledger.policy.rehydration import READABLE_OMISSIONS

CLOCK = datetime(2026, 9, 1, tzinfo=UTC)
ROUTER = loads_policy(
    """[policy]
name = "ws"
version = "1"
[[contracts]]
agent = "router"
call_type = "routing"
sources = ["instructions", "latest_user_turn", "memory"]
"""
)


def _text(asm) -> str:
    return json.dumps(asm.payload)


def test_a_sibling_branch_artifact_is_not_read_back_and_explain_agrees():
    """A main-branch memory whose source lies on a sibling branch gets a reference, reason not_in_lineage."""
    ledger = Ledger.open("memory://")
    rec = ledger.recorder("c", clock=CLOCK)
    rec.system("sys")
    fork = rec.user("start")
    rec.branch("b", fork_after=fork)
    other = rec.tool_call("branch_tool", {}, "BRANCHRAW only on b")
    rec.on(rec.main)
    mem = rec.memory("MAINMEM summary", sources=[other.artifact])
    rec.user("exact data please")
    asm = ledger.assemble("c", exact_evidence=[mem], window_tokens=8000, output_tokens=500)
    (entry,) = asm.manifest["rehydrations"]
    assert (entry["decision"], entry["reason"]) == ("reference", "not_in_lineage")
    assert "BRANCHRAW" not in _text(asm) and "MAINMEM" in _text(asm)
    why = ledger.explain(asm.id, other.artifact)
    assert (why["status"], why["reason"]) == ("omitted", "not_in_lineage")
    assert not any("rehydrated (" in step for step in why["chain"])


def test_a_working_set_contract_is_not_bypassed_by_exact_evidence():
    """The router's contract allows memories, not tool results: its memory's CSV stays out."""
    ledger = Ledger.open("memory://")
    rec = ledger.recorder("c", clock=CLOCK)
    rec.system("sys")
    rec.user("look up the rows")
    csv = "id,val\n" + "\n".join(f"{i},CSVROW{i}" for i in range(30))
    x = rec.tool_call("db_query", {"q": "rows"}, csv)
    mem = rec.memory("MEM 30 rows of val", sources=[x.artifact])
    rec.user("Use the exact CSV from before")
    kw = {"exact_evidence": [mem], "window_tokens": 8000, "output_tokens": 500}
    routed = ledger.assemble("c", policy=ROUTER, agent="router", call_type="routing", **kw)
    (entry,) = routed.manifest["rehydrations"]
    assert (entry["decision"], entry["reason"]) == ("reference", "out_of_contract")
    assert "CSVROW" not in _text(routed) and "MEM 30 rows" in _text(routed)
    assert ledger.explain(routed.id, x.artifact)["reason"] == "out_of_contract"
    # without the contract the same request reads the CSV back (covered_by_memory does not block it)
    free = ledger.assemble("c", **kw)
    assert free.manifest["rehydrations"][0]["decision"] == "rehydrated" and "CSVROW29" in _text(free)
    assert ledger.explain(free.id, x.artifact)["reason"] == "covered_by_memory"


def test_a_secret_the_secrets_stage_omitted_is_not_read_back():
    """The raw result holds a key, so the default policy omits it as secret: no rehydration, not even redacted."""
    ledger = Ledger.open("memory://")
    rec = ledger.recorder("c", clock=CLOCK)
    rec.system("sys")
    rec.user("read the config")
    key = "ghp_" + "A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8"
    x = rec.tool_call("read_config", {}, f"region=eu-west-1\ntoken={key}\nREGIONLINE ok\n")
    mem = rec.memory("config region is eu-west-1", sources=[x.artifact])
    rec.user("show me the exact config")
    asm = ledger.assemble("c", exact_evidence=[mem], window_tokens=8000, output_tokens=500)
    (entry,) = asm.manifest["rehydrations"]
    assert (entry["decision"], entry["reason"]) == ("reference", "secret")
    assert key not in _text(asm) and "REGIONLINE" not in _text(asm)


PLACES = ("main", "branch", "audit_only", "private")


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.sampled_from(PLACES), min_size=1, max_size=4), st.booleans())
def test_rehydrated_artifacts_are_never_hard_filtered(places, contract):
    """Property: every artifact read back was omitted, if at all, only for a readable reason; the rest are refs."""
    ledger = Ledger.open("memory://")
    rec = ledger.recorder("c", clock=CLOCK)
    rec.system("sys")
    fork = rec.user("start")
    other = rec.participant("other")
    arts = {}
    for i, place in enumerate(places):
        marker = f"RAWMARK{i}X"
        if place == "branch":
            rec.branch(f"b{i}", fork_after=fork)
            arts[i] = rec.tool_call(f"tool{i}", {}, marker).artifact
            rec.on(rec.main)
        elif place == "main":
            arts[i] = rec.tool_call(f"tool{i}", {}, marker).artifact
        else:
            env = {"visibility": "audit_only"} if place == "audit_only" else {"owner": other}
            result = {"visibility": "participant_private"} if place == "private" else env
            x = rec.tool_call(f"tool{i}", {}, marker, result_env=result, **({} if place == "private" else env))
            arts[i] = x.artifact
    mems = [rec.memory(f"memory {i} of tool{i}", sources=[arts[i]]) for i in range(len(places))]
    rec.user("quote the exact outputs")
    kw = {"policy": ROUTER, "agent": "router", "call_type": "routing"} if contract else {}
    asm = ledger.assemble("c", exact_evidence=mems, window_tokens=8000, output_tokens=500, **kw)
    omitted = {o["ref"]: o["reason"] for o in asm.manifest["omitted"]}
    text = _text(asm)
    entries = {e["artifact"]: e for e in asm.manifest["rehydrations"]}
    for i, aid in arts.items():
        reason = omitted.get(aid)
        hard = reason is not None and reason not in READABLE_OMISSIONS
        entry = entries.get(aid)
        if hard:
            assert f"RAWMARK{i}X" not in text
            if entry is not None:
                assert (entry["decision"], entry["reason"]) == ("reference", reason)
        if entry is not None and entry["decision"] == "rehydrated":
            assert not hard and f"RAWMARK{i}X" in text
    if not contract:  # sanity: the main-branch ones do come back
        for i, place in enumerate(places):
            if place == "main":
                assert entries[arts[i]]["decision"] == "rehydrated"
