"""The snapshot's lexical index: append-only BM25 whose postings are built only for the terms queries ask for.

A snapshot in a new process indexes every unit of the history, and a query names a dozen terms. Building the
postings of every term up front costs one Python operation per (unit, distinct term) pair, two million at
10,000 events; building them for a term when a query first needs it costs one dictionary lookup per unit for
that term, and later calls only look at the units appended since. So adding a document keeps a reference to
its term counts (the stored write-path terms of its records, or a tokenized text), and
:meth:`IncrementalBM25.scores` builds and caches ``(docs, tfs)`` arrays per query term.

Scores follow the Lucene BM25 variant that ``bm25s.BM25`` uses by default (``k1 = 1.5``, ``b = 0.75``;
Kamphuis et al., ECIR 2020). A document's score is computed with the same floating-point operations in the same
order as the scalar formula (query terms in the same order), so the scores are bit-for-bit those of a
per-posting loop whatever order the postings were built in.
"""

from __future__ import annotations

import bisect
import math
from collections import Counter
from collections.abc import Mapping, Sequence

import numpy as np

_EMPTY = np.zeros(0, dtype=np.int64)

CACHED_TERMS = 8192
"""Query terms whose postings arrays are kept between calls (the oldest built is dropped beyond this)."""


class IncrementalBM25:
    """An append-only BM25 index over documents identified by their insertion position.

    A document is one or more *parts*, each a term → frequency mapping (a unit's records' stored terms); its
    term frequency is the sum over its parts. The index keeps the parts by reference, so the caller must not
    change a mapping after adding it.

    Args:
        k1: term-frequency saturation (bm25s default 1.5).
        b: length normalisation (bm25s default 0.75).
    """

    def __init__(self, k1: float = 1.5, b: float = 0.75) -> None:
        self.k1 = k1
        self.b = b
        self._parts: list[Mapping[str, int]] = []
        self._part_doc: list[int] = []  # document of each part, non-decreasing
        self._lengths: list[int] = []
        self._length_array = np.zeros(0, dtype=np.int64)
        self._total_length = 0
        # term -> (docs, tfs, parts scanned): postings of the first ``parts scanned`` parts
        self._arrays: dict[str, tuple[np.ndarray, np.ndarray, int]] = {}
        # every term any part ever held (never shrinks), once a second pass over every part built it: a term
        # outside it has no postings to look for. The first pass (a new process's first query) does not build it,
        # so a call that never asks a new word does not pay for it.
        self._vocabulary: set[str] | None = None
        self._full_passes = 0

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
        doc = len(self._lengths)
        for part in parts:
            if part:
                self._parts.append(part)
                self._part_doc.append(doc)
                if self._vocabulary is not None:
                    self._vocabulary.update(part)
        self._lengths.append(length)
        self._total_length += length
        return doc

    def _extend(self, terms: Sequence[str]) -> None:
        """Bring the postings of ``terms`` up to every indexed part: one pass over the new parts per starting point.

        Each part is intersected with the terms still to find (a C-level set operation on its keys), so a pass
        costs one step per part, not one per (part, term). Once the vocabulary is known (built during the second
        pass over every part), a term no part ever held (a new word, a fresh id) gets empty postings without a pass.
        """
        total = len(self._parts)
        vocabulary = self._vocabulary
        by_start: dict[int, list[str]] = {}
        for term in terms:
            cached = self._arrays.get(term)
            start = 0 if cached is None else cached[2]
            if vocabulary is not None and term not in vocabulary:
                if cached is None:
                    self._arrays[term] = (_EMPTY, _EMPTY, total)
                continue
            if cached is None or start < total:
                by_start.setdefault(start, []).append(term)
        for start, group in by_start.items():
            wanted = set(group)
            hits: dict[str, tuple[list[int], list[int]]] = {t: ([], []) for t in group}
            learn = start == 0 and vocabulary is None and self._full_passes > 0
            if start == 0:
                self._full_passes += 1
            seen: set[str] = set()
            for position, part in enumerate(self._parts[start:], start):
                if learn:
                    seen.update(part)
                for term in part.keys() & wanted:
                    found = hits[term]
                    found[0].append(position)
                    found[1].append(part[term])
            if learn:
                self._vocabulary = vocabulary = seen
            for term in group:
                cached = self._arrays.pop(term, None)
                docs, tfs = (cached[0], cached[1]) if cached is not None else (_EMPTY, _EMPTY)
                positions, counts = hits[term]
                if positions:
                    owners = np.asarray([self._part_doc[i] for i in positions], dtype=np.int64)
                    new_docs, first = np.unique(owners, return_index=True)  # a document's parts are adjacent
                    new_tfs = np.add.reduceat(np.asarray(counts, dtype=np.int64), first)
                    docs, tfs = np.concatenate((docs, new_docs)), np.concatenate((tfs, new_tfs))
                self._arrays[term] = (docs, tfs, total)

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
        cut = bisect.bisect_left(self._part_doc, n_docs)
        del self._parts[cut:]
        del self._part_doc[cut:]
        for term, (docs, tfs, scanned) in list(self._arrays.items()):
            if scanned <= cut:
                continue
            keep = int(np.searchsorted(docs, n_docs))
            self._arrays[term] = (docs[:keep], tfs[:keep], cut)
        self._total_length -= sum(self._lengths[n_docs:])
        del self._lengths[n_docs:]
        # the array form is rebuilt when its length differs; documents added after a cut may restore the length
        self._length_array = self._length_array[:n_docs]
