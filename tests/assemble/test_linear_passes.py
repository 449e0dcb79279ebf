"""The per-call passes over every unit give exactly what their plain forms give (same bits, same sets)."""

from __future__ import annotations

import math

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from ctxledger.assemble.centred_vectors import NOISE, CentredVectorIndex
from ctxledger.assemble.dates import session_best
from ctxledger.assemble.lexical_index import IncrementalBM25
from ctxledger.assemble.reach import _BLOCK, MAX_MATCHES, _bound, _matches


def _plain_session_best(sessions: np.ndarray, values: np.ndarray) -> np.ndarray:
    best = np.zeros(int(sessions.max()) + 1, dtype=np.float64)
    np.maximum.at(best, sessions, values)
    return best


def _scores(seed: int, n: int, levels: int, negative: bool) -> np.ndarray:
    """Scores with many ties (``levels`` distinct values), some zero or below."""
    rng = np.random.default_rng(seed)
    low = -levels if negative else 0
    return rng.integers(low, levels + 1, n).astype(np.float64) / levels


@settings(max_examples=200, deadline=None)
@given(
    st.integers(0, 2**32 - 1),
    st.integers(1, 400),
    st.integers(1, 12),
    st.booleans(),
    st.booleans(),
)
def test_session_best_equals_the_maximum_at_form(seed: int, n: int, days: int, ordered: bool, negative: bool) -> None:
    rng = np.random.default_rng(seed)
    sessions = rng.integers(0, days, n).astype(np.int64)
    if ordered:
        sessions.sort()
    values = _scores(seed + 1, n, 5, negative)
    got = session_best(sessions, values)
    assert got.tobytes() == _plain_session_best(sessions, values).tobytes()


def _plain_matches(scores: np.ndarray, sums: list[int], start: int, input_tokens: int) -> set[int]:
    older = scores[:start]
    positive = np.flatnonzero(older > 0)
    if not len(positive):
        return set()
    if len(positive) > MAX_MATCHES:
        values = older[positive]
        kth = np.partition(values, len(values) - MAX_MATCHES)[len(values) - MAX_MATCHES]
        positive = positive[values >= kth]
    best = positive[np.argsort(-older[positive], kind="stable")[:MAX_MATCHES]]
    out: set[int] = set()
    spent = 0
    for pos in best.tolist():
        for p in (pos - 1, pos, pos + 1):
            if 0 <= p < start and p not in out:
                spent += sums[p + 1] - sums[p]
                out.add(p)
        if spent > 2 * input_tokens:
            break
    return out


@settings(max_examples=60, deadline=None)
@given(
    st.integers(0, 2**32 - 1),
    st.sampled_from([100, MAX_MATCHES * _BLOCK - 1, MAX_MATCHES * _BLOCK + 7, 3 * MAX_MATCHES * _BLOCK]),
    st.sampled_from([1, 3, 50, 10_000]),
    st.booleans(),
    st.sampled_from([50, 5_000, 10**9]),
)
def test_matches_equal_those_of_ranking_every_positive_score(
    seed: int, n: int, levels: int, negative: bool, input_tokens: int
) -> None:
    scores = _scores(seed, n, levels, negative)
    sums = np.concatenate(([0], np.cumsum(np.random.default_rng(seed).integers(1, 40, n)))).tolist()
    start = n - 3
    assert _matches(scores, sums, start, input_tokens) == _plain_matches(scores, sums, start, input_tokens)


@settings(max_examples=60, deadline=None)
@given(st.integers(0, 2**32 - 1), st.sampled_from([1, 4, 10_000]), st.booleans())
def test_the_bound_is_at_most_the_matches_cut(seed: int, levels: int, negative: bool) -> None:
    scores = _scores(seed, 2 * MAX_MATCHES * _BLOCK + 5, levels, negative)
    bound = _bound(scores)
    assert bound <= np.sort(scores)[-MAX_MATCHES]
    assert np.count_nonzero(scores >= bound) >= MAX_MATCHES


def test_a_score_not_a_number_leaves_no_bound() -> None:
    scores = np.ones(MAX_MATCHES * _BLOCK)
    scores[5] = math.nan
    assert _bound(scores) == -math.inf


@settings(max_examples=50, deadline=None)
@given(
    st.lists(st.lists(st.sampled_from(["alpha", "beta", "gamma", "delta"]), max_size=30), min_size=1, max_size=40),
    st.lists(st.sampled_from(["alpha", "beta", "gamma", "zeta"]), min_size=1, max_size=4),
    st.floats(0.0, 1.0),
)
def test_bm25_scores_are_the_textbook_formula_bit_for_bit(docs: list[list[str]], query: list[str], b: float) -> None:
    index = IncrementalBM25()
    for doc in docs:
        index.add(doc)
    n = len(docs)
    lengths = np.array([len(d) for d in docs], dtype=np.int64)
    total = int(lengths.sum())
    avgdl = total / n if total else 1.0
    want = np.zeros(n, dtype=np.float64)
    for term in set(query):
        docs_with = np.array([i for i, d in enumerate(docs) if term in d], dtype=np.int64)
        if not len(docs_with):
            continue
        tfs = np.array([docs[i].count(term) for i in docs_with], dtype=np.int64)
        df = len(docs_with)
        idf = math.log(1 + (n - df + 0.5) / (df + 0.5))
        norm = tfs + index.k1 * (1 - b + b * lengths[docs_with] / avgdl)
        want[docs_with] += idf * tfs / norm
    assert index.scores(query, b=b).tobytes() == want.tobytes()


def _plain_centred(index: CentredVectorIndex, query: np.ndarray) -> np.ndarray:
    count = len(index)
    mean = index._sum / count
    vectors = np.ascontiguousarray(np.stack([query, mean]).astype(np.float32).T)
    products = index._coded.products(vectors)
    with_query, with_mean = products[:, 0], products[:, 1]
    query_mean, mean_mean = float(query @ mean), float(mean @ mean)
    dots = with_query - with_mean - query_mean + mean_mean
    query_norm = max(float(np.sqrt(max(float(query @ query) - 2 * query_mean + mean_mean, 0.0))), 1e-12)
    squares = index._squares[:count]
    centred_squares = squares - 2 * with_mean + mean_mean
    centred_squares[centred_squares <= NOISE * (squares + mean_mean)] = 0.0
    norms = np.sqrt(centred_squares) * query_norm
    return np.divide(dots, norms, out=np.zeros(count, dtype=np.float64), where=norms > 0)


@settings(max_examples=40, deadline=None)
@given(st.integers(0, 2**32 - 1), st.integers(1, 300), st.booleans())
def test_centred_scores_are_the_plain_expressions_bit_for_bit(seed: int, n: int, alike: bool) -> None:
    rng = np.random.default_rng(seed)
    codes = rng.integers(-127, 128, (n, 16)).astype(np.int8)
    if alike:  # every vector its mean: no direction, score 0
        codes[:] = codes[0]
    rows = codes.astype(np.float32)
    rows /= np.maximum(np.linalg.norm(rows, axis=1, keepdims=True), 1e-12)
    index = CentredVectorIndex(16, "m")
    index.add_many(rows, codes)
    query = rng.standard_normal(16).astype(np.float32)
    assert index.scores(query, centred=True).tobytes() == _plain_centred(index, query).tobytes()
