"""Relevance matches what a question asks about: its question words and stop words are left out of the query."""

from __future__ import annotations

import dataclasses
import re
import types

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ctxledger.assemble.dates import with_dates, with_session
from ctxledger.assemble.phases.select import relevance_scores
from ctxledger.assemble.query import QUESTION_WORDS, query_topic, unit_relevance
from ctxledger.assemble.relevance import spread, tokenize, with_semantic
from ctxledger.assemble.snapshot import SnapshotLoader
from ctxledger.assemble.speakers import named_speaker, with_speaker, without_speaker
from ctxledger.errors import InvalidSetting
from ctxledger.ledger import Ledger
from ctxledger.policy.base import SelectionParams
from ctxledger.policy.default import default_policy
from ctxledger.policy.loader import policy_from_dict
from ctxledger.scenarios import GraphBuilder
from ctxledger.testing import MemoryStore

_VOCAB = ["What", "did", "Ann", "cook", "when", "the", "Would", "she", "paint", "Bob's", "lake", "in", "June", "2023"]
_FUNCTION = {"what", "did", "when", "the", "would", "in"}  # the vocabulary's question and stop words


def test_the_topic_keeps_the_content_words_in_their_order() -> None:
    assert query_topic("What did Melanie paint in June 2023?") == "Melanie paint June 2023"
    assert query_topic("WHEN WOULD the parcel ARRIVE?") == "parcel ARRIVE"
    assert query_topic("Where has Bob's dog been?") == "Bob dog"  # the one-letter 's goes, as tokenize drops it
    assert query_topic("What is it?") == "What is it?"  # nothing else left: the query as written
    assert query_topic("") == ""


@settings(max_examples=150, deadline=None)
@given(st.lists(st.sampled_from(_VOCAB), max_size=10), st.sampled_from(["", "?", ".", " ?"]))
def test_the_topic_is_the_query_without_its_function_words(words: list[str], end: str) -> None:
    query = " ".join(words) + end
    topic = query_topic(query)
    content = [w for w in re.findall(r"\w\w+", query) if w.lower() not in _FUNCTION]
    assert topic == (" ".join(content) if content else query)
    assert query_topic(topic) == topic
    assert not {w.lower() for w in topic.split()} & QUESTION_WORDS or not content


def _conversation() -> tuple[Ledger, GraphBuilder]:
    ledger = Ledger(MemoryStore())
    g = GraphBuilder(ledger, "topic")
    g.user("asks", "What did you do? What did you see? What did they say?", speaker="Bob")
    g.assistant("cook", "I cooked a risotto with mushrooms for the party.", speaker="Ann")
    for i in range(5):
        g.user(f"u{i}", f"Errand {i}: the post office and groceries.", speaker="Bob")
        g.assistant(f"a{i}", f"Reply {i}: good luck with those.", speaker="Ann")
    g.tick(60 * 24)
    g.user("late", "Did you paint the lake at sunset in the end?", speaker="Bob")
    g.assistant("paint", "Yes, and I framed the painting for my sister.", speaker="Ann")
    return ledger, g


def test_a_turn_of_question_words_gets_no_lexical_relevance_from_them() -> None:
    """'What did Ann cook?' matches the turn of three 'what did' questions only through its question words."""
    ledger, g = _conversation()
    snap = SnapshotLoader(ledger.store).load("default", g.conversation_id, g.branch_id)
    lexical = SelectionParams(semantic_weight=0.0, speaker_boost=0.0, date_boost=0.0, session_boost=0.0)
    lexical = dataclasses.replace(lexical, neighbour_window=0)
    ids = [u.records[0].external_id for u in snap.units]
    n = len(snap.units)
    kept = unit_relevance("What did Ann cook?", snap.index, None, snap.facets, n, lexical)
    dropped = unit_relevance(
        "What did Ann cook?", snap.index, None, snap.facets, n, dataclasses.replace(lexical, drop_question_words=True)
    )
    kept_plain = unit_relevance(
        "What did Ann cook?", snap.index, None, snap.facets, n, dataclasses.replace(lexical, drop_question_words=False)
    )
    assert np.array_equal(kept, dropped)  # the default drops them
    assert kept_plain[ids.index("asks")] > 0
    assert dropped[ids.index("asks")] == 0
    assert dropped[ids.index("cook")] == 1.0


def _composed(query: str, snap: object, selection: object) -> np.ndarray:
    """The relevance signals applied one after another to the query as written (the definition)."""
    sel, facets = selection, snap.facets  # type: ignore[attr-defined]
    scores = snap.index.scores(tokenize([query])[0] if query else [], len(snap.units))  # type: ignore[attr-defined]
    speakers, days, sessions = facets.arrays()
    named = named_speaker(query, facets.names) if sel.speaker_boost > 0 and query else None  # type: ignore[attr-defined]
    scores = with_semantic(scores, without_speaker(query, named), snap.vectors, sel.semantic_weight)  # type: ignore[attr-defined]
    scores = with_dates(scores, query, days, sel.date_boost)  # type: ignore[attr-defined]
    scores = spread(scores, sel.neighbour_decay, sel.neighbour_window)  # type: ignore[attr-defined]
    scores = with_speaker(scores, named, speakers, facets.names, sel.speaker_boost)  # type: ignore[attr-defined]
    scores = with_session(scores, sessions, sel.session_boost)  # type: ignore[attr-defined]
    top = float(scores.max()) if len(scores) else 0.0
    return scores / top if top > 0 else scores


@settings(max_examples=60, deadline=None)
@given(st.lists(st.sampled_from([*_VOCAB, "risotto", "errand", "sister", "framed"]), min_size=0, max_size=8))
def test_with_question_words_kept_unit_relevance_is_the_signals_composed(words: list[str]) -> None:
    """With the query as written and the index's ``b``, the assembler's relevance is the signals one after another."""
    ledger, g = _SHARED
    snap = SnapshotLoader(ledger.store).load("default", g.conversation_id, g.branch_id)
    policy = default_policy()
    kept = dataclasses.replace(policy.selection, drop_question_words=False, bm25_b=0.75)
    policy = dataclasses.replace(policy, selection=kept)
    query = " ".join(words) + "?"
    request = types.SimpleNamespace(query=query)
    assert np.array_equal(relevance_scores(request, snap, policy), _composed(query, snap, kept))  # type: ignore[arg-type]
    bm25 = snap.index.scores(tokenize([query])[0], len(snap.units))
    top = float(bm25.max()) if len(bm25) else 0.0
    expected = bm25 / top if top > 0 else bm25
    assert np.array_equal(relevance_scores(request, snap, None), expected)  # type: ignore[arg-type]


_SHARED = _conversation()


def test_drop_question_words_is_a_policy_setting() -> None:
    assert SelectionParams().drop_question_words is True
    assert SelectionParams().as_dict()["drop_question_words"] is True
    policy = policy_from_dict({"policy": {"name": "p", "version": "1"}, "selection": {"drop_question_words": False}})
    assert policy.selection.drop_question_words is False
    assert policy.hash != policy_from_dict({"policy": {"name": "p", "version": "1"}}).hash
    with pytest.raises(InvalidSetting, match="drop_question_words"):
        SelectionParams(drop_question_words="yes")  # type: ignore[arg-type]


_TEXTS = [
    "I finished a painting of the lake at sunset.",
    "That sounds peaceful, I love lakes and long walks around the lake in the evening with my dogs.",
    "We went camping by the lake last summer.",
    "Painting",
    "The post office was closed again today, so the parcel waits.",
]


@settings(max_examples=40, deadline=None)
@given(st.floats(0.0, 1.0, allow_nan=False), st.sampled_from(["lake painting", "parcel", "camping lake sunset"]))
def test_a_calls_length_normalisation_gives_bm25s_scores_with_that_b(b: float, query: str) -> None:
    import bm25s

    from ctxledger.assemble.lexical_index import IncrementalBM25
    from ctxledger.assemble.relevance import stemmer, tokenize

    index = IncrementalBM25()
    for doc in tokenize(_TEXTS):
        index.add(doc)
    ref = bm25s.BM25(b=b)
    ref.index(bm25s.tokenize(_TEXTS, stopwords="en", stemmer=stemmer(), show_progress=False), show_progress=False)
    terms = tokenize([query])[0]
    np.testing.assert_allclose(index.scores(terms, b=b), ref.get_scores(terms), rtol=1e-5, atol=1e-6)
    assert np.array_equal(index.scores(terms), index.scores(terms, b=index.b))


def test_bm25_b_is_a_policy_setting() -> None:
    assert SelectionParams().bm25_b == 0.75
    assert SelectionParams(bm25_b=0.5).as_dict()["bm25_b"] == 0.5
    with pytest.raises(InvalidSetting, match="bm25_b"):
        SelectionParams(bm25_b=1.5)


@settings(max_examples=25, deadline=None)
@given(
    st.lists(st.sampled_from([*_VOCAB, "risotto", "errand", "sister", "framed"]), min_size=1, max_size=6),
    st.lists(st.sampled_from(["risotto", "lake", "errand", "sunset", "framed", "paint"]), min_size=1, max_size=5),
)
def test_relevance_is_reused_only_for_the_same_query_on_the_same_snapshot(words: list[str], added: list[str]) -> None:
    ledger, g = _conversation()
    loader = SnapshotLoader(ledger.store)
    policy = default_policy()
    request = types.SimpleNamespace(query=None)  # the latest user turn is the query
    snap = loader.load("default", g.conversation_id, g.branch_id)
    first = relevance_scores(request, snap, policy)  # type: ignore[arg-type]
    assert relevance_scores(request, snap, policy) is first  # unchanged snapshot, same query: kept
    assert not first.flags.writeable
    asked = types.SimpleNamespace(query=" ".join(words))
    fresh = unit_relevance(asked.query, snap.index, snap.vectors, snap.facets, len(snap.units), policy.selection)
    assert np.array_equal(relevance_scores(asked, snap, policy), fresh)  # type: ignore[arg-type]
    g.user("next", " ".join(added) + "?", speaker="Bob")  # a new turn: a new snapshot seq and a new latest query
    snap = loader.load("default", g.conversation_id, g.branch_id)
    latest = " ".join(added) + "?"
    expected = unit_relevance(latest, snap.index, snap.vectors, snap.facets, len(snap.units), policy.selection)
    assert np.array_equal(relevance_scores(request, snap, policy), expected)  # type: ignore[arg-type]
    relevance_scores(asked, snap, policy)  # type: ignore[arg-type]
    g.assistant("reply", "Noted: " + " ".join(words), speaker="Ann")  # the same query on a grown snapshot
    snap = loader.load("default", g.conversation_id, g.branch_id)
    fresh = unit_relevance(asked.query, snap.index, snap.vectors, snap.facets, len(snap.units), policy.selection)
    assert np.array_equal(relevance_scores(asked, snap, policy), fresh)  # type: ignore[arg-type]
