"""What a query is relevant to: each unit of a snapshot scored against it with the policy's relevance signals.

:func:`unit_relevance` is the relevance the assembler ranks and reaches with (BM25 of the query's topic, mixed
with semantic similarity, the speaker, date, neighbour and session signals of :mod:`.relevance`, :mod:`.speakers`
and :mod:`.dates`); :func:`query_topic` is the part of a question it matches on. Nothing here is stored with a
record: a query is known only at call time.
"""

from __future__ import annotations

from typing import Protocol

import numpy as np

from ctxledger.assemble.dates import with_dates, with_session
from ctxledger.assemble.facets import UnitFacets
from ctxledger.assemble.lexical_index import IncrementalBM25
from ctxledger.assemble.relevance import _STOPWORDS as STOPWORDS  # the index's own word rule and stop list
from ctxledger.assemble.relevance import _WORDS as WORDS
from ctxledger.assemble.relevance import RelevanceWeights, spread, term_counts, with_semantic
from ctxledger.assemble.semantic import VectorIndex
from ctxledger.assemble.speakers import named_speaker, with_speaker, without_speaker

QUESTION_WORDS = frozenset(
    [
        "what",
        "which",
        "who",
        "whom",
        "whose",
        "when",
        "where",
        "why",
        "how",
        "am",
        "is",
        "are",
        "was",
        "were",
        "be",
        "been",
        "being",
        "have",
        "has",
        "had",
        "having",
        "do",
        "does",
        "did",
        "doing",
        "can",
        "could",
        "will",
        "would",
        "shall",
        "should",
        "may",
        "might",
        "must",
    ]
)
"""Interrogatives and auxiliary verbs: the words that make a text a question, not what it asks about.

The index's stop list (the 33 words of ``bm25s``'s English list, Lucene's) keeps them, so a question's BM25 would
otherwise match every turn that says "what" or "did" (most of them other questions), and its mean-pooled vector
would lean towards questions in general."""

_FUNCTION_WORDS = QUESTION_WORDS | STOPWORDS


def query_topic(query: str) -> str:
    """``query`` without its :data:`QUESTION_WORDS` and the index's stop words (whole words, any case).

    What relevance matches when ``drop_question_words`` is on: BM25 of these words (the stop words are dropped by
    :func:`~ctxledger.assemble.relevance.tokenize` anyway) and the semantic vector of these words alone, whose
    mean is then not diluted by "what", "did" and "the". The indexed texts keep theirs. Returns ``query``
    unchanged when no other word is left (a query of question words only still matches what it can).
    """
    kept = [m.group() for m in WORDS.finditer(query) if m.group().lower() not in _FUNCTION_WORDS]
    return " ".join(kept) if kept else query


class RelevanceSettings(RelevanceWeights, Protocol):
    """Every setting of :class:`~ctxledger.policy.base.SelectionParams` :func:`unit_relevance` reads."""

    neighbour_decay: float
    neighbour_window: int
    drop_question_words: bool
    bm25_b: float


def unit_relevance(
    query: str,
    index: IncrementalBM25,
    vectors: VectorIndex | None,
    facets: UnitFacets,
    n_units: int,
    selection: RelevanceSettings | None = None,
) -> np.ndarray:
    """Relevance of the first ``n_units`` units of a snapshot to ``query``, over the maximum (in [0, 1]).

    BM25 of the query's terms (those of :func:`~ctxledger.assemble.relevance.tokenize`, in the order they first
    appear, as :func:`~ctxledger.assemble.relevance.term_counts` finds them); with ``selection`` (the policy's
    :class:`~ctxledger.policy.base.SelectionParams`): BM25 with its length normalisation ``bm25_b``, the query
    without its question words when
    ``drop_question_words`` is on (:func:`query_topic`, for both BM25 and the semantic part),
    mixed with semantic similarity (:func:`with_semantic`, the query without the one speaker it names when the
    speaker boost is on), the date boost, the neighbour spread, the speaker boost, then the session lift. The
    speaker boost comes after the spread: a neighbour inherits a hit's topic, not who said it, so the other
    speaker's turns next to the named speaker's hits are not lifted with them. Without ``selection``: BM25 alone.
    The units' facets (speakers, days, sessions) come from ``facets``, aligned with the index's documents.

    Returns:
        A float array of length ``n_units`` in [0, 1] (all zeros when nothing matches); no errors of its own.
    """
    dropped = selection is not None and selection.drop_question_words and bool(query)
    topic = query_topic(query) if dropped else query
    terms = list(term_counts([topic])[0]) if topic else []
    scores = index.scores(terms, n_units, b=selection.bm25_b if selection is not None else None)
    if selection is not None:
        speakers, days, sessions = facets.arrays()
        named = named_speaker(query, facets.names) if selection.speaker_boost > 0 and query else None
        scores = with_semantic(scores, without_speaker(topic, named), vectors, selection.semantic_weight)
        scores = with_dates(scores, query, days, selection.date_boost)
        scores = spread(scores, selection.neighbour_decay, selection.neighbour_window)
        scores = with_speaker(scores, named, speakers, facets.names, selection.speaker_boost)
        scores = with_session(scores, sessions, selection.session_boost)
    top = float(scores.max()) if len(scores) else 0.0
    return scores / top if top > 0 else scores
