"""Telling a source's format from its content (``fmt="auto"``).

Rules, first match wins (``value`` is the parsed JSON, or the list of records of a JSON Lines file):

1. an object with ``trajectory_format`` starting ``mini-swe-agent`` → ``mini-swe-agent``;
2. an object with a ``history`` array (SWE-agent ``.traj``) → ``swe-agent``;
3. an object with ``answer_generation`` → ``toolbench``;
4. records with ``task_id``, ``trial`` and ``traj`` → ``tau-bench``;
5. records with ``sample_id`` and ``conversation`` → ``locomo``;
6. records with ``id`` and a ``question`` array but no ``role`` / ``messages`` → ``bfcl-memory``;
7. an object with an ``input`` array and no ``messages``, or records among which one is a Responses item (a
   ``type`` of ``function_call``, ``function_call_output``, ``reasoning``, ``compaction`` or ``message``)
   → ``openai-responses``;
8. chat transcripts (an object with ``messages``, or records that are messages or objects with
   ``messages``): ``anthropic-messages`` when they show only Anthropic traits (a top-level ``system``
   or tools with ``input_schema``, ``tool_use`` / ``tool_result`` / ``image`` blocks with a ``source``),
   ``openai-chat`` when they show only OpenAI traits (``system`` / ``developer`` / ``tool`` /
   ``function`` roles, ``tool_calls``, ``function_call``, ``tool_call_id``, ``{"type": "function"}``
   tools, ``image_url`` parts) *or no trait at all* (plain user/assistant string messages read the
   same in both formats).

Anything else, or a transcript with traits of both formats, is ambiguous: ``FormatNotRecognised`` (an
``InputError``) listing the formats to pass as ``fmt``.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from ctxledger.errors import FormatNotRecognised

FORMATS = (
    "anthropic-messages",
    "bfcl-memory",
    "locomo",
    "mini-swe-agent",
    "openai-chat",
    "openai-responses",
    "swe-agent",
    "tau-bench",
    "toolbench",
)
"""Every format name ``parse_file`` accepts (besides ``"auto"``)."""

_OPENAI_ROLES = frozenset({"system", "developer", "tool", "function"})
_OPENAI_KEYS = frozenset({"tool_calls", "function_call", "tool_call_id"})
_ANTHROPIC_BLOCKS = frozenset({"tool_use", "tool_result"})
_RESPONSES_ITEMS = frozenset({"function_call", "function_call_output", "reasoning", "compaction", "message"})


def sniff(value: Any, source: str) -> str:
    """Return the format of a parsed source (rules in the module docstring).

    Raises:
        FormatNotRecognised: the format cannot be told; the message lists the formats.
    """
    if isinstance(value, dict):
        found = _object_format(value)
        if found:
            return found
    records = value if isinstance(value, list) else [value]
    if any(isinstance(r, dict) and r.get("type") in _RESPONSES_ITEMS and "messages" not in r for r in records):
        return "openai-responses"
    first = records[0] if records and isinstance(records[0], dict) else {}
    found = _record_format(first) or _chat_format(value)
    if found:
        return found
    raise FormatNotRecognised(source, FORMATS)


def _object_format(value: Mapping[str, Any]) -> str | None:
    if isinstance(value.get("input"), list) and "messages" not in value:
        return "openai-responses"
    trajectory_format = value.get("trajectory_format")
    if isinstance(trajectory_format, str) and trajectory_format.startswith("mini-swe-agent"):
        return "mini-swe-agent"
    if isinstance(value.get("history"), list):
        return "swe-agent"
    if "answer_generation" in value:
        return "toolbench"
    return None


def _record_format(first: Mapping[str, Any]) -> str | None:
    if {"task_id", "trial", "traj"} <= first.keys():
        return "tau-bench"
    if {"sample_id", "conversation"} <= first.keys():
        return "locomo"
    if "id" in first and isinstance(first.get("question"), list) and not {"role", "messages"} & first.keys():
        return "bfcl-memory"
    return None


def _chat_format(value: Any) -> str | None:
    payloads = list(_payloads(value))
    if not payloads:
        return None
    openai = any(_openai_traits(p) for p in payloads)
    anthropic = any(_anthropic_traits(p) for p in payloads)
    if openai and anthropic:
        return None
    return "anthropic-messages" if anthropic else "openai-chat"


def _payloads(value: Any) -> Iterator[Mapping[str, Any]]:
    """Each conversation as ``{"messages": [...], …}``; nothing when ``value`` is no transcript."""
    if isinstance(value, dict) and isinstance(value.get("messages"), list):
        yield value
    elif isinstance(value, list) and value and all(isinstance(x, dict) for x in value):
        if all("messages" in x and "role" not in x for x in value):
            yield from value
        elif all("role" in x for x in value):
            yield {"messages": value}


def _openai_traits(payload: Mapping[str, Any]) -> bool:
    tools = _list(payload.get("tools")) + _list(payload.get("functions"))
    if any(isinstance(t, dict) and t.get("type") == "function" for t in tools):
        return True
    for msg in _messages(payload):
        if msg.get("role") in _OPENAI_ROLES or _OPENAI_KEYS & msg.keys():
            return True
        if any(_part_type(p) == "image_url" for p in _parts(msg)):
            return True
    return False


def _anthropic_traits(payload: Mapping[str, Any]) -> bool:
    if "system" in payload:
        return True
    if any(isinstance(t, dict) and "input_schema" in t for t in _list(payload.get("tools"))):
        return True
    for msg in _messages(payload):
        for part in _parts(msg):
            if _part_type(part) in _ANTHROPIC_BLOCKS or (_part_type(part) == "image" and "source" in part):
                return True
    return False


def _messages(payload: Mapping[str, Any]) -> Iterator[Mapping[str, Any]]:
    messages = payload.get("messages")
    if isinstance(messages, list):
        yield from (m for m in messages if isinstance(m, dict))


def _parts(msg: Mapping[str, Any]) -> list[Any]:
    return _list(msg.get("content"))


def _list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def _part_type(part: Any) -> Any:
    return part.get("type") if isinstance(part, dict) else None
