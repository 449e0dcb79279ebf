"""Compaction with lineage, and the fidelity check that refuses a compaction that lost an invariant."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from pathlib import Path

import pytest
from represent_helpers import read_json

from ctxledger.errors import CompactionRefused, InputError
from ctxledger.ingest import parse_file, parse_openai_messages, write_batch
from ctxledger.records import Compaction, Message, Record, ToolCall, Trust
from ctxledger.represent import check_fidelity, compact, compact_checked, find_invariants
from ctxledger.represent.compaction import compaction_record
from ctxledger.testing import MemoryStore

PROHIBITION = "Do not push anything to the remote and do not open a pull request; I will review locally first."


@pytest.fixture(scope="module")
def b09(cases_dir: Path) -> tuple[list[Record], dict[str, Record], str]:
    """Case B09 imported through the OpenAI importer into a store: (records, by external id, s1 text)."""
    case = read_json(cases_dir / "B09.json")
    store = MemoryStore()
    write_batch(store, parse_openai_messages(case["messages"], conversation_id="b09"))
    records = store.records("default", "b09")
    by_external = {r.external_id: r for r in records if r.external_id}
    summary = next(m["content"] for m in case["messages"] if m["id"] == "s1")
    return records, by_external, summary


def _span(records: Sequence[Record], first: Record, last: Record) -> list[Record]:
    """The records from ``first`` to ``last`` inclusive, by seq (m2..m10 with their tool calls)."""
    return [r for r in records if first.seq <= r.seq <= last.seq]


def _summary_compactor(text: str):
    """A compactor that writes the given summary text (as the lossy summary in B09 did)."""

    def compactor(records, *, compaction_id, policy_version, through_seq=None):
        return compaction_record(
            records,
            compaction_id=compaction_id,
            policy_version=policy_version,
            through_seq=through_seq,
            text=text,
            body={},
            meta={"compactor": "test"},
        )

    return compactor


def test_b09_compaction_keeps_the_users_prohibition(b09):
    """Case B09: the compaction of m2..m10 keeps m2's "do not push" verbatim and passes the fidelity check."""
    records, ext, _ = b09
    span = _span(records, ext["m2"], ext["m10"])
    compaction = compact_checked(span, compaction_id="c-b09", policy_version="policy-v1")
    assert PROHIBITION in compaction.text
    assert compaction.body["user_constraints"] == [{"record_id": ext["m2"].id, "text": ext["m2"].content}]
    assert compaction.body["fidelity"] == {
        "ok": True,
        "checked": compaction.body["fidelity"]["checked"],
        "missing": [],
    }
    assert compaction.through_seq == ext["m10"].seq
    assert compaction.source_ids == tuple(r.id for r in span)
    assert (compaction.policy_version, compaction.trust) == ("policy-v1", Trust.GENERATED_SUMMARY)
    calls = [r for r in span if isinstance(r, ToolCall)]
    assert [i["record_id"] for i in compaction.body["completed_steps"]] == [c.id for c in calls]


def test_b09_lossy_summary_is_refused(b09):
    """The real B09 summary kept the task but dropped the prohibition: the fidelity check refuses it."""
    records, ext, summary = b09
    span = _span(records, ext["m2"], ext["m10"])
    lossy = _summary_compactor(summary)(span, compaction_id="s1", policy_version="p", through_seq=None)
    report = check_fidelity(find_invariants(span), lossy)
    assert not report.ok
    assert any(i.kind == "user_constraints" and i.record_id == ext["m2"].id for i in report.missing)
    with pytest.raises(CompactionRefused) as refused:
        compact_checked(span, compaction_id="s1", policy_version="p", compactor=_summary_compactor(summary))
    assert refused.value.reason == "lost_invariants"
    assert "Do not push anything to the remote" in str(refused.value)


def test_untagged_prohibition_is_found_by_its_wording(b09):
    """Without the case's ``user_constraint`` tag, the sentence is still a constraint by its wording."""
    records, ext, _ = b09
    untagged = [dataclasses.replace(r, meta={}) if r.id == ext["m2"].id else r for r in records]
    invariants = find_invariants(_span(untagged, ext["m2"], ext["m10"]))
    assert [i.text for i in invariants.of("user_constraints")] == [PROHIBITION]
    assert invariants.of("goal")[0].record_id == ext["m2"].id


def test_paraphrased_constraint_is_refused_even_when_its_id_is_cited(b09):
    """Constraints must survive word for word; citing the record id is not enough for them."""
    records, ext, _ = b09
    span = _span(records, ext["m2"], ext["m10"])
    faithful = compact(span, compaction_id="c", policy_version="p")
    paraphrase = faithful.text.replace(ext["m2"].content, "the user asked us not to push [see record]")
    paraphrase += f"\n(constraint from [{ext['m2'].id}])"
    report = check_fidelity(find_invariants(span), dataclasses.replace(faithful, text=paraphrase))
    assert [i.kind for i in report.missing] == ["user_constraints"]


@pytest.fixture(scope="module")
def tau_trial(data_dir: Path) -> list[Record]:
    """The first real tau-bench airline trajectory (booking with a constraint, an error, approvals)."""
    batch = parse_file(data_dir / "tau-bench" / "gpt-4o-airline_tasks0-39.json", "tau-bench")
    return list(batch.conversations[0].records)


def test_tau_bench_invariants(tau_trial: list[Record]):
    """A real booking: the user's time constraint, approvals, the failed booking call, all with record ids."""
    invariants = find_invariants(tau_trial)
    constraints = [i.text for i in invariants.of("user_constraints")]
    assert "Neither of those options works for me as I don't want to fly before 11 AM EST." in constraints
    assert "Yes, please proceed with that booking." in [i.text for i in invariants.of("approvals")]
    (error,) = invariants.of("tool_errors")
    assert "book_reservation(" in error.text and "failed" in error.text
    assert invariants.of("goal")[0].text == "Hi! I'm looking to book a flight from New York to Seattle on May 20th."


def test_dropping_a_tool_error_is_refused(tau_trial: list[Record]):
    """A compaction whose text no longer mentions the failed call's artifact is refused."""
    faithful = compact(tau_trial, compaction_id="c", policy_version="p")
    (error,) = find_invariants(tau_trial).of("tool_errors")
    lossy = "\n".join(line for line in faithful.text.splitlines() if error.record_id not in line)
    with pytest.raises(CompactionRefused) as refused:
        compact_checked(tau_trial, compaction_id="c", policy_version="p", compactor=_summary_compactor(lossy))
    missing = refused.value.missing
    assert "tool_errors" in [i.kind for i in missing]
    assert {i.record_id for i in missing} == {error.record_id}


def test_open_question_after_the_last_user_turn(tau_trial: list[Record]):
    """Compacting up to an assistant question that the user has not answered keeps it as an open question."""
    cut = next(
        i
        for i, r in enumerate(tau_trial)
        if isinstance(r, Message) and r.role == "assistant" and (r.content or "").rstrip().endswith("?")
    )
    invariants = find_invariants(tau_trial[: cut + 1])
    (question,) = invariants.of("open_questions")
    assert question.record_id == tau_trial[cut].id and question.text.endswith("?")
    assert compact_checked(tau_trial[: cut + 1], compaction_id="c", policy_version="p").body["fidelity"]["ok"]


def test_chained_compaction_carries_the_constraint_forward(tau_trial: list[Record]):
    """Compacting an earlier compaction plus newer records still keeps the earlier constraint verbatim."""
    first = compact(tau_trial[:20], compaction_id="c1", policy_version="p")
    chained = compact_checked([first, *tau_trial[20:]], compaction_id="c2", policy_version="p")
    assert "I don't want to fly before 11 AM EST." in chained.text
    assert chained.body["goal"] == first.body["goal"]
    assert chained.source_ids[0] == "c1"


def test_mini_swe_agent_run_pending_call_and_stop_reason(data_dir: Path):
    """A real SWE run: its unanswered submit call is pending and its exit status is a stop reason."""
    batch = parse_file(data_dir / "mini-swe-agent-deepseek" / "pydicom__pydicom-1139.traj.json")
    records = list(batch.conversations[0].records)
    compaction = compact_checked(records, compaction_id="c", policy_version="p")
    (pending,) = compaction.body["pending_steps"]
    assert pending["record_id"] == next(r.id for r in reversed(records) if isinstance(r, ToolCall))
    assert compaction.body["stop_reasons"][0]["text"] == "exit_status: Submitted"
    assert compaction.body["open_questions"] == []  # the agent's musings mid-run are not questions to the user
    assert "- DO NOT MODIFY: Tests, configuration files (pyproject.toml, setup.cfg, etc.)" in compaction.text
    assert not any("Inspect patch.txt" in i["text"] for i in compaction.body["approvals"])
    assert len(compaction.body["tool_errors"]) == 11
    replay = sum(len(str(getattr(r, "content", "") or "")) + getattr(r, "size_bytes", 0) for r in records)
    assert len(compaction.text) < replay / 2


def test_deterministic_and_scoped(tau_trial: list[Record]):
    """The same records compact to the same record; other conversations and empty input are refused."""
    assert compact(tau_trial, compaction_id="c", policy_version="p") == compact(
        tau_trial, compaction_id="c", policy_version="p"
    )
    stranger = dataclasses.replace(tau_trial[-1], id="x", conversation_id="other")
    with pytest.raises(InputError) as mixed:
        compact([*tau_trial, stranger], compaction_id="c", policy_version="p")
    assert mixed.value.field == "conversation_id"
    with pytest.raises(InputError):
        compact([], compaction_id="c", policy_version="p")


def test_through_seq_bounds_the_compaction(b09):
    """Records after ``through_seq`` are left out of the sources, the invariants and the text."""
    records, ext, _ = b09
    compaction = compact(records, compaction_id="c", policy_version="p", through_seq=ext["m10"].seq)
    assert compaction.through_seq == ext["m10"].seq
    assert ext["m14"].id not in compaction.source_ids
    assert "wrap up the task" not in compaction.text
    assert isinstance(compaction, Compaction)
