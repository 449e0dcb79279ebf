"""The container shapes a chat transcript file can have (OpenAI and Anthropic alike).

* an object with ``messages`` (a request payload or a case file): one conversation; its other keys
  (``tools``/``system`` aside) are conversation metadata. Errors name the message index;
* an array (or JSON Lines) of messages: one conversation. Errors name the message index;
* an array (or JSON Lines) of objects with ``messages`` and no ``role``: one conversation each, id
  ``<prefix>-<id>`` (their string ``id``, else their position). Errors name the conversation index and
  a ``messages[j].…`` path.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from ctxledger.errors import InputError
from ctxledger.ingest._builder import ParseOptions
from ctxledger.ingest._fields import Loc, json_type, require


@dataclass(frozen=True, slots=True)
class Shape:
    """One conversation found in an input.

    Attributes:
        conversation_id: the id it will get.
        payload: the object that held ``messages`` (``{}`` for a bare list of messages).
        messages: the raw messages.
        message_loc: the location of message ``j``.
        top: the location of ``payload`` (paths below it: ``tools.``, ``system`` …).
    """

    conversation_id: str
    payload: Mapping[str, Any]
    messages: list[Any]
    message_loc: Callable[[int], Loc]
    top: Loc


def conversation_shapes(value: Any, options: ParseOptions) -> list[Shape]:
    """Split a parsed input into conversations (see the module docstring).

    Raises:
        InputError: the input is neither shape, or two conversations get the same id.
    """
    source = options.source
    if isinstance(value, dict):
        messages = require(value, "messages", list, Loc(source), "an array of messages")
        return [Shape(options.single_id(), value, messages, lambda j: Loc(source, j), Loc(source))]
    if not isinstance(value, list):
        raise InputError(
            f"expected an array of messages or an object with 'messages', got {json_type(value)}",
            source=source,
        )
    if value and all(isinstance(x, dict) and "messages" in x and "role" not in x for x in value):
        return _many(value, options)
    return [Shape(options.single_id(), {}, value, lambda j: Loc(source, j), Loc(source))]


def _many(items: list[Any], options: ParseOptions) -> list[Shape]:
    shapes: list[Shape] = []
    seen: set[str] = set()
    for i, item in enumerate(items):
        top = Loc(options.source, i)
        messages = require(item, "messages", list, top, "an array of messages")
        key = item.get("id") if isinstance(item.get("id"), str) else str(i)
        if key in seen:
            raise top.error(f"conversation id {key!r} appears twice in this file", "id")
        seen.add(key)
        shapes.append(Shape(options.multi_id(key), item, messages, _message_loc(options.source, i), top))
    return shapes


def _message_loc(source: str, i: int) -> Callable[[int], Loc]:
    return lambda j: Loc(source, i, f"messages[{j}].")


def below(top: Loc, key: str) -> Loc:
    """The location of ``top``'s field ``key`` as a prefix (``tools.`` …)."""
    return Loc(top.source, top.index, f"{top.prefix}{key}.")
