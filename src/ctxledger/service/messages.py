"""Provider-format messages appended to a conversation: OpenAI Chat, Anthropic Messages, OpenAI Responses.

Each format is read into the same small events, then written with a
:class:`~ctxledger.recorder.Recorder`, which continues an existing conversation (numbering goes on) or
starts a new one:

* ``openai-chat``: ``{"role": "system"|"developer"|"user"|"assistant"|"tool", "content", "tool_calls",
  "tool_call_id"}`` (Chat Completions API, "messages");
* ``anthropic-messages``: ``{"role": "user"|"assistant", "content": str | blocks}`` with ``text``,
  ``tool_use`` and ``tool_result`` blocks, and the request's ``system`` (Messages API);
* ``openai-responses``: Responses API input items: ``{"type": "message", "role", "content": str | parts}``
  (``input_text``/``output_text`` parts; ``type`` may be omitted), ``{"type": "function_call", "call_id",
  "name", "arguments"}`` and ``{"type": "function_call_output", "call_id", "output"}``.

A tool call is written as a pending tool exchange named by its call id; its result, in the same request
or a later one, answers it. Every message is read and checked before anything is written.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ctxledger.errors import InputError

FORMATS = ("openai-chat", "anthropic-messages", "openai-responses")
"""The message formats ``POST /v1/conversations/{id}/messages`` accepts."""

_ROLES = ("system", "developer", "user", "assistant")


@dataclass(frozen=True, slots=True)
class Said:
    """A text message of ``role``."""

    role: str
    text: str


@dataclass(frozen=True, slots=True)
class Called:
    """A tool call the model made (``arguments`` as the JSON text or a mapping)."""

    call_id: str
    tool: str
    arguments: Mapping[str, Any] | str
    text: str | None = None


@dataclass(frozen=True, slots=True)
class Answered:
    """A tool call's result (``failed`` when the provider marked it an error)."""

    call_id: str
    output: str
    failed: bool = False


Event = Said | Called | Answered


def _bad(problem: str, index: int, field: str) -> InputError:
    return InputError(problem, source="<api>", index=index, field=f"messages[{index}].{field}")


def _text(content: Any, index: int, field: str = "content") -> str:
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = []
        for j, part in enumerate(content):
            if not isinstance(part, Mapping):
                raise _bad("a content part must be an object", index, f"{field}[{j}]")
            if part.get("type") in ("text", "input_text", "output_text"):
                if not isinstance(part.get("text"), str):
                    raise _bad("a text part needs a string 'text'", index, f"{field}[{j}].text")
                parts.append(part["text"])
        return "\n".join(parts)
    raise _bad("content must be a string or a list of parts", index, field)


def _role(msg: Mapping[str, Any], index: int, allowed: Sequence[str]) -> str:
    role = msg.get("role")
    if role not in allowed:
        raise _bad(f"role must be one of {', '.join(allowed)}, got {role!r}", index, "role")
    return str(role)


def _openai_chat(messages: Sequence[Mapping[str, Any]]) -> list[Event]:
    events: list[Event] = []
    for i, msg in enumerate(messages):
        role = _role(msg, i, (*_ROLES, "tool"))
        if role == "tool":
            call_id = msg.get("tool_call_id")
            if not isinstance(call_id, str) or not call_id:
                raise _bad("a tool message needs its tool_call_id", i, "tool_call_id")
            events.append(Answered(call_id, _text(msg.get("content"), i)))
            continue
        calls = msg.get("tool_calls") or []
        if calls and role != "assistant":
            raise _bad("only assistant messages carry tool_calls", i, "tool_calls")
        text = _text(msg.get("content"), i)
        if not calls:
            events.append(Said(role, text))
        for j, call in enumerate(calls):
            fn = call.get("function") if isinstance(call, Mapping) else None
            if not isinstance(fn, Mapping) or not isinstance(fn.get("name"), str) or not call.get("id"):
                raise _bad("a tool call needs an id and a function name", i, f"tool_calls[{j}]")
            events.append(Called(str(call["id"]), fn["name"], fn.get("arguments") or "{}", text if j == 0 else None))
    return events


def _anthropic(messages: Sequence[Mapping[str, Any]], system: Any) -> list[Event]:
    events: list[Event] = []
    if system:
        events.append(Said("system", _text(system, -1, "system")))
    for i, msg in enumerate(messages):
        role = _role(msg, i, ("user", "assistant"))
        content = msg.get("content")
        if isinstance(content, str):
            events.append(Said(role, content))
            continue
        if not isinstance(content, list):
            raise _bad("content must be a string or a list of blocks", i, "content")
        texts = [b for b in content if isinstance(b, Mapping) and b.get("type") == "text"]
        if texts:
            events.append(Said(role, _text(texts, i)))
        for j, block in enumerate(content):
            kind = block.get("type") if isinstance(block, Mapping) else None
            if kind == "tool_use":
                if role != "assistant" or not block.get("id") or not isinstance(block.get("name"), str):
                    raise _bad("a tool_use block needs an id and a name, in an assistant turn", i, f"content[{j}]")
                events.append(Called(str(block["id"]), block["name"], dict(block.get("input") or {})))
            elif kind == "tool_result":
                if not block.get("tool_use_id"):
                    raise _bad("a tool_result block needs its tool_use_id", i, f"content[{j}].tool_use_id")
                inner = block.get("content")
                out = inner if isinstance(inner, str) else _text(inner, i, f"content[{j}].content")
                events.append(Answered(str(block["tool_use_id"]), out, bool(block.get("is_error"))))
    return events


def _responses(items: Sequence[Mapping[str, Any]]) -> list[Event]:
    events: list[Event] = []
    for i, item in enumerate(items):
        kind = item.get("type", "message")
        if kind == "message":
            events.append(Said(_role(item, i, _ROLES), _text(item.get("content"), i)))
        elif kind == "function_call":
            if not item.get("call_id") or not isinstance(item.get("name"), str):
                raise _bad("a function_call needs a call_id and a name", i, "call_id")
            events.append(Called(str(item["call_id"]), item["name"], item.get("arguments") or "{}"))
        elif kind == "function_call_output":
            if not item.get("call_id"):
                raise _bad("a function_call_output needs its call_id", i, "call_id")
            out = item.get("output")
            events.append(Answered(str(item["call_id"]), out if isinstance(out, str) else json.dumps(out)))
        else:
            raise _bad(f"unsupported item type {kind!r} (message, function_call, function_call_output)", i, "type")
    return events


def read_events(fmt: str, messages: Sequence[Mapping[str, Any]], system: Any = None) -> list[Event]:
    """Read ``messages`` of format ``fmt`` (one of :data:`FORMATS`) into events, checking every field.

    Raises:
        InputError: names ``messages[i].<field>`` of the first message at fault; nothing was written.
    """
    for i, msg in enumerate(messages):
        if not isinstance(msg, Mapping):
            raise _bad("a message must be an object", i, "")
    if system is not None and fmt != "anthropic-messages":
        raise InputError(
            "system is for anthropic-messages; the other formats carry it as a message", source="<api>", field="system"
        )
    if fmt == "openai-chat":
        return _openai_chat(messages)
    if fmt == "anthropic-messages":
        return _anthropic(messages, system)
    if fmt == "openai-responses":
        return _responses(messages)
    raise InputError(f"format must be one of {', '.join(FORMATS)}", source="<api>", field="format")


def write_events(recorder: Any, events: Sequence[Event]) -> list[str]:
    """Write ``events`` with ``recorder``; return the ids of the records written, in order.

    Raises:
        InputError: a result for a call the conversation does not hold, or a call id used twice.
    """
    written: list[str] = []
    for event in events:
        if isinstance(event, Said):
            written.append(getattr(recorder, event.role)(event.text))
        elif isinstance(event, Called):
            exchange = recorder.tool_call(
                event.tool, event.arguments, None, name=event.call_id, call_id=event.call_id, text=event.text
            )
            written.extend(str(x) for x in _ids(exchange))
        else:
            status = "failed" if event.failed else "succeeded"
            art = f"art-{event.call_id}"
            written.append(recorder.tool_result(event.call_id, event.output, status=status, name=art))
    return written


def _ids(exchange: Any) -> list[str]:
    if isinstance(exchange, str):
        return [exchange]
    return [v for v in (getattr(exchange, n, None) for n in ("message", "call", "artifact")) if v]
