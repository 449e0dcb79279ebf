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
from ctxledger.replay_mismatch import GENERIC_REMEDY, REMEDIES, MismatchKind, ReplayMismatch, replay_remedy
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
