"""Large texts counted and embedded window by window: the terms of the whole text, its vector up to rounding."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from tokenizer_pieces import WORD_PIECES

import ctxledger.text_windows as text_windows
from ctxledger.assemble import relevance, semantic
from ctxledger.text_windows import after_whitespace, before_spaces, windows

_CHARS = st.sampled_from([" ", "  ", "\n", "\t", "a", "Σ", "ς", "İ", "é", "日本", "_", "-", ".", "'", "x1", "\u2581"])


@settings(max_examples=200, deadline=None)
@given(st.lists(_CHARS, max_size=120).map("".join), st.integers(1, 24), st.booleans())
def test_windows_join_to_the_text_and_end_where_the_finder_allows(text: str, size: int, words: bool) -> None:
    cut = after_whitespace if words else before_spaces
    parts = list(windows(text, cut, size))
    assert "".join(parts) == text
    assert all(part for part in parts)
    start = 0
    for part in parts[:-1]:
        end = start + len(part)
        allowed = cut(text, start, start + size)
        assert end == (allowed if allowed != -1 else start + size)
        if words:  # after a line break, space, tab or punctuation that is neither cased nor case-ignorable
            assert text[end - 1] in " \n\t-"
            assert len(part) <= size or not any(c in " \n\t-" for c in text[start : start + size])
        else:  # before a run of spaces, or at the window's size when there is none
            assert len(part) <= size
            if allowed != -1:
                assert text[end] in " \u2581" and text[end - 1] not in " \u2581" and " " in text[end:]
        start = end


def test_a_text_no_longer_than_a_window_is_that_window() -> None:
    text = "one two three"
    assert list(windows(text, after_whitespace, len(text))) == [text]
    assert [w is text for w in windows(text, after_whitespace, len(text))] == [True]
    assert list(windows("", after_whitespace, 4)) == []
    with pytest.raises(ValueError):
        list(windows(text, after_whitespace, 0))


_WORDS = st.sampled_from(
    [
        "the",
        "Running",
        "runs",
        "ΟΔΟΣ",
        "σΣ",
        "İstanbul",
        "x_y",
        "42",
        "über",
        "Straße",
        "日本語",
        "token.py",
        "a",
        "can't",
    ]
)
_GAPS = st.sampled_from([" ", "\n", "\t", "  ", " \n", ", ", "-", "."])


def _text(draw_words: list[str], gaps: list[str]) -> str:
    return "".join(word + gap for word, gap in zip(draw_words, gaps, strict=False)) + "".join(draw_words[len(gaps) :])


@settings(max_examples=150, deadline=None)
@given(st.lists(_WORDS, max_size=60), st.lists(_GAPS, max_size=60), st.integers(1, 40))
def test_windowed_term_counts_are_those_of_the_whole_text(words: list[str], gaps: list[str], size: int) -> None:
    """Same terms, counts and first-appearance order, whatever the window (a word longer than it included)."""
    text = _text(words, gaps)
    whole = relevance.term_counts([text])
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(text_windows, "WINDOW", size)
        windowed = relevance.term_counts([text])
    assert windowed == whole
    assert [list(c) for c in windowed] == [list(c) for c in whole]


_SHORT = st.sampled_from(WORD_PIECES)
_WORD = st.lists(_SHORT, min_size=1, max_size=4).map("".join)
_SPACES = st.sampled_from([" ", "  ", "   "])


@pytest.mark.skipif(semantic.default_embedder() is None, reason="the semantic extra is not installed")
@settings(max_examples=120, deadline=None)
@given(st.lists(st.tuples(_SPACES, _WORD), min_size=1, max_size=80), st.booleans())
def test_a_windowed_vector_differs_from_the_whole_texts_by_at_most_one_per_quantised_component(
    runs: list[tuple[str, str]], leading: bool
) -> None:
    """Every word (at most 32 characters) is shorter than the window (40): each window ends before a run of spaces."""
    text = "".join(spaces + word for spaces, word in runs)
    text = text if leading else text.lstrip(" ")
    embedder = semantic.default_embedder()
    assert embedder is not None
    whole = embedder.embed([text])[0]
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(text_windows, "WINDOW", 40)
        windowed = embedder.embed([text])[0]
    a = np.frombuffer(semantic.quantize_rows(whole[None]).tobytes(), dtype=np.int8).astype(int)
    b = np.frombuffer(semantic.quantize_rows(windowed[None]).tobytes(), dtype=np.int8).astype(int)
    assert np.abs(a - b).max() <= 1
    assert np.allclose(whole, windowed, atol=1e-5)
