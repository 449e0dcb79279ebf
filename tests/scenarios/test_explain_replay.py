"""A summary manifest explains every record as a full trace does: by replaying the assembly.

Every scenario graph is assembled twice on one store, once with ``trace="full"`` and once with the default
summary; for every candidate record of the assembly, ``Ledger.explain`` on the summary (answered from the
included items, or by replay) must equal ``Ledger.explain`` on the full trace (answered from the stored
lists). The summary must also be smaller than the full record for a history that omits something, and a
replay after the store changed must refuse to answer rather than guess.
"""

from __future__ import annotations

from typing import Any

import pytest

from ctxledger.hashing import canonical_json
from ctxledger.ledger import Ledger
from ctxledger.scenarios._graph import GraphBuilder
from ctxledger.scenarios.catalog import SCENARIOS
from ctxledger.scenarios.runner import DEFAULT_REQUEST
from ctxledger.testing import MemoryStore


def _build(scenario: Any) -> tuple[Ledger, GraphBuilder, dict[str, Any]]:
    ledger = Ledger(MemoryStore(), policy=scenario.policy() if scenario.policy else None)
    builder = GraphBuilder(ledger, scenario.name)
    request = {**DEFAULT_REQUEST, "now": None, **scenario.build(builder)}
    if request["now"] is None:
        request["now"] = builder.now
    request.setdefault("branch_id", builder.branch_id)
    return ledger, builder, request


@pytest.mark.parametrize("scenario", SCENARIOS, ids=[s.name for s in SCENARIOS])
def test_summary_and_full_trace_explain_every_record_alike(scenario: Any) -> None:
    ledger, builder, request = _build(scenario)
    full = ledger.assemble(builder.conversation_id, trace="full", **request)
    summary = ledger.assemble(builder.conversation_id, **request)
    assert summary.payload_hash == full.payload_hash
    stored_full = ledger.get_assembly(full.id)
    stored_summary = ledger.get_assembly(summary.id)
    assert "omitted" in stored_full and "omitted" not in stored_summary
    assert stored_summary["payload"] is None and stored_full["payload"] == full.payload
    counted = sum(g["count"] for g in stored_summary["omissions"])
    assert counted == len(stored_full["omitted"]) == sum(stored_summary["omitted_by_reason"].values())
    for ref in stored_full["candidates"]:
        assert ledger.explain(summary.id, ref) == ledger.explain(full.id, ref), ref


def test_a_summary_grows_with_what_was_included_not_with_the_history() -> None:
    sizes = []
    for turns in (40, 400):
        ledger = Ledger(MemoryStore())
        builder = GraphBuilder(ledger, f"long-{turns}")
        builder.system("sys", "You answer questions about the deployment.")
        for i in range(turns):
            builder.user(f"q{i}", f"Question {i}: what changed in release {i}?")
            builder.assistant(f"a{i}", f"Release {i} changed the retry policy of worker {i}. " * 20)
        asm = ledger.assemble(
            builder.conversation_id,
            window_tokens=4_000,
            output_tokens=500,
            margin_tokens=100,
            branch_id=builder.branch_id,
            now=builder.now,
        )
        assert asm.manifest["omitted_by_reason"].get("budget", 0) > 0
        stored = asm.persisted()
        assert len(stored["included"]) < 2 * len(asm.turn_refs)  # one entry per included record
        per_included = ("included", "turn_refs", "decisions", "marks")
        sizes.append(len(canonical_json({k: v for k, v in stored.items() if k not in per_included})))
    assert sizes[1] < 1.5 * sizes[0]  # ten times the history, about the same record besides the included items


def test_a_replay_that_differs_says_so_instead_of_guessing() -> None:
    scenario = SCENARIOS[0]
    ledger, builder, request = _build(scenario)
    asm = ledger.assemble(builder.conversation_id, **request)
    omitted = [e["ref"] for e in asm.manifest["omitted"]]
    assert omitted, "the scenario must leave something out"
    first = ledger.explain(asm.id, omitted[0])
    assert first["status"] == "omitted"
    other = ledger.explain(asm.id, omitted[0], policy=_other_policy())
    assert other["status"] == "unknown" and other["reason"] == "replay_mismatch"
    assert "policy hash" in other["detail"] or "payload hash" in other["detail"]


def _other_policy() -> Any:
    from dataclasses import replace

    from ctxledger.policy.default import default_policy

    policy = default_policy()
    return replace(policy, version=policy.version + "-changed")


def test_unexplained_answers_keep_the_shape_of_an_answer() -> None:
    ledger = Ledger(MemoryStore())
    builder = GraphBuilder(ledger, "shape")
    builder.system("sys", "Be brief.")
    for i in range(30):
        builder.user(f"u{i}", f"Turn {i} " + "words " * 200)
    asm = ledger.assemble(
        builder.conversation_id, window_tokens=2_000, output_tokens=200, margin_tokens=50, branch_id=builder.branch_id
    )
    ref = asm.manifest["omitted"][0]["ref"]
    answer = ledger.explain(asm.id, ref, policy=_other_policy())
    assert set(answer) >= {"ref", "status", "reason", "detail", "chain"}
    assert answer["status"] == "unknown" and any("no answer is given" in c for c in answer["chain"])
