"""Lexical relevance of history units to the current goal: BM25 over stemmed terms, append-only.

Why not rebuild a ``bm25s`` index per model call: a bm25s index is static, and building it over 10,000
turns took about 0.8 s on this 2-core machine, far above a per-call budget. History is append-only, so
the index can be too (:mod:`ctxledger.assemble.lexical_index`: adding a unit keeps its term counts, a term's
postings are built when a query first needs it). Text is tokenized with ``bm25s.tokenize`` (lower-casing,
English stop words, the same splitter) and each term is reduced to its Snowball English stem (PyStemmer, the stemmer
bm25s documents), so "adopting" in a question finds "adoption" in a turn; scores follow the Lucene BM25
variant that ``bm25s.BM25`` uses by default (``k1 = 1.5``, ``b = 0.75``; Kamphuis et al., ECIR 2020), so
that a test can check our scores against ``bm25s.BM25.get_scores`` on the same corpus.

Why neighbours count (:func:`spread`): a conversation's topics run over several adjacent turns, and the
turn that holds the answer often does not repeat the question's words: "Where did you go?" is answered
by the next turn, a failing command's error sits beside the call that names the file. A unit's
relevance is therefore its own score plus its neighbours' scores, discounted by distance. On the LoCoMo
development conversations this raised BM25's evidence recall at a 2,000-token budget from 0.71
(stemmed, alone) to 0.82 (``decay = 0.5``, ``window = 3``; measured in ctxledger's evaluation harness).

Why semantic relevance too (:func:`with_semantic`): a question and the turn that answers it often share no
stem at all ("What does Melanie do to destress?" — "I go running and paint"). With the ``semantic`` extra each
unit also has a static-embedding vector (:mod:`ctxledger.assemble.semantic`), and its lexical score is mixed
with its cosine to the query before the neighbour spread.

Why speakers, dates and sessions: a question often names who ("What did Melanie paint?") or when ("in June
2023"), and a conversation that resumes on another day talks about that day's events. The units written on a date
the query names (:func:`~ctxledger.assemble.dates.with_dates`) count more before the spread; after it, the units
said by the speaker the query names count more (:func:`~ctxledger.assemble.speakers.with_speaker`: a neighbour
inherits a hit's topic, not who said it) and each unit is lifted by the best score of its day
(:func:`~ctxledger.assemble.dates.with_session`). Measured on LoCoMo in the README.
"""

from __future__ import annotations

import re
import threading
from collections import Counter
from collections.abc import Sequence
from typing import Protocol

import bm25s
import numpy as np
import Stemmer  # type: ignore[import-not-found]  # PyStemmer ships no type stubs
from bm25s.stopwords import STOPWORDS_EN

import ctxledger.text_windows as text_windows
from ctxledger._blas import one_thread
from ctxledger.assemble.facets import UnitFacets
from ctxledger.assemble.semantic import LEXICAL, VectorIndex, default_embedder

STEMMER_LANGUAGE = "english"
"""The Snowball stemmer applied to every indexed and query term."""

_LOCAL = threading.local()


def stemmer() -> Stemmer.Stemmer:
    """This thread's Snowball English stemmer (PyStemmer objects must not be shared between threads)."""
    found = getattr(_LOCAL, "stemmer", None)
    if found is None:
        found = _LOCAL.stemmer = Stemmer.Stemmer(STEMMER_LANGUAGE)
    return found


def tokenize(texts: Sequence[str]) -> list[list[str]]:
    """Tokenize texts as ``bm25s`` does (lower-case, two-or-more-character words, English stop words out), stemmed."""
    if not texts:
        return []
    result = bm25s.tokenize(list(texts), stopwords="en", stemmer=stemmer(), show_progress=False, return_ids=False)
    return [list(doc) for doc in result]


_WORDS = re.compile(r"(?u)\b\w\w+\b")
"""The words ``bm25s.tokenize`` splits a lower-cased text into (its default ``token_pattern``)."""

_STOPWORDS = frozenset(STOPWORDS_EN)
"""The English stop words ``bm25s.tokenize`` drops (``stopwords="en"``)."""

_ASCII_GAPS = str.maketrans(dict.fromkeys((chr(c) for c in range(128) if not (chr(c).isalnum() or c == 0x5F)), " "))
r"""Every ASCII character ``\w`` does not match, as a space: an ASCII text so translated splits into the runs of word
characters :data:`_WORDS` finds (with the one-character runs, which are no terms)."""

STEM_CACHE = 200_000
"""Distinct words whose terms :func:`term_counts` keeps; the table is emptied when it is full."""


_DIGITS = frozenset("0123456789")


class _TermTable(dict[str, str | None]):
    """Lower-cased word → its stemmed term, or ``None`` for a stop word or a one-character word; filled on demand.

    A word ending in a digit is its own stem: every Snowball English rule removes or rewrites a suffix ending in a
    letter, and the rest (a leading apostrophe, ``Y`` marks) concerns characters no lower-cased word holds.
    """

    def __missing__(self, word: str) -> str | None:
        if len(word) < 2 or word in _STOPWORDS:
            term = None
        elif word[-1] in _DIGITS:  # an id, a number, a version: nothing to stem (and mostly seen once)
            term = word
        else:
            term = stemmer().stemWord(word)
        self[word] = term
        return term


_STEMS = _TermTable()


def term_counts(texts: Sequence[str]) -> list[dict[str, int]]:
    """Per text, its :func:`tokenize` terms → frequency, in the order each term first appears.

    The same terms and counts as counting :func:`tokenize`'s lists, without building them: a lower-cased ASCII
    text is cut into its word runs by ``str.translate`` and ``str.split`` (C speed), any other text by the word
    regex; the words are counted by ``collections.Counter``, then each distinct word's count goes to its term
    (words come in order of first appearance, so terms do too), each word stemmed once (kept across calls, up to
    :data:`STEM_CACHE` words). Used on the write path for every stored text and per call for the query.

    A text longer than :data:`ctxledger.text_windows.WINDOW` characters is counted window by window, each window
    ending just after a line break, else a space or tab, else a punctuation mark that no word holds and lower-casing
    ignores (:func:`ctxledger.text_windows.after_whitespace`), and the
    windows' counts are added in order: no word spans such a cut and lower-casing reads no context across it, so
    the terms, counts and order are those of the whole text, while the words held at once are one window's.
    """
    out: list[dict[str, int]] = []
    for text in texts:
        counts: dict[str, int] = {}
        for window in text_windows.windows(text, text_windows.after_whitespace):
            _add_terms(window, counts)
        out.append(counts)
    return out


def _add_terms(text: str, counts: dict[str, int]) -> None:
    """Add the terms of ``text`` to ``counts`` (:func:`term_counts`; new terms in order of first appearance)."""
    if len(_STEMS) > STEM_CACHE:
        _STEMS.clear()
    lowered = text.lower()
    words = Counter(lowered.translate(_ASCII_GAPS).split() if lowered.isascii() else _WORDS.findall(lowered))
    terms = list(map(_STEMS.__getitem__, words))
    if not counts:
        # words with distinct terms (stop words apart), the usual case: their counts go in as they are, at C speed
        direct = dict(zip(terms, words.values(), strict=True))
        if len(direct) == len(terms) - max(terms.count(None) - 1, 0):
            direct.pop(None, None)
            counts.update(direct)
            return
    get = counts.get
    for term, count in zip(terms, words.values(), strict=True):
        if term is not None:
            counts[term] = get(term, 0) + count


def spread(scores: np.ndarray, decay: float, window: int) -> np.ndarray:
    """Add each position's neighbours' scores, discounted by distance (see the module docstring).

    ``out[i] = scores[i] + Σ_{d=1..window} decay**d · (scores[i-d] + scores[i+d])`` (positions outside
    the array count 0). ``window = 0`` or ``decay = 0`` returns the scores unchanged.
    """
    out = np.array(scores, dtype=np.float64, copy=True)
    if decay <= 0 or window <= 0:
        return out
    for d in range(1, min(window, len(scores) - 1) + 1):
        weight = decay**d
        out[d:] += weight * scores[:-d]
        out[:-d] += weight * scores[d:]
    return out


def with_semantic(lexical: np.ndarray, query: str, vectors: VectorIndex | None, weight: float) -> np.ndarray:
    """Lexical scores mixed with semantic similarity: ``(1 − w)·lexical/max + w·semantic``.

    ``semantic`` is each unit's cosine to the query after both are centred on the mean of the units' vectors
    (:meth:`~ctxledger.assemble.semantic.VectorIndex.scores`), rescaled so the mean over the units is 0 and the
    best unit 1, negative values cut to 0: static-embedding vectors of one conversation share a large common
    part, so the raw cosine says little and how far a unit stands above the rest says more. Returns
    ``lexical`` unchanged when ``weight`` is 0, there are no vectors, or the query has no vector.

    Tuned on LoCoMo conversations 0–4 at 2,000 tokens (recall of the default policy, lexical 0.821): raw
    cosine at ``w`` = 0.3 / 0.5 / 0.7 gave 0.842 / 0.835 / 0.802, centred cosine at 0.3 / 0.5 / 0.6 / 0.7
    gave 0.844 / 0.848 / 0.837 / 0.824.
    """
    if weight <= 0 or vectors is None or not query or len(lexical) == 0:
        return lexical
    embedder = default_embedder()
    if embedder is None or embedder.model_id != vectors.model_id:
        return lexical
    with one_thread():  # two small products: BLAS threads would cost more CPU than they share (ctxledger._blas)
        q = embedder.embed([query])[0]
        if not q.any():
            return lexical
        cos = vectors.scores(q, len(lexical), centred=True)
    if len(cos) < len(lexical):  # units past the vectors (should not happen): no semantic part
        cos = np.concatenate([cos, np.zeros(len(lexical) - len(cos))])
    top_lex = float(lexical.max())
    lex = lexical / top_lex if top_lex > 0 else lexical
    floor, top = float(cos.mean()), float(cos.max())
    sem = np.clip((cos - floor) / (top - floor), 0.0, None) if top > floor else np.zeros_like(cos)
    return (1.0 - weight) * lex + weight * sem


class RelevanceWeights(Protocol):
    """The relevance settings of :class:`~ctxledger.policy.base.SelectionParams` a manifest's name depends on."""

    semantic_weight: float
    speaker_boost: float
    date_boost: float
    session_boost: float


def relevance_name(vectors: VectorIndex | None, selection: RelevanceWeights, facets: UnitFacets | None = None) -> str:
    """Which relevance an assembly used, as its manifest records it.

    ``"bm25"``, or ``"bm25+<model id>"`` when semantic similarity was mixed in, then ``"+<signal>"`` for each
    further signal that acted on the snapshot's units (``speaker``, ``date``, ``session``, in that order;
    :meth:`~ctxledger.assemble.facets.UnitFacets.signals`).
    """
    name = LEXICAL
    embedder = default_embedder() if selection.semantic_weight > 0 and vectors is not None else None
    if embedder is not None and vectors is not None and embedder.model_id == vectors.model_id:
        name = f"{LEXICAL}+{vectors.model_id}"
    if facets is None:
        return name
    signals = facets.signals(selection.speaker_boost, selection.date_boost, selection.session_boost)
    return "+".join((name, *signals))


_QUESTION_START = re.compile(
    r"^\W*(who|whom|whose|what|when|where|which|why|how|did|does|do|is|are|was|were|can|could|would|should|has|have"
    r"|had|will)\b",
    re.IGNORECASE,
)


def is_question(text: str) -> bool:
    """Whether ``text`` asks a question: it ends with ``?`` or opens with an interrogative or auxiliary word."""
    stripped = text.strip()
    return stripped.endswith("?") or bool(_QUESTION_START.match(stripped))
