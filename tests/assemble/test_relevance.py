"""Relevance of the default policy: stemmed BM25, neighbours' relevance, and the question-vs-tool-loop weights."""

from __future__ import annotations

import dataclasses
from collections import Counter

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ctxledger.assemble import relevance
from ctxledger.assemble.lexical_index import IncrementalBM25
from ctxledger.assemble.relevance import is_question, spread, term_counts, tokenize
from ctxledger.ledger import Ledger
from ctxledger.policy.base import SelectionParams
from ctxledger.policy.default import default_policy
from ctxledger.scenarios import GraphBuilder
from ctxledger.testing import MemoryStore


def test_terms_are_stemmed_so_word_forms_match() -> None:
    """'adopting' in a question and 'adoption' in a turn share the stem 'adopt'; stop words are dropped."""
    question, turn = tokenize(["Is she adopting?", "The adoption agencies called"])
    assert "adopt" in question and "adopt" in turn
    assert "is" not in question and "the" not in turn


def test_spread_adds_neighbours_discounted_by_distance() -> None:
    """One score of 4 at position 2 gives 1, 2, 4, 2, 1, 0.5, 0 with decay 0.5 and window 3."""
    scores = np.array([0.0, 0.0, 4.0, 0.0, 0.0, 0.0, 0.0])
    np.testing.assert_allclose(spread(scores, 0.5, 3), [1.0, 2.0, 4.0, 2.0, 1.0, 0.5, 0.0])
    np.testing.assert_allclose(spread(scores, 0.5, 0), scores)
    np.testing.assert_allclose(spread(np.array([3.0]), 0.5, 3), [3.0])


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("When did Caroline go to the support group?", True),
        ("what is the status of order 5521", True),
        ("Did the tests pass", True),
        ("Update the submodules and build the project.", False),
        ("Yes, open it for customer C-204.", False),
        ("", False),
    ],
)
def test_is_question(text: str, expected: bool) -> None:
    """A question ends with '?' or opens with an interrogative or auxiliary word."""
    assert is_question(text) is expected


def test_weights_follow_the_rule() -> None:
    """Questions get the relevance-dominant weights; everything else (and question_weights=None) the base ones."""
    params = SelectionParams()
    assert params.weights(True) == (0.8, 0.1, 0.1)
    assert params.weights(False) == (0.4, 0.45, 0.15)
    assert SelectionParams(question_weights=None).weights(True) == (0.4, 0.45, 0.15)
    assert params.as_dict()["question_weights"] == [0.8, 0.1, 0.1]


def _chat(tool_loop: bool) -> tuple[Ledger, GraphBuilder]:
    """An old turn that answers the question, then chatter; optionally ending in a tool exchange."""
    ledger = Ledger(MemoryStore())
    g = GraphBuilder(ledger, "chat")
    g.user("u0", "Let me tell you about my trip.")
    g.assistant("a0", "Please do!")
    g.user("old", "We spent two weeks in Lisbon and loved the tiled facades.")
    for i in range(12):
        g.user(f"c{i}", f"Small talk number {i} about the weather and lunch plans today.")
        g.assistant(f"r{i}", f"Reply {i}: sounds lovely, enjoy the afternoon.")
    g.user("q", "Where did we spend two weeks?")
    if tool_loop:
        g.tool("t", "lookup_calendar", {"month": "May"}, '{"events": ["dentist"]}')
    return ledger, g


def _included(ledger: Ledger, g: GraphBuilder, window: int) -> set[str]:
    asm = ledger.assemble(g.conversation_id, now=g.now, window_tokens=window, output_tokens=0, margin_tokens=0)
    return {e["external_id"] for e in asm.manifest["included"]}


def test_a_question_reaches_back_for_its_answer() -> None:
    """Asked 'Where did we spend two weeks?', the old answering turn is kept over recent small talk."""
    ledger, g = _chat(tool_loop=False)
    included = _included(ledger, g, 100)
    assert {"old", "q", "r11"} <= included
    assert "r10" not in included


def test_a_tool_loop_stays_recency_first() -> None:
    """Continuing a tool loop, the newest turns come first (the base weights apply): the old answer ranks below them.

    It may still fill room the newest turns leave (here: the next-newest pair does not fit whole).
    """
    ledger, g = _chat(tool_loop=True)
    asm = ledger.assemble(g.conversation_id, now=g.now, window_tokens=100, output_tokens=0, margin_tokens=0)
    utility = {e["external_id"]: e["utility"] for e in asm.manifest["included"]}
    assert {"t", "q", "r11", "c11"} <= utility.keys()
    assert utility.get("old", 0.0) < min(utility[k] for k in ("t", "q", "r11", "c11"))


def test_neighbours_bring_in_the_answer_that_shares_no_word_with_the_question() -> None:
    """The reply right after the matching turn gets its neighbour's relevance; without spreading it is left out.

    Lexical relevance only in the second call: semantic relevance finds "Casa Lucio, table for two" by itself.
    """
    ledger = Ledger(MemoryStore())
    g = GraphBuilder(ledger, "n")
    g.user("ask", "Which restaurant should we book for the anniversary?")
    g.assistant("answer", "Casa Lucio, table for two at eight.")
    for i in range(10):
        g.user(f"x{i}", f"Unrelated errand {i}: pick up parcels and water the plants.")
    g.user("q", "What restaurant did we choose for the anniversary?")
    assert "answer" in _included(ledger, g, 130)
    flat = dataclasses.replace(default_policy(), selection=SelectionParams(neighbour_decay=0.0, semantic_weight=0.0))
    ledger.policy = flat
    assert "answer" not in _included(ledger, g, 130)


_WORDISH = st.sampled_from(
    ["the", "The", "running", "runs", "ran", "a", "I", "don't", "x_y", "42", "über", "Straße", "日本語", "token.py"]
) | st.sampled_from(["flies9", "Ying2", "'s3", "sses4", "e1d3", "generously1", "²", "x١"])  # ending in a digit


@settings(max_examples=100, deadline=None)
@given(st.lists(st.lists(_WORDISH | st.text(max_size=6), max_size=25).map(" ".join), max_size=6), st.booleans())
def test_term_counts_are_the_counted_tokens_in_first_appearance_order(texts: list[str], cold: bool) -> None:
    if cold:
        relevance._STEMS.clear()
    want = [dict(Counter(terms)) for terms in tokenize(texts)]
    got = term_counts(texts)
    assert got == want
    assert [list(t) for t in got] == [list(t) for t in want]


@settings(max_examples=100, deadline=None)
@given(
    st.lists(st.lists(_WORDISH | st.text(max_size=6), max_size=25).map(" ".join), min_size=1, max_size=8),
    st.lists(_WORDISH | st.text(max_size=6), max_size=12).map(" ".join),
)
def test_a_query_scored_by_its_counted_terms_scores_as_by_its_tokens(docs: list[str], query: str) -> None:
    """Relevance takes a query's terms from term_counts; the BM25 scores are bit for bit those of its token list."""
    index = IncrementalBM25()
    for doc in tokenize(docs):
        index.add(doc)
    by_tokens = index.scores(tokenize([query])[0]).tolist()
    assert index.scores(list(term_counts([query])[0])).tolist() == by_tokens


@settings(max_examples=300, deadline=None)
@given(st.text(min_size=1, max_size=12), st.sampled_from("0123456789"))
def test_a_word_ending_in_a_digit_is_its_own_snowball_stem(head: str, digit: str) -> None:
    """What lets the term table skip the stemmer for such words: every word the counter cuts, stemmed, stays."""
    for word in relevance._WORDS.findall((head + digit).lower()):
        if word.endswith(digit):
            assert relevance.stemmer().stemWord(word) == word
