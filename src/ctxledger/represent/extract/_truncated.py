r"""Recovering the complete part of JSON (or Python-literal) text that a tool or harness cut short.

Agent harnesses truncate long tool responses before the model sees them; ToolBench, for one, cuts
RapidAPI responses at about 1,000 characters and appends ``...``, leaving
``{"error": "", "response": "[{\"id\": …`` with an unterminated string. What was cut is gone, but the
elements *before* the cut are intact. :func:`close_truncated` keeps the text up to the last element
separator (``,``) outside any string and closes the containers still open there, so those elements parse;
:func:`envelope_response` recovers the (possibly cut) ``response`` string of a ToolBench envelope. The
result is marked truncated by the caller and never mistaken for the whole output.
"""

from __future__ import annotations

import json
import re

_ENVELOPE_HEAD = re.compile(r'^\s*\{\s*"error"\s*:\s*"((?:[^"\\]|\\.)*)"\s*,\s*"response"\s*:\s*"')
_CLOSERS = {"[": "]", "{": "}", "(": ")"}


def close_truncated(text: str) -> str | None:
    """``text`` cut after its last complete container element and closed, or ``None`` if none is complete.

    Strings may be quoted with ``"`` or ``'`` (Python literals); backslash escapes are honoured.
    """
    stack: list[str] = []
    quote: str | None = None
    escaped = False
    cut: tuple[int, tuple[str, ...]] | None = None
    for i, ch in enumerate(text):
        if quote is not None:
            if escaped:
                escaped = False
            elif ch == "\\":
                escaped = True
            elif ch == quote:
                quote = None
        elif ch in "\"'":
            quote = ch
        elif ch in _CLOSERS:
            stack.append(ch)
        elif ch in "]})" and stack:
            stack.pop()
        elif ch == "," and stack:
            cut = (i, tuple(stack))
    if cut is None:
        return None
    end, opened = cut
    return text[:end] + "".join(_CLOSERS[c] for c in reversed(opened))


_CUT_ESCAPE = 5
"""Longest tail a cut ``\\u`` escape (four hex digits when whole) leaves: a backslash, ``u``, up to three digits."""


def envelope_response(text: str) -> tuple[str, str] | None:
    """``(error, response text)`` of a ToolBench ``{"error", "response"}`` envelope whose string was cut.

    The response string is decoded up to its closing quote or, when cut, to the end of the text (a
    dangling escape is dropped). ``None`` when the text does not open such an envelope.
    """
    head = _ENVELOPE_HEAD.match(text)
    if head is None:
        return None
    body, i, escaped = [], head.end(), False
    while i < len(text) and (escaped or text[i] != '"'):
        escaped = not escaped and text[i] == "\\"
        body.append(text[i])
        i += 1
    raw = "".join(body)
    if escaped:
        raw = raw[:-1]
    candidates = [raw]
    cut = raw.rfind("\\")
    if cut != -1 and len(raw) - cut <= _CUT_ESCAPE:  # a \u escape cut short: "\u", "\u0" … "\u00e"
        candidates.append(raw[:cut])
    for candidate in candidates:
        try:
            return json.loads(f'"{head.group(1)}"'), json.loads(f'"{candidate}"')
        except ValueError:
            continue
    return None
