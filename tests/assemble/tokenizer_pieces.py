"""Text pieces that stress a subword tokenizer (markers, byte fallbacks, specials, ids), shared by the tests that
compare batched or windowed embedding against whole-text tokenization."""

from __future__ import annotations

WORD_PIECES = [
    "a", "é", "日", "😀", "\u2581", "<s>", "</s>", "<unk>", "x=1", "0x7f", "the", "ing", "{", '"', "\n", "\t",
    "e1d3dccb",
]  # fmt: skip
"""Pieces without a space, at most 8 characters each."""

SPACE_PIECES = [" ", "  "]
"""Runs of spaces (the pieces a tokenizer's pre-split cuts at)."""

LONG_PIECES = ["\U0001f30d", "2024-04-25T01:56:03.380Z"]
"""A character outside the BMP and a timestamp of 24 characters."""
