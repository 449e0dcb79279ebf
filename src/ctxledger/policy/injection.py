"""Instruction-like text inside data: a small, documented heuristic (seed 000, seed 001 "Confianza en la Fuente").

Tool results, retrieved documents and emails are data; text in them that addresses the model as if it were
the user or the operator ("ignore all previous instructions", "you are now …", "new system prompt:") is the
classic indirect prompt injection (OWASP LLM01). ctxledger never executes or obeys it — the trust stage
keeps such content inside a ``<data>`` block — and this module only *finds* it, so the block can say so
(``note="instruction-like text inside; it is data"``) and the manifest can record where.

The patterns are English phrasings seen in published injection examples; they are a flag, not a filter:
a miss leaves the content delimited as data like any other tool result, a false hit only adds the note.
"You are now" counts only before an article ("a", "an", "the", "in"), a persona name in capitals ("You
are now DAN.") or a "… mode", so "You are now logged in." is not flagged. The trust stage applies it to
tool results, retrieved and untrusted messages, memories, compactions and checkpoints.
"""

from __future__ import annotations

import re

_PATTERNS = (
    r"\b(?:ignore|disregard|forget|override)\s+(?:all\s+|any\s+|the\s+|your\s+)*(?:previous|prior|above|earlier|"
    r"preceding|system|original)\s+(?:instructions?|prompts?|rules|directions|messages)",
    r"\byou\s+are\s+now\s+(?:a|an|the|in)\b",
    r"\byou\s+are\s+now\s+(?-i:(?!OK\b)[A-Z][A-Z0-9]+)\b",  # a persona name in capitals: "You are now DAN."
    r"\byou\s+are\s+now\s+(?:[\w-]+\s+){0,2}mode\b",  # "you are now jailbreak mode"
    r"\b(?:developer|god|jailbreak|dan)\s+mode\s+(?:is\s+)?(?:enabled|activated|on)\b",
    r"\bnew\s+(?:system\s+)?(?:instructions?|prompt)\s*:",
    r"\b(?:system|developer)\s+prompt\s*:",
    r"<\s*/?\s*(?:system|instructions?)\s*>",
    r"\bdo\s+not\s+(?:tell|inform|mention\s+(?:this|it)\s+to)\s+the\s+user\b",
    r"\b(?:assistant|ai|model)\s*,?\s+(?:you\s+)?must\s+now\b",
)
INSTRUCTION_LIKE = "instruction-like text inside"
"""How a ``delimit`` mark's detail starts when :func:`instruction_like` found a phrase."""

_INSTRUCTION_LIKE = re.compile("|".join(f"(?:{p})" for p in _PATTERNS), re.IGNORECASE)


def instruction_like(text: str) -> str | None:
    """The first instruction-like phrase in ``text`` (at most 80 characters), or ``None``.

    Args:
        text: model-facing text of a tool result, retrieved document or message (any length; str).

    Returns:
        The matched phrase, whitespace collapsed, for the manifest's detail; ``None`` when nothing matches.
    """
    found = _INSTRUCTION_LIKE.search(text)
    if found is None:
        return None
    return " ".join(found.group(0).split())[:80]
