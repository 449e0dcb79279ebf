"""Question/answer pairs enter together, or the manifest says why not.

Generated conversations: alternating user questions and assistant answers of random lengths, assembled at random
windows; for every adjacent question/answer pair exactly one half may be in the payload only when the manifest
carries an ``answer_left_out`` / ``question_left_out`` warning naming it. The pinned examples are conversations
where the role-order repair freed room after the pair check and fill then admitted one half of a pair alone.
"""

from __future__ import annotations

from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from ctxledger.assemble.pairs import NAMED_SPLITS
from ctxledger.ledger import Ledger
from ctxledger.scenarios._graph import GraphBuilder
from ctxledger.testing import MemoryStore

_WORDS = st.sampled_from(["invoice", "refund", "shipping", "warranty", "address", "discount", "order", "delay"])


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    turns=st.lists(st.tuples(_WORDS, st.integers(1, 60), st.integers(1, 120)), min_size=2, max_size=10),
    window=st.integers(1_400, 3_000),
    api=st.sampled_from(["openai-chat", "anthropic-messages"]),
)
@example(
    turns=[
        ("invoice", 1, 16),
        ("shipping", 1, 115),
        ("invoice", 1, 1),
        ("refund", 1, 1),
        ("shipping", 1, 1),
        ("invoice", 2, 110),
        ("shipping", 60, 120),
        ("invoice", 60, 120),
    ],
    window=1_400,
    api="openai-chat",
)
@example(
    turns=[
        ("discount", 59, 94),
        ("order", 59, 25),
        ("invoice", 1, 2),
        ("address", 1, 73),
        ("order", 1, 119),
        ("delay", 2, 74),
        ("order", 2, 110),
        ("refund", 1, 1),
        ("refund", 2, 2),
        ("address", 60, 2),
    ],
    window=1_400,
    api="anthropic-messages",
)
def test_pairs_enter_together_or_the_manifest_says_why(turns, window, api):
    ledger = Ledger(MemoryStore())
    g = GraphBuilder(ledger, "qa")
    g.system("sys", "You are a support agent.")
    for i, (word, q_len, a_len) in enumerate(turns):
        g.user(f"q{i}", f"Question {i} about the {word}: " + " ".join([word] * q_len) + "?")
        g.assistant(f"a{i}", f"Answer {i} on the {word}: " + " ".join(["details"] * a_len) + ".")
    g.user("latest", "One more thing about the order?")
    model = "gpt-4o" if api == "openai-chat" else "claude-sonnet-4-5"
    asm = ledger.assemble(
        g.conversation_id, now=g.now, api=api, model=model, window_tokens=window, output_tokens=500, margin_tokens=100
    )
    included = {e["ref"] for e in asm.manifest["included"]}
    warned = {w["value"] for w in asm.manifest["warnings"] if w["code"] in ("answer_left_out", "question_left_out")}
    counted = [int(w["value"]) for w in asm.manifest["warnings"] if w["code"] == "pairs_split"]
    splits = [i for i in range(len(turns)) if (g.id(f"q{i}") in included) != (g.id(f"a{i}") in included)]
    assert len(warned) <= NAMED_SPLITS and all(n > NAMED_SPLITS for n in counted)
    for i in splits if not counted else []:
        q, a = g.id(f"q{i}"), g.id(f"a{i}")
        if (q in included) != (a in included):
            assert (a if q in included else q) in warned
