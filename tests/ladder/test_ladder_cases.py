"""Cases B13 (a tool output bigger than the window) and B09 (a summary must not replace a user constraint)."""

from __future__ import annotations

import dataclasses

from ctxledger.assemble.compaction import build_compaction
from ctxledger.errors import RequiredBlocksDoNotFit
from ctxledger.eval.cases import check_case, read_case_file, run_case
from ctxledger.ledger import Ledger
from ctxledger.policy.default import default_policy
from ctxledger.records import Compaction
from ctxledger.testing import MemoryStore

LADDER_OFF = dataclasses.replace(
    default_policy(), selection=dataclasses.replace(default_policy().selection, ladder=False)
)


def test_b13_huge_tool_output_enters_as_an_excerpt(cases_dir):
    """B13: the 11 KB build log enters as a bounded excerpt that keeps the fatal line and names its artifact."""
    case = read_case_file(cases_dir / "B13.json")
    run = run_case(case, Ledger(MemoryStore()))
    assert check_case(run) == []
    entry = next(e for e in run.assembly.manifest["included"] if run.ext_by_record.get(e["ref"]) == "m4")
    assert (entry["representation"], entry["transform"]) == ("excerpt", "excerpt@1024")
    assert entry["locators"] and all(loc["artifact_id"] == entry["ref"] for loc in entry["locators"])
    saved = run.assembly.manifest["ledger"]["saved_by_transform"]
    assert saved == {"excerpt@1024": 6500 - entry["tokens"]}


def test_b13_locators_rehydrate_to_the_lines_the_excerpt_shows(cases_dir):
    """Every run of the excerpt is exactly the stored bytes its locator names; explain() shows the locators."""
    case = read_case_file(cases_dir / "B13.json")
    ledger = Ledger(MemoryStore())
    run = run_case(case, ledger)
    entry = next(e for e in run.assembly.manifest["included"] if run.ext_by_record.get(e["ref"]) == "m4")
    shown = run.assembly.payload["messages"][run.assembly.turn_refs.index(entry["ref"])]["content"]
    for loc in entry["locators"]:
        data = ledger.rehydrate(loc)
        assert data.decode("utf-8") in shown
        assert data == case["messages"][3]["content"].encode("utf-8")[loc["byte_start"] : loc["byte_end"]]
    why = ledger.explain(run.assembly.id, "m4")
    assert why["locators"] == entry["locators"]
    assert any(f"ctxledger rehydrate {entry['ref']}" in line for line in why["chain"])


def test_b13_without_the_ladder_the_required_step_does_not_fit(cases_dir):
    """Ladder off (verbatim only): the newest tool exchange cannot fit, and the error names it."""
    case = read_case_file(cases_dir / "B13.json")
    ledger = Ledger(MemoryStore(), policy=LADDER_OFF)
    run = run_case(case, ledger)
    assert isinstance(run.error, RequiredBlocksDoNotFit)
    assert "(m3,m4)" in str(run.error)


def test_b09_summary_message_covers_history_but_not_the_constraint(cases_dir):
    """B09 as imported: s1 stands for m3..m10 (omitted as summarized) while m2's prohibition stays verbatim."""
    case = read_case_file(cases_dir / "B09.json")
    assert check_case(run_case(case, Ledger(MemoryStore()))) == []


def _as_compaction(summary_tokens: int):
    """Prepare hook: write s1 as a checked Compaction through m10 (the case's reference cost kept)."""
    return lambda ledger, case, conv_id, records: _write_compaction(ledger, conv_id, summary_tokens)


def _write_compaction(ledger: Ledger, conv_id: str, summary_tokens: int) -> None:
    stored = ledger.store.records("default", conv_id)  # ``records`` are the parsed ones, before seq
    by_ext = {r.external_id: r for r in stored if r.external_id}
    snap = ledger.snapshots.load("default", conv_id, stored[0].branch_id)
    rec = build_compaction(snap, policy=ledger.policy, through_seq=by_ext["m10"].seq)
    ledger.append([dataclasses.replace(rec, external_id="s1", meta={**rec.meta, "tokens": summary_tokens})])


def test_b09_with_s1_imported_as_a_compaction_record(cases_dir):
    """B09 with s1 as a Compaction (lineage m2..m10, fidelity checked): same expectations hold."""
    case = read_case_file(cases_dir / "B09.json")
    summary = [m for m in case["messages"] if m.get("kind") == "summary"]
    edited = {**case, "messages": [m for m in case["messages"] if m.get("kind") != "summary"]}
    ledger = Ledger(MemoryStore())
    run = run_case(edited, ledger, prepare=_as_compaction(next(m["tokens"] for m in summary if m["id"] == "s1")))
    assert check_case(run) == []
    comp = next(r for r in ledger.store.records("default", "case-B09") if isinstance(r, Compaction))
    assert comp.body["fidelity"]["ok"] is True
    assert run.record_by_ext["m2"] in comp.source_ids and run.record_by_ext["m10"] in comp.source_ids
    text = run.assembly.payload["messages"][run.assembly.turn_refs.index(comp.id)]["content"]
    assert "Do not push anything to the remote" in text
