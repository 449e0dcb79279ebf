"""Importer for OpenAI Responses histories (format ``"openai-responses"``).

Input shapes: a request-like object ``{"instructions"?, "input": [items] | "text", "tools"?, "output"?}``
(``output``: the items of the response to that request, appended after ``input``), or a JSON array of input
items. Items follow the ``POST /v1/responses`` input reference:

* ``instructions`` → a system ``Message`` first;
* ``message`` items (also the short form without ``type``): roles ``system`` / ``developer`` / ``user`` /
  ``assistant``; ``input_text`` / ``output_text`` parts become text, ``input_image`` parts ``image_url``
  parts; an assistant message's text parts are joined into its text (annotations are not kept); a part of
  another type (``input_audio``, ``input_file`` …) is refused, naming ``content[k].type``
  (:mod:`ctxledger.serialize.parts`: a message keeps the parts every format sends back);
* the consecutive assistant output items of one turn (``reasoning``, ``compaction``, assistant ``message``,
  ``function_call``) become one assistant ``Message`` with one ``ToolCall`` per ``function_call`` (``index``
  = position among the parallel calls); its ``reasoning`` and ``compaction`` items go to
  ``meta["thinking"]`` as received (encrypted content included, never read) with their positions among the
  turn's items in ``meta["thinking_at"]``, so the Responses serializer sends them back where they were,
  pinned to their calls, and the other serializers leave them out;
* ``function_call_output`` → a ``ToolArtifact``: a string output as is; an array of ``input_text`` parts as
  their texts joined; an array holding ``input_image`` or ``input_file`` parts as the array's JSON
  (``application/json``, ``meta["responses_parts"]``), the representation the Anthropic importer gives a
  ``tool_result`` with image blocks, so the assembler sends an inline image as an image
  (:mod:`ctxledger.serialize.tool_images`). An image or file given only by ``file_id`` (its bytes live on
  OpenAI's servers), a ``data:`` URL whose base64 is not base64, and a part of another type are refused,
  naming ``output[k]`` and the field;
* function tools (``{"type": "function", "name", "parameters", …}``) → one ``SkillState``.

An item of another type (a hosted tool's call, an ``item_reference`` …) is an ``InputError`` naming the
item index and ``type``: its content lives on OpenAI's servers, and the history is kept client-side.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from ctxledger.ingest._batch import ImportBatch
from ctxledger.ingest._builder import ConversationBuilder, ParseOptions
from ctxledger.ingest._chat import ChatMapper
from ctxledger.ingest._fields import Loc, as_object, json_type, optional, require
from ctxledger.ingest._load import Loaded
from ctxledger.ingest._tools import ToolSet, openai_tools
from ctxledger.serialize.images import base64_problem, parse_data_url
from ctxledger.serialize.parts import inline_image_problem, part_problem

FORMAT = "openai-responses"

OUTPUT_ITEM_TYPES = frozenset({"reasoning", "compaction", "function_call"})
"""Item types that belong to the assistant turn they are part of (with assistant messages)."""

_OPAQUE = ("reasoning", "compaction")
_PAYLOAD_KEYS = frozenset({"input", "output", "instructions", "tools"})
_PART_MAP = {"input_text": "text", "output_text": "text"}
_FILE_KEYS = ("file_data", "file_url")
"""The keys of an ``input_file`` part that hold the file itself (its bytes or where to get them)."""
_BY_FILE_ID = "{} given only by file id is not kept (its bytes live on OpenAI's servers, the history is client-side)"


def parse(loaded: Loaded, options: ParseOptions) -> ImportBatch:
    """Parse an OpenAI Responses history (see the module docstring).

    Raises:
        InputError: bad input (names file, item index and field); nothing is returned.
    """
    value = loaded.value
    source = options.source
    if isinstance(value, list):
        payload: Mapping[str, Any] = {"input": value}
    elif isinstance(value, dict):
        payload = value
    else:
        raise Loc(source).error(f"expected an array of input items or an object with 'input', got {json_type(value)}")
    items = _items(payload, Loc(source))
    meta = {k: v for k, v in payload.items() if k not in _PAYLOAD_KEYS}
    builder = ConversationBuilder(options.single_id(), options, FORMAT, meta=meta)
    tools = _tools(payload.get("tools"), Loc(source).child("tools")) if payload.get("tools") is not None else None
    mapper = ChatMapper(builder, tools=tools, tools_loc=Loc(source))
    instructions = optional(payload, "instructions", str, Loc(source), "a string")
    if instructions:
        mapper.feed({"role": "system", "content": instructions}, Loc(source, None, "instructions."))
    for message, loc in chat_messages(items, source):
        mapper.feed(message, loc)
    mapper.close()
    return ImportBatch(source=source, format=FORMAT, conversations=[builder.finish()])


def _items(payload: Mapping[str, Any], top: Loc) -> list[Any]:
    """``input`` (a string is one user message) followed by ``output``."""
    raw = payload.get("input")
    if isinstance(raw, str):
        raw = [{"role": "user", "content": raw}]
    elif not isinstance(raw, list):
        raise top.error(f"expected 'input' to be an array of items or a string, got {json_type(raw)}", "input")
    output = optional(payload, "output", list, top, "an array of output items", default=[])
    return [*raw, *output]


def chat_messages(items: list[Any], source: str) -> list[tuple[dict[str, Any], Loc]]:
    """Chat-form messages (with their item locations) for the Responses items, assistant turns grouped."""
    out: list[tuple[dict[str, Any], Loc]] = []
    group: list[tuple[Mapping[str, Any], Loc]] = []
    for j, raw in enumerate(items):
        loc = Loc(source, j)
        item = as_object(raw, loc, "an input item object")
        kind = optional(item, "type", str, loc, "a string", default="message")
        role = item.get("role") if kind == "message" else None
        if kind in OUTPUT_ITEM_TYPES or role == "assistant":
            group.append((item, loc))
            continue
        if group:
            out.append(_assistant(group))
            group = []
        if kind == "message":
            out.append((_message(item, loc), loc))
        elif kind == "function_call_output":
            out.append((_output(item, loc), loc))
        else:
            raise loc.error(
                f"unsupported item type {kind!r}: the history must be client-side items (message, reasoning, "
                "compaction, function_call, function_call_output)",
                "type",
            )
    if group:
        out.append(_assistant(group))
    return out


def _message(item: Mapping[str, Any], loc: Loc) -> dict[str, Any]:
    role = require(item, "role", str, loc, "a string")
    if role not in ("system", "developer", "user"):
        raise loc.error(f"unknown role {role!r}; expected system, developer, user or assistant", "role")
    return {"role": role, "content": _content(item, loc)}


def _content(item: Mapping[str, Any], loc: Loc) -> Any:
    content = item.get("content")
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        raise loc.error(f"expected a string or an array of content parts, got {json_type(content)}", "content")
    parts = []
    for k, raw in enumerate(content):
        ploc = loc.child(f"content[{k}]")
        part = as_object(raw, ploc, "a content part object")
        kind = require(part, "type", str, ploc, "a string")
        if kind in _PART_MAP:
            parts.append({"type": "text", "text": require(part, "text", str, ploc, "a string")})
        elif kind == "input_image":
            parts.append(_image_part(part, ploc))
        elif kind == "refusal":
            parts.append({"type": "text", "text": require(part, "refusal", str, ploc, "a string")})
        else:
            raise ploc.error(f"unsupported content part type {kind!r}", "type")
    return parts


def _image_part(part: Mapping[str, Any], loc: Loc) -> dict[str, Any]:
    """An ``input_image`` part as the ``image_url`` part a message keeps.

    Raises:
        InputError: no ``image_url`` string, an empty one, a ``data:`` URL whose base64 is not base64, or a
            ``detail`` other than low, high or auto (:mod:`ctxledger.serialize.parts`; names ``image_url`` or
            ``detail``).
    """
    url = require(part, "image_url", str, loc, "a URL string (file ids are not supported)")
    kept = {"type": "image_url", "image_url": {"url": url, "detail": part.get("detail") or "auto"}}
    problem = part_problem(kept) or inline_image_problem(kept)
    if problem is not None:
        raise loc.error(problem.problem, "detail" if problem.field == "image_url.detail" else "image_url")
    return kept


def _assistant(group: list[tuple[Mapping[str, Any], Loc]]) -> tuple[dict[str, Any], Loc]:
    """One assistant turn from its output items: text, tool calls and its opaque reasoning items."""
    first = group[0][1]
    texts: list[str] = []
    calls: list[dict[str, Any]] = []
    thinking: list[dict[str, Any]] = []
    thinking_at: list[int] = []
    external_id = None
    for position, (item, loc) in enumerate(group):
        kind = item.get("type", "message")
        if kind in _OPAQUE:
            if kind == "compaction":
                require(item, "encrypted_content", str, loc, "a string")
            thinking.append(dict(item))
            thinking_at.append(position)
        elif kind == "function_call":
            calls.append(
                {
                    "id": require(item, "call_id", str, loc, "a string"),
                    "type": "function",
                    "function": {
                        "name": require(item, "name", str, loc, "a string"),
                        "arguments": require(item, "arguments", str, loc, "a JSON string"),
                    },
                }
            )
        else:
            content = _content(item, loc)
            texts.append(content if isinstance(content, str) else "".join(p.get("text", "") for p in content))
            external_id = external_id or item.get("id")
    if not texts and not calls:
        raise first.error("reasoning items must be followed by the assistant output they belong to", "type")
    message: dict[str, Any] = {"role": "assistant", "content": "\n".join(texts) if texts else None}
    if calls:
        message["tool_calls"] = calls
    if thinking:
        message["thinking"] = thinking
        message["thinking_at"] = thinking_at
    if isinstance(external_id, str):
        message["id"] = external_id
    return message, first


def _output(item: Mapping[str, Any], loc: Loc) -> dict[str, Any]:
    """A chat-form ``tool`` message for a ``function_call_output`` (module docstring: text, or the parts' JSON)."""
    call_id = require(item, "call_id", str, loc, "a string")
    output = item.get("output")
    message: dict[str, Any] = {"role": "tool", "tool_call_id": call_id}
    if isinstance(output, str):
        return message | {"content": output}
    if not isinstance(output, list):
        raise loc.error(f"expected a string or an array of parts, got {json_type(output)}", "output")
    for k, part in enumerate(output):
        _output_part(part, loc.child(f"output[{k}]"))
    text = output_text(output)
    if text is not None:
        return message | {"content": text}
    return message | {"content": json.dumps(output, ensure_ascii=False), "responses_parts": True}


def output_text(output: Sequence[Any]) -> str | None:
    """The text of a ``function_call_output`` array made only of ``input_text`` parts (joined), else ``None``.

    ``output`` is the item's ``output`` array as the OpenAI Responses API documents it (``input_text``,
    ``input_image``, ``input_file`` parts); the parts' texts are joined with no separator.

    Such an output is recorded as that text; an array holding images or files is recorded as its JSON.
    """
    texts = [p.get("text") for p in output if isinstance(p, Mapping) and p.get("type") == "input_text"]
    if len(texts) != len(output) or not all(isinstance(t, str) for t in texts):
        return None
    return "".join(texts)


def _output_part(part: Any, loc: Loc) -> str:
    """The type of one part of a ``function_call_output`` array, after checking it can be kept.

    Raises:
        InputError: not an object, a type other than ``input_text`` / ``input_image`` / ``input_file``, a text
            that is not a string, an image without an ``image_url`` string or whose ``data:`` URL is not base64,
            or a file with neither ``file_data`` nor ``file_url`` (names ``output[k]`` and the field).
    """
    part = as_object(part, loc, "a content part object")
    kind: str = require(part, "type", str, loc, "a string")
    if kind == "input_text":
        require(part, "text", str, loc, "a string")
    elif kind == "input_image":
        if part.get("image_url") is None:
            what = _BY_FILE_ID.format("an image")
            raise loc.error(f"expected 'image_url' (a data: URL or a URL): {what}", "image_url")
        url = require(part, "image_url", str, loc, "a URL string")
        data_url = parse_data_url(url)
        if data_url is not None and (problem := base64_problem(data_url.data)) is not None:
            raise loc.error(problem, "image_url")
    elif kind == "input_file":
        if not any(isinstance(part.get(key), str) for key in _FILE_KEYS):
            what = _BY_FILE_ID.format("a file")
            raise loc.error(f"expected 'file_data' or 'file_url' (a string): {what}", "file_data")
    else:
        raise loc.error(f"unsupported output part type {kind!r} (input_text, input_image, input_file)", "type")
    return kind


def _tools(value: Any, loc: Loc) -> ToolSet:
    """Responses function tools as OpenAI ``tools`` entries."""
    if not isinstance(value, list):
        raise loc.error(f"expected an array of tools, got {json_type(value)}")
    chat = []
    for k, raw in enumerate(value):
        tloc = Loc(loc.source, loc.index, f"tools[{k}].")
        tool = as_object(raw, tloc, "a tool object")
        if tool.get("type") != "function":
            raise tloc.error(f"unsupported tool type {tool.get('type')!r} (only 'function')", "type")
        function = {key: tool[key] for key in ("name", "description", "parameters", "strict") if key in tool}
        chat.append({"type": "function", "function": function})
    return openai_tools(chat, Loc(loc.source, loc.index, "tools."))
