"""The snapshot's lexical index: append-only BM25 whose postings are built only for the terms queries ask for.

A snapshot in a new process indexes every unit of the history, and a query names a dozen terms. Building the
postings of every term up front costs one Python operation per (unit, distinct term) pair, millions at 100,000
events, and keeping each document's term mapping costs most of a long snapshot's memory. So the index keeps each
document's (term, frequency) entries in three flat arrays (the term's key, its frequency and the owning
document: 16 bytes an entry), and :meth:`IncrementalBM25.scores` builds a query term's ``(docs, tfs)`` postings
with one vectorised comparison over the entries, cached per term; later calls only look at the entries appended
since.

A term's key is :func:`~ctxledger.assemble.term_keys.term_key`, a stable 64-bit digest, so the write path stores
each record's terms already in the index's form (:func:`~ctxledger.assemble.term_keys.keyed_terms`: the keys and
the counts as little-endian byte strings, :class:`~ctxledger.facts.RecordFacts`) and indexing a stored record is a
byte copy. Two distinct terms with the same key would share postings; for a million distinct terms the odds are
about one in thirty million. A filter of one flag per key bucket (at least as many buckets as entries, so about
one bucket in eight is taken) says which terms no entry can hold: such a term has empty postings without a
comparison.

Scores follow the Lucene BM25 variant that ``bm25s.BM25`` uses by default (``k1 = 1.5``, ``b = 0.75``;
Kamphuis et al., ECIR 2020). A document's score is computed with the same floating-point operations in the same
order as the scalar formula (query terms in the same order), so the scores are bit-for-bit those of a
per-posting loop whatever order the postings were built in.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Mapping, Sequence

import numpy as np

from ctxledger.assemble.term_keys import keyed_terms, term_key

_EMPTY = np.zeros(0, dtype=np.int64)

CACHED_TERMS = 8192
"""Query terms whose postings arrays are kept between calls (the oldest built is dropped beyond this)."""

PENDING_ENTRIES = 65_536
"""Entries added documents may hold as byte strings before they are joined into the flat arrays."""

MIN_FILTER_BUCKETS = 1024
"""Buckets of the absent-term filter of an empty index (a power of two; doubled as entries outgrow it)."""


class _Column:
    """A growable one-dimensional numpy array (amortised appends, cuts in place)."""

    __slots__ = ("_buf", "size")

    def __init__(self, dtype: type) -> None:
        self._buf = np.zeros(0, dtype=dtype)
        self.size = 0

    def view(self) -> np.ndarray:
        """The filled part (a view: valid until the next append)."""
        return self._buf[: self.size]

    def extend(self, values: np.ndarray) -> None:
        end = self.size + len(values)
        if end > len(self._buf):  # doubling: each entry is copied about twice however many appends there are
            grown = np.empty(max(end, 2 * len(self._buf)), dtype=self._buf.dtype)
            grown[: self.size] = self._buf[: self.size]
            self._buf = grown
        self._buf[self.size : end] = values
        self.size = end

    def truncate(self, size: int) -> None:
        self.size = min(self.size, size)


class IncrementalBM25:
    """An append-only BM25 index over documents identified by their insertion position.

    A document is one or more *parts*, each a term → frequency mapping or the same as
    :func:`~ctxledger.assemble.term_keys.keyed_terms` bytes (a unit's records' stored terms); its term frequency
    is the sum over its parts.

    Args:
        k1: term-frequency saturation (bm25s default 1.5).
        b: length normalisation (bm25s default 0.75).
    """

    def __init__(self, k1: float = 1.5, b: float = 0.75) -> None:
        self.k1 = k1
        self.b = b
        self._keys = _Column(np.int64)  # hash of each entry's term
        self._tfs = _Column(np.int32)  # its frequency
        self._owners = _Column(np.int32)  # its document, non-decreasing
        # bucket ``hash & (len - 1)`` is set when an entry (even one cut since) held a term of that bucket
        self._filter = np.zeros(MIN_FILTER_BUCKETS, dtype=bool)
        self._pending: list[tuple[int, bytes, bytes]] = []  # (document, keys, frequencies) not joined yet
        self._pending_entries = 0
        self._lengths: list[int] = []
        self._length_array = np.zeros(0, dtype=np.int64)
        self._total_length = 0
        # term -> (docs, tfs, entries scanned): postings of the first ``entries scanned`` entries
        self._arrays: dict[str, tuple[np.ndarray, np.ndarray, int]] = {}

    def __len__(self) -> int:
        """Number of documents indexed."""
        return len(self._lengths)

    def add(self, tokens: Sequence[str]) -> int:
        """Index one document's tokens and return its position."""
        return self.add_parts((Counter(tokens),), len(tokens))

    def add_counts(self, counts: Mapping[str, int], length: int) -> int:
        """Index one document given as term → frequency and its length in terms (stored lexical terms).

        The same as :meth:`add` on any token list with those counts: postings depend only on the counts.
        """
        return self.add_parts((counts,), length)

    def add_parts(self, parts: Sequence[Mapping[str, int]], length: int) -> int:
        """Index one document made of ``parts`` (its terms are their summed counts) of ``length`` terms in all."""
        return self.add_keyed([keyed_terms(part) for part in parts], length)

    def add_keyed(self, parts: Sequence[tuple[bytes, bytes]], length: int) -> int:
        """:meth:`add_parts` with each part given as :func:`keyed_terms` bytes (stored write-path terms)."""
        doc = len(self._lengths)
        for keys, tfs in parts:
            if keys:
                self._pending.append((doc, keys, tfs))
                self._pending_entries += len(keys) // 8
        self._lengths.append(length)
        self._total_length += length
        if self._pending_entries >= PENDING_ENTRIES:
            self._convert()
        return doc

    def _convert(self) -> None:
        """Join the pending parts' bytes into the flat arrays (C-level copies)."""
        if not self._pending:
            return
        pending = self._pending
        self._pending, self._pending_entries = [], 0
        keys = np.frombuffer(b"".join(k for _, k, _ in pending), dtype="<i8")
        self._keys.extend(keys)
        self._tfs.extend(np.frombuffer(b"".join(t for _, _, t in pending), dtype="<i4"))
        sizes = np.fromiter((len(k) // 8 for _, k, _ in pending), dtype=np.int64, count=len(pending))
        self._owners.extend(np.repeat(np.fromiter((d for d, _, _ in pending), np.int64, count=len(pending)), sizes))
        self._mark(keys)

    def _extend(self, terms: Sequence[str]) -> None:
        """Bring the postings of ``terms`` up to every indexed entry: one comparison over the new entries each."""
        self._convert()
        total = self._keys.size
        for term in terms:
            cached = self._arrays.get(term)
            start = 0 if cached is None else cached[2]
            if cached is not None and start >= total:
                continue
            docs, tfs = (cached[0], cached[1]) if cached is not None else (_EMPTY, _EMPTY)
            key = term_key(term)
            if not self._may_hold(key):
                self._arrays[term] = (docs, tfs, total)
                continue
            found = np.flatnonzero(self._keys.view()[start:total] == key) + start
            if len(found):
                owners = self._owners.view()[found]
                new_docs, first = np.unique(owners, return_index=True)  # a document's entries are adjacent
                new_tfs = np.add.reduceat(self._tfs.view()[found].astype(np.int64), first)
                docs = np.concatenate((docs, new_docs.astype(np.int64)))
                tfs = np.concatenate((tfs, new_tfs))
            self._arrays[term] = (docs, tfs, total)

    def _mark(self, hashes: np.ndarray) -> None:
        """Set the filter's buckets of ``hashes`` (just appended), first doubling it while entries outnumber it."""
        size = len(self._filter)
        if self._keys.size > size:
            while self._keys.size > size:
                size *= 2
            self._filter = np.zeros(size, dtype=bool)
            hashes = self._keys.view()
        self._filter[hashes & (size - 1)] = True

    def _may_hold(self, key: int) -> bool:
        """Whether some entry may hold the term of hash ``key`` (``False``: none does)."""
        return bool(self._filter[key & (len(self._filter) - 1)])

    def _term_arrays(self, term: str) -> tuple[np.ndarray, np.ndarray]:
        """``(docs, tfs)`` of a term over every indexed document (docs ascending), built on first use."""
        self._extend([term])
        docs, tfs, scanned = self._arrays.pop(term)
        self._arrays[term] = (docs, tfs, scanned)  # the most recently used is kept longest
        while len(self._arrays) > CACHED_TERMS:
            del self._arrays[next(iter(self._arrays))]
        return docs, tfs

    def _lengths_upto(self, n: int) -> np.ndarray:
        if len(self._length_array) != len(self._lengths):
            self._length_array = np.asarray(self._lengths, dtype=np.int64)
        return self._length_array[:n]

    def scores(self, query_tokens: Sequence[str], n_docs: int | None = None, *, b: float | None = None) -> np.ndarray:
        """BM25 scores of the first ``n_docs`` documents (default: all) for a tokenized query.

        Statistics (document count, average length, document frequencies) are those of the first
        ``n_docs`` documents, so a snapshot scores the same whatever was appended after it. ``b``: the length
        normalisation of this call (default: the index's).

        Returns:
            A float array of length ``n_docs``; zero where no query term occurs.
        """
        n = len(self._lengths) if n_docs is None else n_docs
        out = np.zeros(n, dtype=np.float64)
        if n == 0:
            return out
        total = self._total_length if n == len(self._lengths) else sum(self._lengths[:n])
        avgdl = total / n if total else 1.0
        lengths = self._lengths_upto(n)
        b = self.b if b is None else b
        terms = set(query_tokens)
        self._extend(list(terms))
        for term in terms:
            docs, tfs = self._term_arrays(term)
            if not len(docs):
                continue
            df = int(np.searchsorted(docs, n)) if docs[-1] >= n else len(docs)
            if df == 0:
                continue
            docs, tfs = docs[:df], tfs[:df]
            idf = math.log(1 + (n - df + 0.5) / (df + 0.5))
            norm = tfs + self.k1 * (1 - b + b * lengths[docs] / avgdl)
            out[docs] += idf * tfs / norm
        return out

    def truncate(self, n_docs: int) -> None:
        """Forget every document at position ``>= n_docs`` (used when the newest units are rebuilt)."""
        if n_docs >= len(self._lengths):
            return
        self._convert()
        cut = int(np.searchsorted(self._owners.view(), n_docs))
        for column in (self._keys, self._tfs, self._owners):
            column.truncate(cut)
        for term, (docs, tfs, scanned) in list(self._arrays.items()):
            if scanned <= cut:
                continue
            keep = int(np.searchsorted(docs, n_docs))
            self._arrays[term] = (docs[:keep], tfs[:keep], cut)
        self._total_length -= sum(self._lengths[n_docs:])
        del self._lengths[n_docs:]
        # the array form is rebuilt when its length differs; documents added after a cut may restore the length
        self._length_array = self._length_array[:n_docs]
