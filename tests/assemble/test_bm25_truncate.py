"""The lexical index forgets rebuilt documents exactly: scores after a truncation equal a fresh index's."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from ctxledger.assemble.lexical_index import IncrementalBM25


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


_TERMS = st.sampled_from(["alpha", "beta", "gamma", "delta", "eps"])
_DOC_PARTS = st.lists(st.lists(_TERMS, max_size=5), min_size=1, max_size=3)
_ASKED = st.sampled_from(["alpha", "beta", "zeta", "eta", "theta"])
_NEW_PARTS = st.lists(st.lists(st.sampled_from(["alpha", "zeta", "eta", "eps"]), max_size=5), min_size=1, max_size=3)


@settings(max_examples=60, deadline=None)
@given(
    docs=st.lists(_DOC_PARTS, max_size=60),
    steps=st.lists(st.tuples(st.integers(0, 60), st.integers(0, 60)), min_size=1, max_size=6),
    query=st.lists(st.sampled_from(["alpha", "beta", "gamma", "zeta"]), min_size=1, max_size=3),
)
def test_postings_built_between_appends_and_cuts_score_as_a_fresh_index(docs, steps, query):
    """Queries cache a term's postings; appends, cuts and documents made of several parts keep them exact."""
    from collections import Counter

    grown = IncrementalBM25()
    kept: list[list[list[str]]] = []
    for add, cut in steps:
        for parts in docs[:add]:
            grown.add_parts([Counter(p) for p in parts], sum(len(p) for p in parts))
            kept.append(parts)
        grown.scores(query)  # builds (or extends) the cached postings of the query's terms
        grown.truncate(cut)
        del kept[cut:]
        grown.scores(query, min(len(kept), cut))
    fresh = IncrementalBM25()
    for parts in kept:
        fresh.add([t for p in parts for t in p])
    assert len(grown) == len(fresh)
    assert grown.scores(query).tolist() == fresh.scores(query).tolist()
    for n in range(len(kept) + 1):
        assert grown.scores(query, n).tolist() == fresh.scores(query, n).tolist()


@settings(max_examples=60, deadline=None)
@given(
    docs=st.lists(_DOC_PARTS, max_size=60),
    steps=st.lists(
        st.tuples(st.integers(0, 20), st.lists(st.sampled_from(["alpha", "beta", "gamma", "zeta"]), max_size=3)),
        min_size=1,
        max_size=8,
    ),
    query=st.lists(st.sampled_from(["alpha", "beta", "gamma", "delta", "zeta"]), min_size=1, max_size=5),
)
def test_terms_first_asked_at_different_times_score_as_a_fresh_index(docs, steps, query):
    """Each step appends documents then asks some terms, so a later query mixes postings built at other points."""
    from collections import Counter

    grown = IncrementalBM25()
    kept: list[list[list[str]]] = []
    for add, asked in steps:
        for parts in docs[len(kept) : len(kept) + add]:
            grown.add_parts([Counter(p) for p in parts], sum(len(p) for p in parts))
            kept.append(parts)
        grown.scores(asked)
    fresh = IncrementalBM25()
    for parts in kept:
        fresh.add([t for p in parts for t in p])
    assert grown.scores(query).tolist() == fresh.scores(query).tolist()


@settings(max_examples=60, deadline=None)
@given(
    steps=st.lists(
        st.tuples(st.lists(_NEW_PARTS, max_size=8), st.integers(0, 60), st.lists(_ASKED, min_size=1, max_size=3)),
        min_size=1,
        max_size=8,
    ),
    query=st.lists(_ASKED, min_size=1, max_size=4),
)
def test_terms_asked_before_any_document_holds_them_score_as_a_fresh_index(steps, query):
    """A term no document holds yet has no postings to look for; documents that bring it later are found."""
    from collections import Counter

    grown = IncrementalBM25()
    kept: list[list[list[str]]] = []
    for added, cut, asked in steps:
        grown.scores(asked)  # new words first: their postings are empty until a document holds them
        for parts in added:
            grown.add_parts([Counter(p) for p in parts], sum(len(p) for p in parts))
            kept.append(parts)
        grown.scores(asked)
        grown.truncate(cut)
        del kept[cut:]
    fresh = IncrementalBM25()
    for parts in kept:
        fresh.add([t for p in parts for t in p])
    assert grown.scores(query).tolist() == fresh.scores(query).tolist()


def test_a_word_no_document_holds_has_no_postings_and_is_found_once_a_document_brings_it():
    index = IncrementalBM25()
    for doc in (["alpha", "beta"], ["beta", "gamma"], ["gamma"]):
        index.add(doc)
    assert index.scores(["zeta"]).tolist() == [0.0, 0.0, 0.0]
    index.add(["zeta", "alpha"])
    fresh = IncrementalBM25()
    for doc in (["alpha", "beta"], ["beta", "gamma"], ["gamma"], ["zeta", "alpha"]):
        fresh.add(doc)
    assert index.scores(["zeta", "alpha"]).tolist() == fresh.scores(["zeta", "alpha"]).tolist()
    assert index.scores(["zeta"])[3] > 0


@settings(max_examples=40, deadline=None)
@given(
    docs=st.lists(_DOC_PARTS, min_size=1, max_size=80),
    asked=st.lists(st.sampled_from(["alpha", "beta", "gamma", "zeta"]), min_size=1, max_size=3),
    cut=st.integers(0, 80),
    batch=st.integers(1, 12),
    buckets=st.sampled_from([1, 2, 4, 1024]),
    chunk=st.sampled_from([1, 2, 3, 7, 1 << 20]),
    sort_after=st.sampled_from([0, 1, 3]),
    mark_every=st.sampled_from([1, 2, 5, 64]),
)
def test_entries_converted_in_any_batch_size_score_as_one_batch(
    docs, asked, cut, batch, buckets, chunk, sort_after, mark_every
):
    """Where conversion batches and chunks end, how many buckets the absent-term filter has, and when and how
    sparsely a chunk's sorted view is made never change a score."""
    from collections import Counter
    from unittest import mock

    def build(
        pending_entries: int, filter_buckets: int, chunk_entries: int, sorted_after: float = 10**9, every: int = 64
    ) -> list[list[float]]:
        index = IncrementalBM25()
        with (
            mock.patch("ctxledger.assemble.lexical_index.PENDING_ENTRIES", pending_entries),
            mock.patch("ctxledger.assemble.lexical_index.MIN_FILTER_BUCKETS", filter_buckets),
            mock.patch("ctxledger.assemble.lexical_index.CHUNK_ENTRIES", chunk_entries),
            mock.patch("ctxledger.assemble.lexical_index.SORT_AFTER", sorted_after),
            mock.patch("ctxledger.assemble.lexical_index.SORTED_MARK_EVERY", every),
        ):
            for parts in docs:
                index.add_parts([Counter(p) for p in parts], sum(len(p) for p in parts))
            index.scores(asked)
            index.truncate(cut)
            index.scores(["zeta", "eta"])
            for parts in docs[:5]:
                index.add_parts([Counter(p) for p in parts], sum(len(p) for p in parts))
            index.scores(["alpha", "zeta"])
            index.add_parts([Counter(["zeta", "alpha", "zeta"])], 3)
            for parts in docs[-3:]:
                index.add_parts([Counter(p) for p in parts], sum(len(p) for p in parts))
            return [index.scores(q).tolist() for q in (asked, ["alpha", "delta"], ["eps"], ["zeta", "eta"])]

    assert build(batch, buckets, chunk, sort_after, mark_every) == build(10**9, 2**20, 1 << 20)


@settings(max_examples=60, deadline=None)
@given(
    docs=st.lists(st.lists(_TERMS, min_size=1, max_size=6), min_size=1, max_size=20),
    rebuilt=st.lists(st.lists(_TERMS, min_size=1, max_size=12), min_size=1, max_size=3),
    query=st.lists(st.sampled_from(["alpha", "beta", "gamma"]), min_size=1, max_size=3),
)
def test_documents_rebuilt_to_the_same_count_are_scored_with_their_new_lengths(docs, rebuilt, query):
    """A late tool result rebuilds the newest units: as many documents as before, of other lengths."""
    cut = max(len(docs) - len(rebuilt), 0)
    grown = IncrementalBM25()
    for doc in docs:
        grown.add(doc)
    grown.scores(query)  # the lengths' array form is built here
    grown.truncate(cut)
    for doc in rebuilt[: len(docs) - cut]:
        grown.add(doc)
    fresh = IncrementalBM25()
    for doc in [*docs[:cut], *rebuilt[: len(docs) - cut]]:
        fresh.add(doc)
    assert grown.scores(query).tolist() == fresh.scores(query).tolist()


@settings(max_examples=30, deadline=None)
@given(
    later=st.lists(st.lists(_TERMS, min_size=1, max_size=4), min_size=1, max_size=60),
    batch=st.integers(1, 8),
)
def test_a_term_only_the_oldest_entries_hold_is_found_after_the_filter_grew(later, batch):
    """The absent-term filter doubles as entries outgrow it; it must keep the oldest entries' terms."""
    from unittest import mock

    with (
        mock.patch("ctxledger.assemble.lexical_index.PENDING_ENTRIES", batch),
        mock.patch("ctxledger.assemble.lexical_index.MIN_FILTER_BUCKETS", 1),
    ):
        index = IncrementalBM25()
        index.add(["rare", "alpha"])
        for doc in later:
            index.add(doc)
        assert index.scores(["rare"])[0] > 0


@settings(max_examples=60, deadline=None)
@given(
    docs=st.lists(st.lists(_TERMS, min_size=1, max_size=6), min_size=2, max_size=30),
    later=st.lists(st.lists(_TERMS, min_size=1, max_size=6), min_size=1, max_size=30),
    share=st.floats(0.0, 1.0),
    mark_every=st.sampled_from([1, 3, 64]),
)
def test_a_sorted_chunk_cut_back_and_grown_again_finds_only_its_present_entries(docs, later, share, mark_every):
    """A chunk's sorted view made before a cut holds entries the cut removed: terms first asked after the cut,
    and after new documents took those places, score as in an index that never held them."""
    from unittest import mock

    cut = max(1, min(len(docs) - 1, round(share * len(docs))))  # inside the one chunk: it is kept, cut back
    with (
        mock.patch("ctxledger.assemble.lexical_index.SORT_AFTER", 0),
        mock.patch("ctxledger.assemble.lexical_index.SORTED_MARK_EVERY", mark_every),
    ):
        index = IncrementalBM25()
        for doc in docs:
            index.add(doc)
        index.scores(["eps"])  # the first comparison sorts the chunk
        index.truncate(cut)
        for doc in later:
            index.add(doc)
        fresh = IncrementalBM25()
        for doc in [*docs[:cut], *later]:
            fresh.add(doc)
        for term in ("alpha", "beta", "gamma", "delta"):
            assert index.scores([term]).tolist() == fresh.scores([term]).tolist()


@settings(max_examples=40, deadline=None)
@given(
    docs=st.lists(st.lists(_TERMS, min_size=1, max_size=6), min_size=1, max_size=40),
    later=st.lists(st.lists(_TERMS, min_size=1, max_size=6), max_size=10),
    low=st.integers(0, 2**32 - 1),
)
def test_keys_sharing_their_bucket_are_told_apart_in_a_sorted_chunk(docs, later, low):
    """The sorted view orders entries by their keys' top 16 bits only: terms whose keys share them (and their low
    32 bits) still get their own postings, found by binary search as by a comparison over every entry."""
    from unittest import mock

    names = ["alpha", "beta", "gamma", "delta", "eps"]

    def colliding(term: str) -> int:
        return ((names.index(term) + 1) << 40) - 2**62 + low  # the same top 16 and low 32 bits for every term

    def digest(term: str) -> bytes:  # what term_key and keyed_terms both read a term's key from
        return colliding(term).to_bytes(8, "little", signed=True)

    with (
        mock.patch("ctxledger.assemble.term_keys._KEYS", {}),  # keys remembered from other tests are not used
        mock.patch("ctxledger.assemble.term_keys._digest", digest),
        mock.patch("ctxledger.assemble.lexical_index.SORT_AFTER", 0),
        mock.patch("ctxledger.assemble.lexical_index.SORTED_MARK_EVERY", 2),
    ):
        index = IncrementalBM25()
        for doc in docs:
            index.add(doc)
        index.scores(["eps"])  # sorts the chunk
        for doc in later:
            index.add(doc)
        got = [index.scores([term]).tolist() for term in names[:4]]
    fresh = IncrementalBM25()
    for doc in [*docs, *later]:
        fresh.add(doc)
    assert got == [fresh.scores([term]).tolist() for term in names[:4]]


@settings(max_examples=40, deadline=None)
@given(
    steps=st.lists(
        st.one_of(
            st.tuples(st.just("add"), st.lists(_TERMS, min_size=1, max_size=5)),
            st.tuples(st.just("cut"), st.integers(0, 40)),
            st.tuples(st.just("ask"), st.lists(_TERMS, min_size=1, max_size=3)),
        ),
        max_size=60,
    )
)
def test_postings_grown_call_by_call_and_cut_back_score_as_built_at_once(steps):
    """A term's postings are extended by each call's new documents and cut back with the index: after any mix of
    appends, cuts and queries every query scores as on an index built from the documents left."""
    index, kept = IncrementalBM25(), []
    for kind, value in steps:
        if kind == "add":
            index.add(value)
            kept.append(value)
        elif kind == "cut":
            index.truncate(value)
            del kept[value:]
        else:
            fresh = IncrementalBM25()
            for doc in kept:
                fresh.add(doc)
            assert index.scores(value).tolist() == fresh.scores(value).tolist()


def test_a_chunk_is_sorted_when_it_fills_and_the_last_one_when_due_one_per_query():
    """A full chunk gets its sorted view as it fills, before any query, so a term no earlier call asked is found
    by binary search in all of them; the last chunk, still filling, is sorted once due, by a query."""
    from unittest import mock

    with (
        mock.patch("ctxledger.assemble.lexical_index.SORT_AFTER", 0),
        mock.patch("ctxledger.assemble.lexical_index.CHUNK_ENTRIES", 4),
        mock.patch("ctxledger.assemble.lexical_index.PENDING_ENTRIES", 1),
    ):
        index = IncrementalBM25()
        for k in range(40):
            index.add(["alpha", "beta", f"w{k}", "gamma"])
        index.add(["alpha", "w3"])
        chunks = index._entries._chunks
        assert len(chunks) == 41
        assert [c.sorted_n for c in chunks] == [4] * 40 + [0]
        found = index.scores(["w3", "delta"])
        assert [c.sorted_n for c in chunks] == [4] * 40 + [2]
    fresh = IncrementalBM25()
    for k in range(40):
        fresh.add(["alpha", "beta", f"w{k}", "gamma"])
    fresh.add(["alpha", "w3"])
    assert found.tolist() == fresh.scores(["w3", "delta"]).tolist()
