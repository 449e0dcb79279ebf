"""The shared failure cases of these kinds: cross-user memory (B12) and a summary that drops a
user constraint (B09), run as real assemblies and checked by the generic case checker."""

from __future__ import annotations

from ctxledger.eval.cases import check_case, read_case_file, run_case
from ctxledger.ledger import Ledger
from ctxledger.testing import MemoryStore


def test_b12_memories_of_another_user_or_app_never_reach_the_payload(cases_dir):
    """B12: only the current user's memories (any session) are in; others are out_of_scope before ranking."""
    case = read_case_file(cases_dir / "B12.json")
    run = run_case(case, Ledger(MemoryStore()))
    assert check_case(run) == []
    details = {e["external_id"]: e["detail"] for e in run.assembly.manifest["omitted"]}
    assert "user_id 'u-alpha'" in details["mem1"] and "app 'other-app'" in details["mem3"]


def test_b12_without_a_request_scope_fails_closed(cases_dir):
    """A request that names no user cannot see any user-scoped memory (fail closed), whatever its score."""
    case = {k: v for k, v in read_case_file(cases_dir / "B12.json").items() if k != "request"}
    run = run_case(case, Ledger(MemoryStore()))
    omitted = {e["external_id"]: e["reason"] for e in run.assembly.manifest["omitted"]}
    assert omitted == {"mem1": "out_of_scope", "mem2": "out_of_scope", "mem3": "out_of_scope"}


def test_b09_summary_covers_history_but_the_user_constraint_stays_verbatim(cases_dir):
    """B09: the summary message is a compaction (data, not instructions); m3–m10 are summarized, m2 is verbatim."""
    run = run_case(read_case_file(cases_dir / "B09.json"), Ledger(MemoryStore()))
    assert check_case(run) == []
    manifest = run.assembly.manifest
    entry = {e["external_id"]: e for e in manifest["included"]}
    assert entry["m2"]["reason"] == "user_constraint" and entry["s1"]["reason"] == "active_compaction"
    summary = next(m for m in run.assembly.payload["messages"] if "Summary of earlier work" in str(m["content"]))
    assert summary["role"] == "user" and "<data " in summary["content"]
