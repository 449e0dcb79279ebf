"""Lexical relevance of history units to the current goal: BM25, append-only.

Why not rebuild a ``bm25s`` index per model call: a bm25s index is static, and building it over 10,000
turns took about 0.8 s on this 2-core machine, far above a per-call budget. History is append-only, so
the index can be too: :class:`IncrementalBM25` keeps postings and document lengths, and adding a unit
costs only that unit's terms. Text is tokenized with ``bm25s.tokenize`` (lower-casing, English stop
words, the same splitter), and scores follow the Lucene BM25 variant that ``bm25s.BM25`` uses by default
(``k1 = 1.5``, ``b = 0.75``; Kamphuis et al., ECIR 2020), so that a test can check our scores against
``bm25s.BM25.get_scores`` on the same corpus.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence

import bm25s
import numpy as np


def tokenize(texts: Sequence[str]) -> list[list[str]]:
    """Tokenize texts the way ``bm25s`` does (lower-case, ``\\w\\w+`` terms, English stop words removed)."""
    if not texts:
        return []
    result = bm25s.tokenize(list(texts), stopwords="en", show_progress=False, return_ids=False)
    return [list(doc) for doc in result]


class IncrementalBM25:
    """An append-only BM25 index over documents identified by their insertion position.

    Args:
        k1: term-frequency saturation (bm25s default 1.5).
        b: length normalisation (bm25s default 0.75).
    """

    def __init__(self, k1: float = 1.5, b: float = 0.75) -> None:
        self.k1 = k1
        self.b = b
        self._postings: dict[str, list[tuple[int, int]]] = {}
        self._lengths: list[int] = []
        self._total_length = 0

    def __len__(self) -> int:
        """Number of documents indexed."""
        return len(self._lengths)

    def add(self, tokens: Sequence[str]) -> int:
        """Index one document's tokens and return its position."""
        doc = len(self._lengths)
        for term, tf in Counter(tokens).items():
            self._postings.setdefault(term, []).append((doc, tf))
        self._lengths.append(len(tokens))
        self._total_length += len(tokens)
        return doc

    def scores(self, query_tokens: Sequence[str], n_docs: int | None = None) -> np.ndarray:
        """BM25 scores of the first ``n_docs`` documents (default: all) for a tokenized query.

        Statistics (document count, average length, document frequencies) are those of the first
        ``n_docs`` documents, so a snapshot scores the same whatever was appended after it.

        Returns:
            A float array of length ``n_docs``; zero where no query term occurs.
        """
        n = len(self._lengths) if n_docs is None else n_docs
        out = np.zeros(n, dtype=np.float64)
        if n == 0:
            return out
        total = self._total_length if n == len(self._lengths) else sum(self._lengths[:n])
        avgdl = total / n if total else 1.0
        for term in set(query_tokens):
            postings = [(d, tf) for d, tf in self._postings.get(term, ()) if d < n]
            if not postings:
                continue
            idf = math.log(1 + (n - len(postings) + 0.5) / (len(postings) + 0.5))
            for doc, tf in postings:
                norm = tf + self.k1 * (1 - self.b + self.b * self._lengths[doc] / avgdl)
                out[doc] += idf * tf / norm
        return out

    def truncate(self, n_docs: int) -> None:
        """Forget every document at position ``>= n_docs`` (used when the newest units are rebuilt)."""
        if n_docs >= len(self._lengths):
            return
        for term in list(self._postings):
            plist = self._postings[term]
            while plist and plist[-1][0] >= n_docs:
                plist.pop()
            if not plist:
                del self._postings[term]
        self._total_length -= sum(self._lengths[n_docs:])
        del self._lengths[n_docs:]
