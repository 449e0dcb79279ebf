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
from array import array
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
        # every part's terms as numbers (:class:`_TermTable`), once a second pass over every part built it; the
        # first pass (a new process's first query) does not, so a process that never asks a new word never pays
        self._table: _TermTable | None = None
        self._full_passes = 0
        self._part_doc_array = np.zeros(0, dtype=np.int64)

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
                if self._table is not None:
                    self._table.add(part)
        self._lengths.append(length)
        self._total_length += length
        return doc

    def _extend(self, terms: Sequence[str]) -> None:
        """Bring the postings of ``terms`` up to every indexed part.

        Before the term table exists: one pass over the new parts per starting point, each part intersected with
        the terms still to find (a C-level set operation on its keys), so a pass costs one step per part, not one
        per (part, term); the second pass over every part builds the table. With the table, a term no part ever
        held (a new word, a fresh id) gets empty postings at once, and the others are found by one vectorised
        comparison over the table's term numbers.
        """
        total = len(self._parts)
        table = self._table
        by_start: dict[int, list[str]] = {}
        for term in terms:
            cached = self._arrays.get(term)
            start = 0 if cached is None else cached[2]
            if table is not None and term not in table.number:
                if cached is None:
                    self._arrays[term] = (_EMPTY, _EMPTY, total)
                continue
            if cached is None or start < total:
                by_start.setdefault(start, []).append(term)
        for start, group in by_start.items():
            if table is not None:  # (a table built by an earlier group's pass may not know this group's terms)
                found = table.parts_holding([t for t in group if t in table.number], start)
                hits = {t: (found[t], [self._parts[p][t] for p in found[t].tolist()]) if t in found else ([], [])
                        for t in group}  # fmt: skip
            else:
                hits = self._pass(group, start)
                table = self._table
            for term in group:
                cached = self._arrays.pop(term, None)
                docs, tfs = (cached[0], cached[1]) if cached is not None else (_EMPTY, _EMPTY)
                positions, counts = hits[term]
                if len(positions):
                    owners = self._part_docs()[np.asarray(positions, dtype=np.int64)]
                    new_docs, first = np.unique(owners, return_index=True)  # a document's parts are adjacent
                    new_tfs = np.add.reduceat(np.asarray(counts, dtype=np.int64), first)
                    docs, tfs = np.concatenate((docs, new_docs)), np.concatenate((tfs, new_tfs))
                self._arrays[term] = (docs, tfs, total)

    def _pass(self, group: Sequence[str], start: int) -> dict[str, tuple[list[int], list[int]]]:
        """``term → (part positions, frequencies)`` of ``group`` in the parts from ``start``, by one walk over them.

        The second walk that starts at the first part also builds the term table.
        """
        wanted = set(group)
        hits: dict[str, tuple[list[int], list[int]]] = {t: ([], []) for t in group}
        learn = start == 0 and self._table is None and self._full_passes > 0
        if start == 0:
            self._full_passes += 1
        table = _TermTable() if learn else None
        for position, part in enumerate(self._parts[start:], start):
            if table is not None:
                table.add(part)
            for term in part.keys() & wanted:
                found = hits[term]
                found[0].append(position)
                found[1].append(part[term])
        if table is not None:
            self._table = table
        return hits

    def _part_docs(self) -> np.ndarray:
        """The document of each part, as an array (rebuilt only when parts were added or cut)."""
        if len(self._part_doc_array) != len(self._part_doc):
            self._part_doc_array = np.asarray(self._part_doc, dtype=np.int64)
        return self._part_doc_array

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
        if self._table is not None:
            self._table.cut(cut)
        for term, (docs, tfs, scanned) in list(self._arrays.items()):
            if scanned <= cut:
                continue
            keep = int(np.searchsorted(docs, n_docs))
            self._arrays[term] = (docs[:keep], tfs[:keep], cut)
        self._total_length -= sum(self._lengths[n_docs:])
        del self._lengths[n_docs:]
        # the array forms are rebuilt when their length differs; documents added after a cut may restore it
        self._length_array = self._length_array[:n_docs]
        self._part_doc_array = self._part_doc_array[:cut]


class _TermTable:
    """Every (part, term) pair of an index's parts as a term number, part by part.

    ``number`` maps each term any part held to its number (it only grows, so a term outside it is in no part);
    ``ids`` holds the term numbers of each part in turn (C ints) and ``offsets[k]`` where part ``k``'s start.
    Finding the parts that hold a few terms is then one comparison over ``ids``, done by numpy, instead of a
    Python step per part: about 5 bytes per pair (a 10,000-event history holds about 1.2 million).
    """

    def __init__(self) -> None:
        self.number: dict[str, int] = {}
        self.ids = array("i")
        self.offsets = array("q", [0])

    @property
    def parts(self) -> int:
        """How many parts the table holds."""
        return len(self.offsets) - 1

    def add(self, part: Mapping[str, int]) -> None:
        """Append one part's terms."""
        number = self.number
        for term in part.keys() - number.keys():
            number[term] = len(number)
        self.ids.extend(map(number.__getitem__, part))
        self.offsets.append(len(self.ids))

    def cut(self, parts: int) -> None:
        """Forget every part at position ``>= parts`` (their terms keep their numbers)."""
        if parts < self.parts:
            del self.ids[self.offsets[parts] :]
            del self.offsets[parts + 1 :]

    def parts_holding(self, terms: Sequence[str], start: int) -> dict[str, np.ndarray]:
        """``term → positions`` (ascending) of the parts from ``start`` that hold it; every term must have a number."""
        low = self.offsets[start]
        ids = np.frombuffer(self.ids, dtype=np.int32)[low:]  # a view: nothing is copied
        offsets = np.frombuffer(self.offsets, dtype=np.int64)
        numbers = np.asarray([self.number[t] for t in terms], dtype=np.int32)
        where = np.flatnonzero(np.isin(ids, numbers))
        which = ids[where]
        owners = np.searchsorted(offsets, where + low, side="right") - 1
        del ids  # release the view before the array can grow again
        return {t: owners[which == n] for t, n in zip(terms, numbers.tolist(), strict=True)}
