"""The lexical index forgets rebuilt documents exactly: scores after a truncation equal a fresh index's."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from ctxledger.assemble.relevance import IncrementalBM25


@settings(max_examples=40, deadline=None)
@given(
    docs=st.lists(st.lists(st.sampled_from(["alpha", "beta", "gamma", "delta", "eps"]), max_size=6), max_size=150),
    cut=st.integers(0, 150),
    query=st.lists(st.sampled_from(["alpha", "beta", "gamma", "zeta"]), min_size=1, max_size=3),
)
def test_truncating_the_index_scores_as_an_index_built_from_the_kept_documents(docs, cut, query):
    # a cut among the newest documents touches only their terms; an older cut walks the vocabulary
    grown = IncrementalBM25()
    for doc in docs:
        grown.add(doc)
    grown.truncate(cut)
    for doc in docs[:3]:  # and the index keeps growing correctly after the cut
        grown.add(doc)
    kept = [*docs[:cut], *docs[:3]]
    fresh = IncrementalBM25()
    for doc in kept:
        fresh.add(doc)
    assert len(grown) == len(fresh)
    assert grown.scores(query).tolist() == fresh.scores(query).tolist()
