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
  "name", "arguments"}`` and ``{"type": "function_call_output", "call_id", "output"}`` (an ``output``
  array of ``input_text`` parts is recorded as their texts joined, as the Responses importer records it; any
  other array as its JSON).

A message keeps its text and, in a user message, its images (an OpenAI ``image_url`` part, a Responses
``input_image`` part, an Anthropic ``image`` block: stored as ``image_url`` parts, in order), as the importers
keep them; a tool result keeps its images as the importers keep them (an Anthropic ``tool_result``'s blocks or a
Responses ``function_call_output``'s parts as their JSON, each image checked first). A part of any other type
(``input_audio``, ``file``, an Anthropic ``thinking`` or ``document`` block, an image in a message that is not
the user's …) is refused naming its ``type`` field, never dropped; the rule and its words are the importers'
(:mod:`ctxledger.serialize.parts`).

A tool call is written as a pending tool exchange named by its call id; its result, in the same request
or a later one, answers it (found by its provider call id). Every message is read and checked
(:func:`read_events`, :func:`check_events`) before anything is written, and the records of one request are
written in one transaction (:func:`write_events` inside :meth:`~ctxledger.recorder.Recorder.atomic`): a bad
message anywhere writes nothing, and the error names its index and field.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ctxledger.errors import InputError
from ctxledger.ingest.openai_responses import output_text
from ctxledger.policy.secrets import SecretScanner, default_scanner
from ctxledger.records import ToolArtifact, ToolCall
from ctxledger.serialize.parts import inline_image_problem, part_problem, sent_part

FORMATS = ("openai-chat", "anthropic-messages", "openai-responses")
"""The message formats ``POST /v1/conversations/{id}/messages`` accepts."""

_ROLES = ("system", "developer", "user", "assistant")

_TEXT_PARTS = ("text", "input_text", "output_text")
"""Part (block) types whose ``text`` is recorded: Chat Completions, Responses input and output, Anthropic."""

_REASONING_BLOCKS = ("thinking", "redacted_thinking")
"""Anthropic reasoning blocks: refused with what records them instead."""

_IMAGE_PARTS = ("image_url", "input_image", "image")
"""Image part types of the three formats: kept in a user message (as ``image_url`` parts), refused elsewhere."""


@dataclass(frozen=True, slots=True)
class Said:
    """A message of ``role``: its text, or (a user message with images) its text and image parts.

    ``index`` is its message's position in the request, ``where`` the field.
    """

    role: str
    text: str | tuple[Mapping[str, Any], ...]
    index: int | None = None
    where: str = ""


@dataclass(frozen=True, slots=True)
class Called:
    """A tool call the model made (``arguments`` as the JSON text or a mapping)."""

    call_id: str
    tool: str
    arguments: Mapping[str, Any] | str
    text: str | None = None
    index: int | None = None
    where: str = ""


@dataclass(frozen=True, slots=True)
class Answered:
    """A tool call's result (``failed`` when the provider marked it an error)."""

    call_id: str
    output: str
    failed: bool = False
    index: int | None = None
    where: str = ""


Event = Said | Called | Answered


def _at(index: int, field: str) -> str:
    return f"messages[{index}].{field}" if field else f"messages[{index}]"


def _bad(problem: str, index: int, field: str) -> InputError:
    return InputError(problem, source="<api>", index=index, field=_at(index, field))


def _text(content: Any, index: int, field: str = "content", *, refusal: bool = False) -> str:
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(_part_text(part, index, f"{field}[{j}]", refusal) for j, part in enumerate(content))
    raise _bad("content must be a string or a list of parts", index, field)


def _part_text(part: Any, index: int, field: str, refusal: bool = False) -> str:
    """The text of one text part at ``field``; any other part is refused (never dropped), naming its type.

    With ``refusal`` (an assistant message) a ``refusal`` part's text is kept as text, as the importers keep it.
    """
    if not isinstance(part, Mapping):
        raise _bad("a content part must be an object", index, field)
    if refusal and part.get("type") == "refusal":
        if not isinstance(part.get("refusal"), str):
            raise _bad("a refusal part needs a string 'refusal'", index, f"{field}.refusal")
        return str(part["refusal"])
    if part.get("type") not in _TEXT_PARTS:
        raise _bad(_not_text(part), index, f"{field}.type")
    if not isinstance(part.get("text"), str):
        raise _bad("a text part needs a string 'text'", index, f"{field}.text")
    return str(part["text"])


def _user_content(content: Any, index: int) -> str | tuple[dict[str, Any], ...]:
    """A user message's content (a string or a list of parts) as :func:`_user_parts` keeps it.

    Raises:
        InputError: see :func:`_user_parts`; also content that is neither a string nor a list.
    """
    if not isinstance(content, list):
        return _text(content, index)
    return _user_parts(list(enumerate(content)), index)


def _user_parts(parts: Sequence[tuple[int, Any]], index: int) -> str | tuple[dict[str, Any], ...]:
    """The text of ``(j, part)`` pairs joined by newlines, or text and image parts in order when one is an image.

    Raises:
        InputError: a part other than text or an image, or an image no format can send, naming
            ``messages[i].content[j].<field>`` in the request's own terms.
    """
    kept: list[dict[str, Any]] = []
    for j, part in parts:
        field = f"content[{j}]"
        if isinstance(part, Mapping) and part.get("type") in _IMAGE_PARTS:
            kept.append(_kept_image(part, index, field))
        else:
            kept.append({"type": "text", "text": _part_text(part, index, field)})
    if all(p["type"] == "text" for p in kept):
        return "\n".join(p["text"] for p in kept)
    return tuple(kept)


def _kept_image(part: Mapping[str, Any], index: int, field: str) -> dict[str, Any]:
    """An image part of any of the three formats as the ``image_url`` part a message keeps.

    Raises:
        InputError: the rule of :mod:`ctxledger.serialize.parts` refuses it (an empty URL, an unknown detail,
            base64 that is not base64), naming the format's own field (``image_url.url``, ``detail``, ``source``).
    """
    kind = part.get("type")
    names: dict[str | None, str] = {}
    if kind == "image":  # Anthropic: {"source": {"type": "base64", "media_type", "data"} | {"type": "url", "url"}}
        image: Any = {"url": _anthropic_url(part.get("source"))}
        names = {"image_url.url": "source"}
    elif kind == "input_image":  # Responses: {"image_url": str, "detail"?}
        image = {"url": part.get("image_url"), "detail": part.get("detail") or "auto"}
        names = {"image_url.url": "image_url", "image_url.detail": "detail"}
    else:
        image = part.get("image_url")
    kept = {"type": "image_url", "image_url": image}
    problem = part_problem(kept) or inline_image_problem(kept)
    if problem is not None:
        raise _bad(problem.problem, index, f"{field}.{names.get(problem.field, problem.field)}")
    return sent_part(kept)


def _result_content(blocks: Any, index: int, field: str) -> str:
    """An Anthropic ``tool_result``'s block list as recorded, as the Anthropic importer records it.

    Text blocks alone: their texts joined by newlines. With an image block: the blocks' JSON, each image checked by
    :func:`_kept_image` (a screenshot tool's image is later sent as an image where the provider takes one).

    Raises:
        InputError: a block other than text or an image, or an image no format can send, naming ``field[k]``.
    """
    if not (isinstance(blocks, list) and any(isinstance(b, Mapping) and b.get("type") == "image" for b in blocks)):
        return _text(blocks, index, field)
    for k, block in enumerate(blocks):
        if isinstance(block, Mapping) and block.get("type") == "image":
            _kept_image(block, index, f"{field}[{k}]")
        else:
            _part_text(block, index, f"{field}[{k}]")
    return json.dumps(blocks, ensure_ascii=False)


def _anthropic_url(source: Any) -> str | None:
    """The URL of an Anthropic image ``source``: a ``data:`` URL for base64, the URL itself for ``url``."""
    if not isinstance(source, Mapping):
        return None
    if source.get("type") == "base64" and isinstance(source.get("media_type"), str):
        data = source.get("data")
        return f"data:{source['media_type']};base64,{data}" if isinstance(data, str) else None
    url = source.get("url") if source.get("type") == "url" else None
    return url if isinstance(url, str) else None


def _not_text(part: Mapping[str, Any]) -> str:
    """Why a part is refused where only text is recorded: an image outside a user message, or the importers' rule."""
    kind = part.get("type")
    if kind in _IMAGE_PARTS:
        return f"{kind!r} parts are kept in user messages only, as the providers take images"
    if kind in _REASONING_BLOCKS:
        return (
            f"{kind!r} blocks are not recorded here (this endpoint writes each tool_use as its own exchange, and "
            "a provider takes reasoning back only with the turn it came with): import the conversation (the "
            "Anthropic importer keeps it with its turn) or record the turn with Recorder.tool_calls(thinking=...)"
        )
    problem = part_problem(part)
    return problem.problem if problem is not None else f"unsupported content part type {kind!r}"


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
            events.append(Answered(call_id, _text(msg.get("content"), i), index=i, where=_at(i, "tool_call_id")))
            continue
        calls = msg.get("tool_calls") or []
        if calls and role != "assistant":
            raise _bad("only assistant messages carry tool_calls", i, "tool_calls")
        content = msg.get("content")
        text = _user_content(content, i) if role == "user" else _text(content, i, refusal=role == "assistant")
        if not isinstance(calls, list):
            raise _bad("tool_calls must be a list", i, "tool_calls")
        if not calls:
            events.append(Said(role, text, index=i, where=_at(i, "content")))
        for j, call in enumerate(calls):
            fn = call.get("function") if isinstance(call, Mapping) else None
            if not isinstance(fn, Mapping) or not isinstance(fn.get("name"), str) or not call.get("id"):
                raise _bad("a tool call needs an id and a function name", i, f"tool_calls[{j}]")
            args = fn.get("arguments") or "{}"
            where = _at(i, f"tool_calls[{j}]")
            events.append(Called(str(call["id"]), fn["name"], args, text if j == 0 else None, index=i, where=where))
    return events


def _anthropic(messages: Sequence[Mapping[str, Any]], system: Any) -> list[Event]:
    events: list[Event] = []
    if system:
        if not isinstance(system, str | list):
            raise InputError("system must be a string or a list of text blocks", source="<api>", field="system")
        try:
            said = _text(system, -1, "system")
        except InputError as exc:
            raise InputError(exc.problem, source="<api>", field=str(exc.field).removeprefix("messages[-1].")) from None
        events.append(Said("system", said, where="system"))
    for i, msg in enumerate(messages):
        role = _role(msg, i, ("user", "assistant"))
        content = msg.get("content")
        if isinstance(content, str):
            events.append(Said(role, content, index=i, where=_at(i, "content")))
            continue
        if not isinstance(content, list):
            raise _bad("content must be a string or a list of blocks", i, "content")
        said = ("text", "image") if role == "user" else ("text",)
        shown = [(j, b) for j, b in enumerate(content) if isinstance(b, Mapping) and b.get("type") in said]
        if shown:
            events.append(Said(role, _user_parts(shown, i), index=i, where=_at(i, "content")))
        for j, block in enumerate(content):
            kind = block.get("type") if isinstance(block, Mapping) else None
            if kind not in (*said, "tool_use", "tool_result"):
                _part_text(block, i, f"content[{j}]")  # refuses it, naming the block, as any other part
            if kind == "tool_use":
                if role != "assistant" or not block.get("id") or not isinstance(block.get("name"), str):
                    raise _bad("a tool_use block needs an id and a name, in an assistant turn", i, f"content[{j}]")
                args = block.get("input") or {}
                if not isinstance(args, Mapping):
                    raise _bad("a tool_use block's input must be an object", i, f"content[{j}].input")
                where = _at(i, f"content[{j}]")
                events.append(Called(str(block["id"]), block["name"], dict(args), index=i, where=where))
            elif kind == "tool_result":
                if not block.get("tool_use_id"):
                    raise _bad("a tool_result block needs its tool_use_id", i, f"content[{j}].tool_use_id")
                inner = block.get("content")
                out = inner if isinstance(inner, str) else _result_content(inner, i, f"content[{j}].content")
                where = _at(i, f"content[{j}].tool_use_id")
                events.append(Answered(str(block["tool_use_id"]), out, bool(block.get("is_error")), i, where))
    return events


def _responses(items: Sequence[Mapping[str, Any]]) -> list[Event]:
    events: list[Event] = []
    for i, item in enumerate(items):
        kind = item.get("type", "message")
        if kind == "message":
            role = _role(item, i, _ROLES)
            raw = item.get("content")
            content = _user_content(raw, i) if role == "user" else _text(raw, i, refusal=role == "assistant")
            events.append(Said(role, content, index=i, where=_at(i, "content")))
        elif kind == "function_call":
            if not item.get("call_id") or not isinstance(item.get("name"), str):
                raise _bad("a function_call needs a call_id and a name", i, "call_id")
            args = item.get("arguments") or "{}"
            events.append(Called(str(item["call_id"]), item["name"], args, index=i, where=_at(i, "call_id")))
        elif kind == "function_call_output":
            if not item.get("call_id"):
                raise _bad("a function_call_output needs its call_id", i, "call_id")
            out = item.get("output")
            for k, part in enumerate(out if isinstance(out, list) else ()):
                if isinstance(part, Mapping) and part.get("type") == "input_image":
                    _kept_image(part, i, f"output[{k}]")  # sent as an image later: refused here if no format can
            joined = output_text(out) if isinstance(out, list) else None
            text = out if isinstance(out, str) else joined if joined is not None else json.dumps(out)
            events.append(Answered(str(item["call_id"]), text, index=i, where=_at(i, "call_id")))
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


def check_events(events: Sequence[Event], recorder: Any, scanner: SecretScanner | None = None) -> None:
    """Check ``events`` against each other and against the conversation ``recorder`` knows, before any write.

    A text must not be empty; a call id must be new to the conversation and to the request, and neither it
    nor the tool's name may hold a secret (ids are stored in every manifest); arguments are a mapping or
    JSON text; a result must answer a call of the request or an unanswered call of the conversation, once.

    Raises:
        InputError: names ``messages[i].<field>`` (or ``system``) of the first event at fault.
    """
    scanner = scanner or default_scanner()
    known = list(recorder.records.values())
    answered = {r.tool_call_id for r in known if isinstance(r, ToolArtifact)}
    used = {r.call_id for r in known if isinstance(r, ToolCall)}
    open_calls = {r.call_id for r in known if isinstance(r, ToolCall) and r.id not in answered}
    taken_ids = set(recorder.records)
    for event in events:
        if isinstance(event, Said):
            if not event.text:
                raise _fault(event, "a message needs some text (an empty message cannot be recorded)")
            continue
        if not event.call_id.strip():
            raise _fault(event, "a call id must not be blank")
        where = event.where
        if isinstance(event, Called):
            names = (event.call_id, f"{event.call_id}#call", f"art-{event.call_id}")
            if event.call_id in used or any(recorder.id(n) in taken_ids for n in names):
                raise _fault(event, f"call id {event.call_id!r} is already used in this conversation")
            if not event.tool:
                raise _fault(event, "a tool call needs its tool's name")
            if not isinstance(event.arguments, Mapping | str):
                raise _fault(event, "arguments must be an object or the JSON text the model produced")
            for value, what in ((event.call_id, "call id"), (event.tool, "tool name")):
                hits = scanner.scan(value)
                if hits:
                    kinds = ", ".join(sorted({h.type for h in hits}))
                    raise _fault(event, f"the {what} holds a secret ({kinds}); it would be stored in every manifest")
            used.add(event.call_id)
            open_calls.add(event.call_id)
            taken_ids.update(recorder.id(n) for n in names[:2])
            continue
        if event.call_id not in open_calls:
            state = "already has a result" if event.call_id in used else "names no tool call"
            raise InputError(
                f"call id {event.call_id!r} {state} in this conversation or earlier in the request",
                source="<api>",
                index=event.index,
                field=where,
            )
        if recorder.id(f"art-{event.call_id}") in taken_ids:
            raise _fault(event, f"the result record art-{event.call_id} already exists in this conversation")
        open_calls.discard(event.call_id)
        taken_ids.add(recorder.id(f"art-{event.call_id}"))


def _fault(event: Event, problem: str) -> InputError:
    return InputError(problem, source="<api>", index=event.index, field=event.where or None)


def write_events(recorder: Any, events: Sequence[Event]) -> list[str]:
    """Write ``events`` with ``recorder``; return the ids of the records written, in order.

    Call it inside :meth:`~ctxledger.recorder.Recorder.atomic` to store them in one transaction.

    Raises:
        InputError: the recorder refused an event: names that event's ``messages[i].<field>``.
    """
    written: list[str] = []
    for event in events:
        try:
            written.extend(_write(recorder, event))
        except InputError as exc:
            raise _fault(event, exc.problem) from exc
    return written


def _write(recorder: Any, event: Event) -> list[str]:
    if isinstance(event, Said):
        return [getattr(recorder, event.role)(event.text)]
    if isinstance(event, Called):
        exchange = recorder.tool_call(
            event.tool, event.arguments, None, name=event.call_id, call_id=event.call_id, text=event.text
        )
        return [str(x) for x in _ids(exchange)]
    call = _open_call(recorder, event.call_id)
    status = "failed" if event.failed else "succeeded"
    return [recorder.tool_result(call, event.output, status=status, name=f"art-{event.call_id}")]


def _open_call(recorder: Any, call_id: str) -> str:
    """The record id of the conversation's unanswered tool call with provider call id ``call_id``."""
    answered = {r.tool_call_id for r in recorder.records.values() if isinstance(r, ToolArtifact)}
    for rec in reversed(list(recorder.records.values())):
        if isinstance(rec, ToolCall) and rec.call_id == call_id and rec.id not in answered:
            return str(rec.id)
    return call_id


def _ids(exchange: Any) -> list[str]:
    if isinstance(exchange, str):
        return [exchange]
    return [v for v in (getattr(exchange, n, None) for n in ("message", "call", "artifact")) if v]
