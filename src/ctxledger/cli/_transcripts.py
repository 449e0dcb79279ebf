"""Whether a JSON file whose format could not be told looks like a transcript at all.

A folder import skips files whose format cannot be told. Naming ``--format`` helps only for a transcript in
a format the content does not give away (a chat with traits of two providers, say); a function schema, a
package manifest or a list of expected answers is no transcript under any format, and is skipped as such.

A value looks like a transcript when, within its first :data:`DEPTH` levels (the first :data:`SAMPLE` items of
each list or object, :data:`MAX_ITEMS` values in all), there is a message (an object with a speaker key such
as ``role`` and a text key such as ``content``) or a conversation key (``messages``, ``conversation``,
``turns`` …) holding a list or an object.
"""

from __future__ import annotations

from itertools import islice
from typing import Any

DEPTH = 6
"""Levels of nesting looked into (transcripts put their messages one to four levels down)."""
SAMPLE = 20
"""Items of each list or object looked at (a transcript's records are alike)."""
MAX_ITEMS = 10_000
"""Values looked at in all, at most (breadth first), so that a large file is judged in bounded time."""

SPEAKER_KEYS = frozenset({"role", "speaker", "from", "author", "sender"})
"""Keys that name who said a message."""
TEXT_KEYS = frozenset({"content", "text", "value", "message", "parts"})
"""Keys that hold what a message says."""
CONVERSATION_KEYS = frozenset(
    {"messages", "conversation", "conversations", "dialogue", "dialog", "turns", "trajectory", "traj", "history"}
)
"""Keys under which transcripts keep their messages or steps."""


def looks_like_transcript(value: Any) -> bool:
    """Whether parsed JSON (a document, or the records of a JSON Lines file) holds messages or a conversation."""
    level, seen = [value], 0
    for _ in range(DEPTH):
        below: list[Any] = []
        for item in level:
            if isinstance(item, dict):
                if _is_message(item) or _holds_conversation(item):
                    return True
                below.extend(islice(item.values(), SAMPLE))
            elif isinstance(item, list):
                below.extend(item[:SAMPLE])
        seen += len(level)
        level = below[: max(0, MAX_ITEMS - seen)]
    return False


def _is_message(item: dict[str, Any]) -> bool:
    return bool(SPEAKER_KEYS & item.keys()) and bool(TEXT_KEYS & item.keys())


def _holds_conversation(item: dict[str, Any]) -> bool:
    return any(isinstance(item.get(key), list | dict) and item[key] for key in CONVERSATION_KEYS)
