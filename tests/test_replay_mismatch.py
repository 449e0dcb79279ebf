"""What a replay that is not the same call says, and the advice chosen from its kind, never from its wording."""

from __future__ import annotations

from dataclasses import replace
from typing import Any, get_args

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ctxledger.assemble.version import ASSEMBLER_VERSION
from ctxledger.ledger import Ledger
from ctxledger.policy.default import default_policy
from ctxledger.replay_mismatch import (
    GENERIC_REMEDY,
    REMEDIES,
    MismatchKind,
    ReplayMismatch,
    relevance_mismatch,
    relevance_parts,
    replay_remedy,
)
from ctxledger.scenarios._graph import GraphBuilder
from ctxledger.store.memory import MemoryStore

KINDS = get_args(MismatchKind)


@given(kind=st.sampled_from(KINDS), sentence=st.text(max_size=80))
def test_the_remedy_follows_the_kind_whatever_the_sentence(kind: str, sentence: str) -> None:
    why = ReplayMismatch(kind, sentence)
    assert why == sentence and f"({why})" == f"({sentence})" and why.kind == kind
    assert replay_remedy(why) == REMEDIES.get(kind, GENERIC_REMEDY)


@given(sentence=st.sampled_from(["policy hash a then, b now", "relevance x then, y now"]) | st.text(max_size=40))
def test_a_bare_sentence_gets_the_generic_advice(sentence: str) -> None:
    assert replay_remedy(sentence) == GENERIC_REMEDY


def _assembled() -> tuple[Ledger, dict[str, Any]]:
    ledger = Ledger(MemoryStore())
    builder = GraphBuilder(ledger, "replay-kinds")
    builder.system("sys", "Answer from the release notes.")
    for i in range(30):
        builder.user(f"q{i}", f"What changed in release {i}?")
        builder.assistant(f"a{i}", f"Release {i} changed the retry policy of worker {i}. " * 12)
    asm = ledger.assemble(
        builder.conversation_id,
        window_tokens=2_000,
        output_tokens=200,
        margin_tokens=50,
        branch_id=builder.branch_id,
        now=builder.now,
    )
    return ledger, ledger.get_assembly(asm.id)


@pytest.mark.parametrize(
    ("kind", "change"),
    [
        ("assembler_version", lambda m, p: ({**m, "assembler_version": ASSEMBLER_VERSION + "-other"}, p)),
        ("policy_hash", lambda m, p: (m, replace(p, version=p.version + "-changed"))),
        ("payload_hash", lambda m, p: ({**m, "payload_hash": "sha256:" + "0" * 64}, p)),
        ("relevance", lambda m, p: ({**m, "policy": {**m["policy"], "relevance": "bm25+another-model"}}, p)),
    ],
)
def test_each_difference_is_reported_with_its_kind_and_its_own_advice(kind: str, change: Any) -> None:
    ledger, stored = _assembled()
    same, none = ledger.replay(stored)
    assert same is not None and none is None
    manifest, policy = change(stored, default_policy())
    replayed, why = ledger.replay(manifest, policy=policy)
    assert replayed is None and isinstance(why, ReplayMismatch) and why.kind == kind
    assert replay_remedy(why) == REMEDIES.get(kind, GENERIC_REMEDY)


_SCORERS = st.sampled_from(["bm25", "bm25+wordllama-l2_supercat-256@0.4.0.post1", "bm25+another-model@1"])
_SIGNALS = st.lists(st.sampled_from(["speaker", "date", "session"]), unique=True).map(
    lambda found: tuple(s for s in ("speaker", "date", "session") if s in found)
)


@given(scorer=_SCORERS, signals=_SIGNALS)
def test_a_relevance_name_splits_into_its_scorer_and_its_signals(scorer: str, signals: tuple[str, ...]) -> None:
    assert relevance_parts("+".join((scorer, *signals))) == (scorer, signals)


@given(then=st.tuples(_SCORERS, _SIGNALS), now=st.tuples(_SCORERS, _SIGNALS))
def test_only_a_different_scorer_blames_the_semantic_extra(
    then: tuple[str, tuple[str, ...]], now: tuple[str, tuple[str, ...]]
) -> None:
    if then == now:
        return
    why = relevance_mismatch("+".join((then[0], *then[1])), "+".join((now[0], *now[1])))
    assert why.kind == ("relevance" if then[0] != now[0] else "relevance_signals")
    assert ("semantic extra" in why) == (then[0] != now[0])


def _two_speakers(turns: int, private: bool) -> tuple[Ledger, str, str, list[str]]:
    """A conversation of two owners, assembled for the first at a small window: the assembly id, the owner of the
    even turns (``private``: only they see them, so the assembly shows none) and the records left out for budget."""
    ledger = Ledger(MemoryStore())
    builder = GraphBuilder(ledger, f"two-{turns}")
    first, second = builder.participant("alice", "user"), builder.participant("bob", "user")
    builder.system("sys", "Answer from the release notes.")
    for i in range(turns):
        who, name = (second, "bob") if i % 2 == 0 else (first, "alice")
        seen = {"visibility": "participant_private"} if private and who == second else {}
        builder.user(f"u{i}", f"What changed in release {i}? " * 4, speaker=name, owner=who, **seen)
        builder.assistant(f"a{i}", f"Release {i} changed the retry policy of worker {i}. " * 10)
    asm = ledger.assemble(
        builder.conversation_id,
        participant_id=first,
        window_tokens=900,
        output_tokens=100,
        margin_tokens=20,
        branch_id=builder.branch_id,
        now=builder.now,
    )
    left_out = [e["ref"] for e in asm.manifest["omitted"] if e["reason"] == "budget"]
    return ledger, asm.id, second, left_out


@pytest.mark.parametrize(("turns", "private"), [(12, False), (21, False), (12, True), (21, True)])
def test_a_record_forgotten_after_the_assembly_is_named_as_the_cause(turns: int, private: bool) -> None:
    """Whether or not the assembly showed a forgotten record (which reduces its manifest to a summary)."""
    ledger, asm_id, second, left_out = _two_speakers(turns, private)
    kept = [ref for ref in left_out if "/a" in ref]
    assert kept, "the assembly must leave out a record forget keeps"
    assert ledger.explain(asm_id, kept[0])["status"] == "omitted"
    ledger.forget(participant_id=second)
    why = ledger.explain(asm_id, kept[0])
    assert (why["status"], why["reason"]) == ("unknown", "replay_mismatch")
    assert "retention changed" in why["detail"] and "rule forget" in why["detail"]
    assert "semantic extra" not in why["detail"]
    stored = ledger.get_assembly(asm_id)
    assert (stored.get("form") == "summary") != private and "omitted" not in stored
    _, mismatch = ledger.replay(stored)
    assert mismatch is not None and mismatch.kind == "retention"
