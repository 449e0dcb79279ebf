"""The snapshot's lexical index: append-only BM25 whose postings are built only for the terms queries ask for.

A snapshot in a new process indexes every unit of the history, and a query names a dozen terms. Building the
postings of every term up front costs one Python operation per (unit, distinct term) pair, millions at 100,000
events, and keeping each document's term mapping costs most of a long snapshot's memory. So the index keeps each
document's (term, frequency) entries in flat arrays (the term's key and its frequency: 12 bytes an entry, in
chunks of about a million entries, with each document's first entry position), and
:meth:`IncrementalBM25.scores` builds a query term's ``(docs, tfs)`` postings with one vectorised comparison over
the entries, cached per term; later calls only look at the entries appended since.

A term's key is :func:`~ctxledger.assemble.term_keys.term_key`, a stable 64-bit digest, so the write path stores
each record's terms already in the index's form (:func:`~ctxledger.assemble.term_keys.keyed_terms`: the keys and
the counts as little-endian byte strings, :class:`~ctxledger.facts.RecordFacts`) and indexing a stored record is a
byte copy. Two distinct terms with the same key would share postings; for a million distinct terms the odds are
about one in thirty million. Each chunk keeps a filter of one flag per key bucket (at least as many buckets as
entries, so about one bucket in eight is taken) that says which terms none of its entries holds: a rare term
is compared only in the chunks that may hold it, and a term no entry holds in none. A chunk gets a sorted view of
its keys when it fills (the last one, still filling, once the comparisons it answered add up to about the cost of
the sort), in which a new term's entries are found by binary search instead of a comparison over all of them; the
array forms of the documents' first positions and lengths grow by the new documents only. So a term no earlier
call asked costs two binary searches per full chunk and a comparison over the last chunk's entries at most, not a
pass over every entry of the history.

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
_EMPTY_POSITIONS = np.zeros(0, dtype=np.int32)
BUCKET_SHIFT = 48
"""A chunk's sorted view orders entries by ``key >> BUCKET_SHIFT``, the key's top 16 bits as a signed 16-bit
number (:meth:`_Chunk.sort`; keys are digests, so about 16 entries of a full chunk share them besides a term's
own)."""

CACHED_TERMS = 8192
"""Query terms whose postings arrays are kept between calls (the oldest built is dropped beyond this)."""

PENDING_ENTRIES = 65_536
"""Entries added documents may hold as byte strings before they are joined into the flat arrays."""

MIN_FILTER_BUCKETS = 1024
"""Buckets of a chunk's absent-term filter at least (a power of two; doubled as the chunk's entries outgrow it)."""


CHUNK_ENTRIES = 1 << 20
"""Entries per chunk of the flat arrays (the last chunk grows by doubling up to this, then a new one starts)."""

SORT_AFTER = 64
"""A chunk's sorted view is made once the entries compared one by one since the last one reach this many times
its entries (on this machine the sort of a million entries cost about as much as 90 comparisons over them)."""

SORTED_MARK_EVERY = 64
"""Every this many entries of a chunk's sorted view have their bucket kept apart for the binary search."""


class _Chunk:
    """Up to :data:`CHUNK_ENTRIES` consecutive entries: keys and frequencies, a filter of their keys, a sorted view.

    ``filter[key & (len - 1)]`` is set for every key an entry holds (or held before a cut), and the filter has at
    least as many buckets as the chunk has room for entries, so about one bucket in eight is taken: a term no
    entry of the chunk holds is usually answered without a comparison.

    ``order`` lists the positions of the first ``sorted_n`` entries by their key's bucket (``key >>``
    :data:`BUCKET_SHIFT`; positions ascending within one) and ``marks`` the bucket of every
    :data:`SORTED_MARK_EVERY`-th entry in that order, so the entries of one key among them are found by two binary
    searches and a comparison over a few dozen entries besides its own; the entries after ``sorted_n`` are compared
    one by one. A chunk is sorted when it fills (:meth:`_Entries.extend`): a term no earlier query asked then costs
    binary searches in every full chunk, not a pass over the history's entries, and the sorts cost the indexing of
    a history a share that does not grow with it. The last chunk, still filling, gets its view (or a new one) once
    the entries compared one by one since the last one add up to :data:`SORT_AFTER` times its entries (sorting costs
    about that many comparisons), at most once per query (:meth:`_Entries.sort_one`).
    """

    __slots__ = ("filter", "keys", "marks", "n", "order", "scanned", "sorted_n", "start", "tfs")

    def __init__(self, start: int, capacity: int) -> None:
        self.start = start
        self.n = 0
        self.keys = np.empty(capacity, dtype=np.int64)
        self.tfs = np.empty(capacity, dtype=np.int32)
        self.filter = np.zeros(_buckets(capacity), dtype=bool)
        self.order = _EMPTY_POSITIONS
        self.marks = _EMPTY
        self.sorted_n = 0
        self.scanned = 0

    def may_hold(self, key: int) -> bool:
        """Whether an entry may hold ``key`` (``False``: none does)."""
        return bool(self.filter[key & (len(self.filter) - 1)])

    def put(self, keys: np.ndarray, tfs: np.ndarray) -> None:
        end = self.n + len(keys)
        if end > len(self.keys):
            capacity = min(CHUNK_ENTRIES, max(end, 2 * len(self.keys)))
            for name in ("keys", "tfs"):
                old = getattr(self, name)
                grown = np.empty(capacity, dtype=old.dtype)
                grown[: self.n] = old[: self.n]
                setattr(self, name, grown)
            if _buckets(capacity) > len(self.filter):
                self.filter = np.zeros(_buckets(capacity), dtype=bool)
                self.filter[self.keys[: self.n] & (len(self.filter) - 1)] = True
        self.keys[self.n : end] = keys
        self.tfs[self.n : end] = tfs
        self.filter[keys & (len(self.filter) - 1)] = True
        self.n = end

    def find(self, key: int, low: int) -> np.ndarray:
        """Positions (in the chunk, ascending) of the entries from ``low`` on whose key is ``key``."""
        begin = max(low, self.sorted_n)
        found = _EMPTY
        if low < self.sorted_n:
            marks, bits = self.marks, key >> BUCKET_SHIFT
            first = max(0, (int(np.searchsorted(marks, bits, "left")) - 1) * SORTED_MARK_EVERY)
            last = min(self.sorted_n, int(np.searchsorted(marks, bits, "right")) * SORTED_MARK_EVERY)
            window = self.order[first:last]
            found = window[self.keys[window] == key]
            if low and len(found):
                found = found[int(np.searchsorted(found, low)) :]
        if begin < self.n:
            tail = np.flatnonzero(self.keys[begin : self.n] == key) + begin
            found = np.concatenate((found, tail)) if len(found) else tail
            self.scanned += self.n - begin
        return found

    def sort_due(self) -> bool:
        """Whether the entries compared one by one since the last sorted view call for a new one."""
        return self.sorted_n < self.n and self.scanned >= SORT_AFTER * self.n

    def sort(self) -> None:
        """Make the sorted view of every entry (see the class docstring).

        The view orders the entries by their key's bucket (:data:`BUCKET_SHIFT`), positions ascending within one:
        one stable pass over 16-bit numbers, which numpy sorts by radix (about a tenth of the time a comparison
        sort of the 64-bit keys takes). Keys that share a bucket are told apart by :meth:`find`.
        """
        buckets = (self.keys[: self.n] >> BUCKET_SHIFT).astype(np.int16)
        self.order = np.argsort(buckets, kind="stable").astype(np.int32)
        self.marks = buckets[self.order[::SORTED_MARK_EVERY]]
        self.sorted_n = self.n
        self.scanned = 0

    def cut(self, n: int) -> None:
        """Keep the first ``n`` entries (the sorted view too, when it holds no later one)."""
        self.n = min(self.n, n)
        if self.sorted_n > self.n:
            self.order, self.marks, self.sorted_n = _EMPTY_POSITIONS, _EMPTY, 0


def _buckets(capacity: int) -> int:
    """The filter size for ``capacity`` entries: the smallest power of two at least as large (and the minimum)."""
    return max(MIN_FILTER_BUCKETS, 1 << max(capacity - 1, 0).bit_length())


class _Entries:
    """The index's entries in order, in chunks of :data:`CHUNK_ENTRIES`.

    Appending copies at most one chunk, and nothing ever copies the whole (a long history's entries take
    hundreds of megabytes, which a second copy would double at its peak).
    """

    __slots__ = ("_chunks", "size")

    def __init__(self) -> None:
        self._chunks: list[_Chunk] = []
        self.size = 0

    def extend(self, keys: np.ndarray, tfs: np.ndarray) -> None:
        done, count = 0, len(keys)
        while done < count:
            last = self._chunks[-1] if self._chunks else None
            if last is None or last.n == CHUNK_ENTRIES:
                last = _Chunk(self.size, min(CHUNK_ENTRIES, count - done))
                self._chunks.append(last)
            take = min(CHUNK_ENTRIES - last.n, count - done)
            last.put(keys[done : done + take], tfs[done : done + take])
            if last.n == CHUNK_ENTRIES:  # full: no entry joins it any more, so its sorted view stays whole
                last.sort()
            done += take
            self.size += take

    def matches(self, key: int, start: int) -> tuple[np.ndarray, np.ndarray]:
        """``(positions, frequencies)`` of the entries from position ``start`` on whose key is ``key``, in order."""
        positions, tfs = [], []
        for chunk in self._chunks:
            if chunk.start + chunk.n <= start:
                continue
            if not chunk.may_hold(key):
                continue
            found = chunk.find(key, max(0, start - chunk.start))
            if len(found):
                positions.append(found + chunk.start)
                tfs.append(chunk.tfs[found])
        if not positions:
            return _EMPTY, _EMPTY
        return np.concatenate(positions), np.concatenate(tfs).astype(np.int64)

    def sort_one(self) -> None:
        """Make the sorted view of the first chunk that is due one (:meth:`_Chunk.sort_due`), if any.

        One per query: every new term reaches most chunks, so they fall due together, and sorting them all at
        once would make one call pay for every chunk of the history.
        """
        for chunk in self._chunks:
            if chunk.sort_due():
                chunk.sort()
                return

    def truncate(self, size: int) -> None:
        """Keep the first ``size`` entries."""
        while self._chunks and self._chunks[-1].start >= size:
            self._chunks.pop()
        if self._chunks:
            self._chunks[-1].cut(size - self._chunks[-1].start)
        self.size = min(self.size, size)


class _IntColumn:
    """The int64 array form of a list of ints that grows at its end (or is cut back, with :meth:`cut`).

    :meth:`of` copies only the items the list gained since the last call into a buffer that doubles when full, so
    keeping the array form of a list of a document per unit costs the new documents, not the history.
    """

    __slots__ = ("_buffer", "_n")

    def __init__(self) -> None:
        self._buffer = _EMPTY
        self._n = 0

    def of(self, values: list[int]) -> np.ndarray:
        """``values`` as an int64 array (a view of the buffer, valid until the next :meth:`of` or :meth:`cut`)."""
        size = len(values)
        if size > self._n:
            if size > len(self._buffer):
                grown = np.empty(max(size, 2 * len(self._buffer), 64), dtype=np.int64)
                grown[: self._n] = self._buffer[: self._n]
                self._buffer = grown
            self._buffer[self._n : size] = values[self._n : size]
        self._n = size
        return self._buffer[:size]

    def cut(self, size: int) -> None:
        """Forget the items from position ``size`` on (the list was cut back there)."""
        self._n = min(self._n, size)


class _Postings:
    """A term's postings: the documents holding it (ascending), its frequency and their lengths in each.

    Held in buffers that double when full, so adding the postings of newly indexed documents copies those, not
    every earlier posting. ``scanned``: the entries the postings cover (the first ``scanned`` of the index).
    """

    __slots__ = ("docs", "lengths", "n", "scanned", "tfs")

    def __init__(self) -> None:
        self.docs = self.tfs = self.lengths = _EMPTY
        self.n = 0
        self.scanned = 0

    def add(self, docs: np.ndarray, tfs: np.ndarray, lengths: np.ndarray) -> None:
        """Append postings of documents after every one held (int64 arrays of one length)."""
        end = self.n + len(docs)
        if end > len(self.docs):
            capacity = max(end, 2 * len(self.docs))
            for name in ("docs", "tfs", "lengths"):
                grown = np.empty(capacity, dtype=np.int64)
                grown[: self.n] = getattr(self, name)[: self.n]
                setattr(self, name, grown)
        self.docs[self.n : end] = docs
        self.tfs[self.n : end] = tfs
        self.lengths[self.n : end] = lengths
        self.n = end

    def cut(self, n_docs: int, entries: int) -> None:
        """Forget the postings of documents from ``n_docs`` on; they now cover the first ``entries`` entries."""
        self.n = int(np.searchsorted(self.docs[: self.n], n_docs))
        self.scanned = entries


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
        self._entries = _Entries()  # (term key, frequency) of each document's parts, in document order
        self._starts: list[int] = []  # position of each document's first entry (pending ones counted)
        self._start_array = _IntColumn()
        self._entry_count = 0  # entries added, pending ones included
        self._pending: list[tuple[bytes, bytes]] = []  # (keys, frequencies) of parts not joined yet
        self._pending_entries = 0
        self._lengths: list[int] = []
        self._length_array = _IntColumn()
        self._total_length = 0
        self._arrays: dict[str, _Postings] = {}  # term -> its postings over the first ``scanned`` entries

    def __len__(self) -> int:
        """Number of documents indexed."""
        return len(self._lengths)

    def add(self, tokens: Sequence[str]) -> int:
        """Index one document's tokens and return its position."""
        return self.add_parts((Counter(tokens),), len(tokens))

    def add_parts(self, parts: Sequence[Mapping[str, int]], length: int) -> int:
        """Index one document made of ``parts`` (its terms are their summed counts) of ``length`` terms in all."""
        return self.add_keyed([keyed_terms(part) for part in parts], length)

    def add_keyed(self, parts: Sequence[tuple[bytes, bytes]], length: int) -> int:
        """:meth:`add_parts` with each part given as :func:`keyed_terms` bytes (stored write-path terms)."""
        doc = len(self._lengths)
        self._starts.append(self._entry_count)
        for keys, tfs in parts:
            if keys:
                self._pending.append((keys, tfs))
                self._pending_entries += len(keys) // 8
                self._entry_count += len(keys) // 8
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
        keys = np.frombuffer(b"".join(k for k, _ in pending), dtype="<i8")
        tfs = np.frombuffer(b"".join(t for _, t in pending), dtype="<i4")
        self._entries.extend(keys, tfs)

    def _extend(self, terms: Sequence[str]) -> None:
        """Bring the postings of ``terms`` up to every indexed entry: one comparison over the new entries each."""
        self._convert()
        total = self._entries.size
        for term in terms:
            postings = self._arrays.get(term)
            if postings is None:
                postings = self._arrays[term] = _Postings()
            elif postings.scanned >= total:
                continue
            positions, found = self._entries.matches(term_key(term), postings.scanned)
            if len(positions):
                owners = self._owners(positions)
                new_docs, first = np.unique(owners, return_index=True)  # a document's entries are adjacent
                postings.add(new_docs, np.add.reduceat(found, first), self._length_array.of(self._lengths)[new_docs])
            postings.scanned = total

    def _term_arrays(self, term: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``(docs, tfs, lengths)`` of a term over every indexed document (docs ascending), built on first use.

        ``lengths`` are the documents' lengths (``lengths[i]`` of ``docs[i]``). The arrays are views, valid until
        the index changes.
        """
        self._extend([term])
        postings = self._arrays.pop(term)
        self._arrays[term] = postings  # the most recently used is kept longest
        while len(self._arrays) > CACHED_TERMS:
            del self._arrays[next(iter(self._arrays))]
        return postings.docs[: postings.n], postings.tfs[: postings.n], postings.lengths[: postings.n]

    def _owners(self, positions: np.ndarray) -> np.ndarray:
        """The document of each entry position (a document without entries starts where the next one does)."""
        return np.searchsorted(self._start_array.of(self._starts), positions, side="right") - 1

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
        b = self.b if b is None else b
        terms = set(query_tokens)
        self._extend(list(terms))
        self._entries.sort_one()
        for term in terms:
            docs, tfs, doc_lengths = self._term_arrays(term)
            if not len(docs):
                continue
            df = int(np.searchsorted(docs, n)) if docs[-1] >= n else len(docs)
            if df == 0:
                continue
            docs, tfs = docs[:df], tfs[:df]
            idf = math.log(1 + (n - df + 0.5) / (df + 0.5))
            # tfs + k1·(1 − b + b·length / avgdl), then idf·tfs / that: the same operations, in place
            norm = np.multiply(doc_lengths[:df], b, dtype=np.float64)
            norm /= avgdl
            norm += 1 - b
            norm *= self.k1
            norm += tfs
            part = np.multiply(tfs, idf, dtype=np.float64)
            part /= norm
            out[docs] += part
        return out

    def truncate(self, n_docs: int) -> None:
        """Forget every document at position ``>= n_docs`` (used when the newest units are rebuilt)."""
        if n_docs >= len(self._lengths):
            return
        self._convert()
        cut = self._starts[n_docs]
        self._entries.truncate(cut)
        self._entry_count = cut
        del self._starts[n_docs:]
        self._start_array.cut(n_docs)
        for postings in self._arrays.values():
            if postings.scanned > cut:
                postings.cut(n_docs, cut)
        self._total_length -= sum(self._lengths[n_docs:])
        del self._lengths[n_docs:]
        self._length_array.cut(n_docs)
