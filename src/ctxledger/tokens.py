"""Token counting (DESIGN §2; seed 000 "Tokens y presupuesto antes de seleccionar").

A :class:`TokenCounter` turns text into a token count with one model family's tokenizer. Provider
framing (per-message overhead, tool-call JSON, tool schemas) is added by each serializer's
``message_tokens`` so that counts are taken on the *serialized* form. A counter whose ``is_estimate`` is
true (a character heuristic, or a tokenizer of another family) must be flagged in the manifest and
covered by the margin.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol, runtime_checkable


@runtime_checkable
class TokenCounter(Protocol):
    """Counts tokens of text for one tokenizer.

    Attributes:
        id: stable identifier, part of the token-count cache key (e.g. ``"tiktoken/o200k_base"``).
        is_estimate: true when counts only approximate the target model's tokenizer.
    """

    id: str
    is_estimate: bool

    def count(self, text: str) -> int:
        """Number of tokens in ``text`` (ordinary text: special-token strings count as text)."""
        ...

    def count_many(self, texts: Sequence[str]) -> list[int]:
        """``[count(t) for t in texts]``, possibly batched."""
        ...
