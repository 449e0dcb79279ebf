"""Cutting a large text into consecutive windows, so a detector holds one window's work at a time.

Counting a text's terms or summing its token rows builds per-word objects (lists of words, their counts, token
ids, encodings) several times the text's size; on a 16 MB tool output that was gigabytes. Both sums are additive
over consecutive pieces of the text, as long as a piece never ends inside what they count, so a text longer than
:data:`WINDOW` characters is cut into windows of about that many characters, each ending where the caller's
detector allows (:func:`windows`), and the per-window results are summed: the memory held is a window's work,
whatever the text's size. A text no longer than :data:`WINDOW` is one window, the text itself.

Windows are ``str`` slices, so a cut never falls inside a character (lengths are code points, not bytes).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator

WINDOW = 1 << 18
"""Characters of one window at most (256 KB of ASCII text; on a 16 MB log a window of 1 MB held twice the memory
and saved no time)."""

CutFinder = Callable[[str, int, int], int]
"""``(text, start, end)`` → where a window starting at ``start`` that should end by ``end`` ends instead (an index
into ``text`` past ``start``; past ``end`` when the detector allows no cut before it), or ``-1`` to cut at
``end``."""


def windows(text: str, cut: CutFinder, size: int | None = None) -> Iterator[str]:
    """Consecutive slices of ``text`` that join to it, each ending where ``cut`` says (see :data:`CutFinder`).

    A window starting at ``start`` should end by ``start + size`` (``size`` defaults to :data:`WINDOW`); the
    finder picks its end, and where it gives none the window ends there. ``text`` no longer than ``size`` is
    yielded whole (the same object); an empty text yields nothing.

    Raises:
        ValueError: ``size`` is below 1.
    """
    size = WINDOW if size is None else size
    if size < 1:
        raise ValueError(f"window size must be positive, got {size}")
    start, length = 0, len(text)
    while length - start > size:
        end = start + size
        at = cut(text, start, end)
        end = at if at > start else end
        yield text[start:end]
        start = end
    if start < length:
        yield text if start == 0 else text[start:]


_PUNCTUATION = '!"#$%&()*+,-/;<=>?@[\\]{|}~'
"""ASCII characters that are neither word characters nor cased nor case-ignorable (unlike ``' . : ^ ` _``)."""

_NEXT_END = re.compile("[" + re.escape("\n \t" + _PUNCTUATION) + "]")


def after_whitespace(text: str, start: int, end: int) -> int:
    r"""Where a window for counting words ends: after a line break, space, tab or :data:`_PUNCTUATION` character.

    Just after the last line break in ``text[start:end]``, else its last space or tab, else its last
    :data:`_PUNCTUATION` character; with none of those, just after the first of them past ``end`` (the end of the
    text when there is none).

    No word (a run of word characters) spans such a cut, lower-casing reads no context across it (final sigma
    looks past case-ignorable characters only), and a regex word boundary ``\b`` at it is one in the whole text
    too. A window runs past ``end`` only when it holds none of those characters.
    """
    for marks in ("\n", " \t", _PUNCTUATION):
        at = max(text.rfind(mark, start, end) for mark in marks)
        if at >= start:
            return at + 1
    found = _NEXT_END.search(text, end)
    return found.end() if found else len(text)


def before_spaces(text: str, start: int, end: int) -> int:
    """Where a window for a sentencepiece-style tokenizer ends: before a run of word markers, or ``-1``.

    The start of the last run of word markers in ``text[start + 1 : end]`` that holds a space and follows another
    character; a word marker is a space or a ``▁`` (U+2581).

    A sentencepiece-style tokenizer that writes a space as the word marker ``▁`` cuts its text before every run of
    markers that follows another character (:mod:`ctxledger.assemble.semantic`), so cutting there splits no piece.
    """
    at = text.rfind(" ", start + 1, end)
    while at > start + 1 and text[at - 1] in _MARKERS:
        at -= 1
    return at if at > start and text[at - 1] not in _MARKERS else -1


_MARKERS = " \u2581"
