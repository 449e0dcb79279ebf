"""JSON text a model or a tool wrote (call arguments, tool output), decoded only when that is safe.

Such text is data, not input to validate: it may be malformed, hold an integer longer than Python converts,
or be valid JSON nested deeper than :mod:`json` can decode or encode again (it recurses once per level, so a
value decoded near the interpreter's limit fails when a deeper caller re-encodes it). :func:`decode_json`
gives the value only when the text parses and nests at most :data:`MAX_DEPTH` levels; otherwise it gives
:data:`UNDECODABLE` and callers keep the text as an opaque string: a call's arguments are compared as
written, Anthropic's ``tool_use`` input wraps them as ``{"_raw_arguments": text}``, and an output is
classified ``text/plain``.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any, Final

from ctxledger.hashing import canonical_json

MAX_DEPTH: Final = 200
"""Deepest nesting of arrays and objects decoded (and imported as structure); deeper JSON stays text."""


class _Undecodable:
    """The type of :data:`UNDECODABLE`."""

    def __repr__(self) -> str:
        return "UNDECODABLE"


UNDECODABLE: Final = _Undecodable()
"""What :func:`decode_json` gives for text it does not decode (``None`` is JSON's ``null``)."""


def decode_json(text: str, *, parse_constant: Callable[[str], Any] | None = None) -> Any:
    """The JSON value of ``text``, or :data:`UNDECODABLE` when it is not JSON or nests over :data:`MAX_DEPTH`.

    ``parse_constant`` is passed to :func:`json.loads` (e.g. ``str`` keeps ``NaN`` as a string). Never raises
    for any ``str``: malformed text, an over-long integer and nesting past the interpreter's recursion limit
    all give :data:`UNDECODABLE`.
    """
    try:
        value = json.loads(text, parse_constant=parse_constant)
    except (ValueError, RecursionError):
        return UNDECODABLE
    if text.count("[") + text.count("{") > MAX_DEPTH and nests_deeper_than(value, MAX_DEPTH):
        return UNDECODABLE
    return value


JSON_MEDIA_TYPE: Final = "application/json"
TEXT_MEDIA_TYPE: Final = "text/plain; charset=utf-8"


def media_type_of(text: str) -> str:
    """``application/json`` when ``text`` decodes by :func:`decode_json`'s rule, else ``text/plain; charset=utf-8``.

    Tool output is data: text that does not decode (malformed, or nested deeper than :data:`MAX_DEPTH` levels)
    is stored as text, never refused. The importers and the Recorder classify a tool result's text with it.
    """
    return JSON_MEDIA_TYPE if is_json(text) else TEXT_MEDIA_TYPE


def is_json(text: str) -> bool:
    """Whether ``text`` decodes as JSON by :func:`decode_json`'s rule."""
    return decode_json(text) is not UNDECODABLE


def canonical_or_raw(text: str) -> str:
    """The canonical JSON of ``text`` (see :mod:`ctxledger.hashing`), or ``text`` itself.

    ``text`` is kept as written when it does not decode (:func:`decode_json`) or has no canonical form (``NaN``).
    """
    value = decode_json(text)
    if value is UNDECODABLE:
        return text
    try:
        return canonical_json(value)
    except (ValueError, TypeError):
        return text


def nests_deeper_than(value: Any, limit: int) -> bool:
    """Whether a decoded JSON value has arrays or objects nested more than ``limit`` levels (no recursion)."""
    stack: list[tuple[Any, int]] = [(value, 0)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, dict):
            children: Any = item.values()
        elif isinstance(item, list):
            children = item
        else:
            continue
        if depth >= limit:
            return True
        stack.extend((child, depth + 1) for child in children)
    return False
