r"""Lexical terms of many texts at once: :func:`ctxledger.assemble.relevance.term_counts`, split and counted in C.

The write path counts the terms of every text it stores (:mod:`ctxledger.facts`), megabytes per import, and
``relevance.term_counts`` spends most of its time finding words with a regex and counting them in a Python loop.
:func:`term_counts` gives the same terms, counts and order: a lower-cased ASCII text is cut into its word runs by
``str.translate`` and ``str.split`` (exactly the runs the word regex ``(?u)\b\w\w+\b`` finds, with the
one-character ones), any other text by the regex itself, and each word is mapped to its term by a table that stems
a word once (:class:`TermTable`), the mapped words counted by ``collections.Counter``. Should the regex of
:mod:`ctxledger.assemble.relevance` change, its own ``term_counts`` is used.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Sequence

import ctxledger.assemble.relevance as relevance

WORD_PATTERN = r"(?u)\b\w\w+\b"
"""The word regex of :func:`ctxledger.assemble.relevance.term_counts` that ASCII text is split as."""

ASCII_GAPS = str.maketrans(dict.fromkeys((chr(c) for c in range(128) if not (chr(c).isalnum() or c == 0x5F)), " "))
r"""Every ASCII character ``\w`` does not match, as a space: an ASCII text so translated splits into its word runs."""

CACHE_WORDS = 200_000
"""Distinct words whose terms :func:`term_counts` keeps; the table is emptied when it is full."""


class TermTable(dict[str, str | None]):
    """Word → its stemmed term, or ``None`` for a stop word or a one-character word; filled on demand."""

    def __missing__(self, word: str) -> str | None:
        """Stem ``word`` (``None`` when it is no term) and remember it."""
        term = None if len(word) < 2 or word in relevance._STOPWORDS else relevance.stemmer().stemWord(word)
        self[word] = term
        return term


_TERMS = TermTable()


def term_counts(texts: Sequence[str]) -> list[dict[str, int]]:
    """Per text, its stemmed terms → frequency in the order each first appears, as ``relevance.term_counts``.

    A term's count is the sum of its words' counts, and the terms come in the order of their first words, as
    :func:`ctxledger.assemble.relevance.term_counts` orders them; both skip the same stop words.
    """
    words_of = relevance._WORDS
    if words_of.pattern != WORD_PATTERN or words_of.flags != re.UNICODE:
        return relevance.term_counts(texts)
    if len(_TERMS) > CACHE_WORDS:
        _TERMS.clear()
    term_of = _TERMS.__getitem__
    out: list[dict[str, int]] = []
    for text in texts:
        lowered = text.lower()
        words = lowered.translate(ASCII_GAPS).split() if lowered.isascii() else words_of.findall(lowered)
        counts = Counter(map(term_of, words))
        counts.pop(None, None)
        out.append(dict(counts))  # type: ignore[arg-type]  # None, the only key that is no term, is gone
    return out
