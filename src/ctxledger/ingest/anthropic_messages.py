"""Importer for Anthropic Messages transcripts (format ``"anthropic-messages"``).

Follows the Anthropic Messages API request shape: ``{system?, tools?, messages: [{role: "user" |
"assistant", content: string | blocks}]}`` (container shapes: :mod:`ctxledger.ingest._shapes`).
Mapping:

* top-level ``system`` (a string or text blocks) → a ``system`` Message first; ``tools``
  (``{name, description, input_schema}``) → a ``SkillState`` in OpenAI form right after it;
* assistant ``text`` blocks → the Message content (one block → a string, several → text parts),
  ``tool_use`` blocks → ``ToolCall`` records (``arguments = json.dumps(input)``; index = position among
  the message's ``tool_use`` blocks); ``thinking`` / ``redacted_thinking`` blocks → ``meta["thinking"]`` (as
  received, signature included) and their positions in the content array → ``meta["thinking_at"]``
  (Anthropic payloads send them back there, see :mod:`ctxledger.serialize.anthropic_messages`);
* user ``tool_result`` blocks → ``ToolArtifact`` records (``is_error`` → ``failed``; string content as
  is, text blocks joined by newlines, blocks with images kept as their JSON), then the message's
  remaining ``text`` / ``image`` blocks → a user Message after the artifacts;
* ``image`` blocks → OpenAI ``image_url`` parts (base64 sources as ``data:`` URLs), kept intact.

Other block types are refused with an error naming the block. Fields outside the schema go to ``meta``.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from ctxledger.ingest._batch import ImportBatch, ParsedConversation
from ctxledger.ingest._builder import ConversationBuilder, ParseOptions
from ctxledger.ingest._fields import Loc, as_object, json_type, optional, require
from ctxledger.ingest._load import Loaded
from ctxledger.ingest._shapes import Shape, below, conversation_shapes
from ctxledger.ingest._tools import ToolSet, add_skill_state
from ctxledger.json_text import JSON_MEDIA_TYPE, media_type_of
from ctxledger.records import Message, Role, ToolStatus, Trust
from ctxledger.serialize.images import base64_problem
from ctxledger.serialize.parts import part_problem

FORMAT = "anthropic-messages"
_PAYLOAD_KEYS = frozenset({"messages", "system", "tools"})
_MESSAGE_KEYS = frozenset({"role", "content", "id"})
_TOOL_KEYS = frozenset({"name", "description", "input_schema", "type"})
_BLOCK_PART_KEYS = frozenset({"type", "text", "source"})

Part = Mapping[str, Any]


def parse(loaded: Loaded, options: ParseOptions) -> ImportBatch:
    """Parse an Anthropic Messages transcript.

    Raises:
        InputError: bad input (names file, record index and field).
    """
    shapes = conversation_shapes(loaded.value, options)
    many = len(shapes) > 1
    conversations: list[ParsedConversation] = []
    for i, shape in enumerate(shapes):
        conversations.append(_conversation(shape, options, report=not many))
        if many:
            options.progress(i + 1, len(shapes))
    return ImportBatch(source=options.source, format=FORMAT, conversations=conversations)


def _conversation(shape: Shape, options: ParseOptions, *, report: bool) -> ParsedConversation:
    payload = shape.payload
    meta = {k: v for k, v in payload.items() if k not in _PAYLOAD_KEYS}
    builder = ConversationBuilder(shape.conversation_id, options, FORMAT, meta=meta)
    mapper = AnthropicMapper(builder)
    if payload.get("system") is not None:
        mapper.system(payload["system"], below(shape.top, "system"))
    if payload.get("tools") is not None:
        tools_loc = below(shape.top, "tools")
        add_skill_state(builder, anthropic_tools(payload["tools"], tools_loc), tools_loc, mapper.assistant)
    for j, msg in enumerate(shape.messages):
        mapper.feed(msg, shape.message_loc(j))
        if report:
            options.progress(j + 1, len(shape.messages))
    return builder.finish()


def anthropic_tools(value: Any, loc: Loc) -> ToolSet:
    """Convert Anthropic tool definitions to OpenAI ``tools`` form (``input_schema`` → ``parameters``).

    Raises:
        InputError: not an array, a server tool (a ``type`` other than ``custom``), or a missing field.
    """
    if not isinstance(value, list):
        raise loc.error(f"expected an array of tools, got {json_type(value)}")
    schemas: list[Mapping[str, Any]] = []
    extras: dict[str, Mapping[str, Any]] = {}
    for k, entry in enumerate(value):
        tloc = _item_loc(loc, k)
        entry = as_object(entry, tloc, "a tool object")
        kind = optional(entry, "type", str, tloc, "a string", default="custom")
        if kind != "custom":
            raise tloc.error(f"unsupported tool type {kind!r} (only client tools with an input_schema)", "type")
        function = {"name": require(entry, "name", str, tloc, "a string")}
        if "description" in entry:
            function["description"] = require(entry, "description", str, tloc, "a string")
        function["parameters"] = require(entry, "input_schema", dict, tloc, "an object")
        schemas.append({"type": "function", "function": function})
        extra = {key: v for key, v in entry.items() if key not in _TOOL_KEYS}
        if extra:
            extras[function["name"]] = extra
    return ToolSet(tuple(schemas), extras)


class AnthropicMapper:
    """Feeds Anthropic messages into a :class:`ConversationBuilder`."""

    def __init__(self, builder: ConversationBuilder) -> None:
        """Create the user and assistant participants."""
        self.b = builder
        self.user = builder.participant("user", role="user", name="user")
        self.assistant = builder.participant("assistant", role="assistant", name="assistant")

    def system(self, value: Any, loc: Loc) -> None:
        """Map the top-level ``system`` prompt (a string or text blocks) to a system Message.

        Raises:
            InputError: neither a string nor text blocks.
        """
        if isinstance(value, str):
            content: str | tuple[Part, ...] = value
        elif isinstance(value, list):
            items = enumerate(value)
            content = _single(tuple(_text_part(block, _item_loc(loc, k)) for k, block in items))
        else:
            raise loc.error(f"expected a string or an array of text blocks, got {json_type(value)}")
        meta = _block_extras(value) if isinstance(value, list) else {}
        self.b.add(
            Message,
            loc,
            owner=self.assistant,
            trust=Trust.SYSTEM,
            meta=meta,
            role=Role.SYSTEM,
            content=content,
        )

    def feed(self, msg: Any, loc: Loc) -> None:
        """Map one message.

        Raises:
            InputError: a missing or wrong-typed field, an unknown role or block type, or a tool result
                whose ``tool_use_id`` is unknown or already answered.
        """
        msg = as_object(msg, loc, "a message object")
        role = require(msg, "role", str, loc, "a string")
        if role not in ("user", "assistant"):
            raise loc.error(f"unknown role {role!r}; expected one of assistant, user", "role")
        content = require(msg, "content", (str, list), loc, "a string or an array of content blocks")
        blocks = [{"type": "text", "text": content}] if isinstance(content, str) else content
        if role == "assistant":
            self._assistant(msg, blocks, loc, as_string=isinstance(content, str))
        else:
            self._user(msg, blocks, loc, as_string=isinstance(content, str))

    def _assistant(self, msg: Mapping[str, Any], blocks: list[Any], loc: Loc, *, as_string: bool) -> None:
        parts: list[Part] = []
        calls: list[tuple[str, str, str, int]] = []
        thinking: list[Mapping[str, Any]] = []
        thinking_at: list[int] = []
        for k, block in enumerate(blocks):
            bloc = _block_loc(loc, k) if not as_string else loc
            kind = _block_type(block, bloc)
            if kind == "text":
                parts.append(_text_part(block, bloc))
            elif kind == "tool_use":
                calls.append((*_tool_use(block, bloc), k))
            elif kind in ("thinking", "redacted_thinking"):
                thinking.append(dict(block))
                thinking_at.append(k)
            else:
                raise bloc.error(f"assistant messages cannot carry {kind!r} blocks", "type")
        reasoning = {"thinking": thinking, "thinking_at": thinking_at} if thinking else {}
        meta = _meta(msg) | _block_extras(blocks) | reasoning
        message = self.b.add(
            Message,
            loc,
            owner=self.assistant,
            trust=Trust.VERIFIED_INTERNAL,
            external_id=_external_id(msg),
            meta=meta,
            role=Role.ASSISTANT,
            content=_content(parts, as_string),
        )
        for index, (call_id, name, arguments, k) in enumerate(calls):
            self.b.add_call(
                message, loc, f"content[{k}].id", call_id=call_id, name=name, arguments=arguments, index=index
            )

    def _user(self, msg: Mapping[str, Any], blocks: list[Any], loc: Loc, *, as_string: bool) -> None:
        parts: list[Part] = []
        for k, block in enumerate(blocks):
            bloc = _block_loc(loc, k) if not as_string else loc
            kind = _block_type(block, bloc)
            if kind == "tool_result":
                self._tool_result(block, bloc)
            elif kind == "text":
                parts.append(_text_part(block, bloc))
            elif kind == "image":
                parts.append(_image_part(block, bloc))
            else:
                raise bloc.error(f"user messages cannot carry {kind!r} blocks", "type")
        if parts:
            self.b.add(
                Message,
                loc,
                owner=self.user,
                trust=Trust.USER,
                external_id=_external_id(msg),
                meta=_meta(msg) | _block_extras(blocks),
                role=Role.USER,
                content=_content(parts, as_string),
            )

    def _tool_result(self, block: Mapping[str, Any], loc: Loc) -> None:
        call_id = require(block, "tool_use_id", str, loc, "a string")
        is_error = optional(block, "is_error", bool, loc, "a boolean", default=False)
        data, media_type, meta = _result_bytes(block.get("content"), loc)
        extra = {k: v for k, v in block.items() if k not in ("type", "tool_use_id", "content", "is_error")}
        self.b.add_result(
            loc,
            "tool_use_id",
            call_id=call_id,
            data=data,
            media_type=media_type,
            status=ToolStatus.FAILED if is_error else ToolStatus.SUCCEEDED,
            owner=self.assistant,
            meta=meta | extra,
        )


def _result_bytes(content: Any, loc: Loc) -> tuple[bytes, str, dict[str, Any]]:
    if content is None:
        return b"", media_type_of(""), {}
    if isinstance(content, str):
        return content.encode("utf-8"), media_type_of(content), {}
    if not isinstance(content, list):
        raise loc.error(f"expected a string or an array of blocks, got {json_type(content)}", "content")
    kinds = [_block_type(block, _block_loc(loc, k, "content")) for k, block in enumerate(content)]
    if all(kind == "text" for kind in kinds):
        text = "\n".join(_text_part(b, _block_loc(loc, k, "content"))["text"] for k, b in enumerate(content))
        return text.encode("utf-8"), media_type_of(text), {"content_blocks": len(content)}
    for k, (kind, block) in enumerate(zip(kinds, content, strict=True)):
        if kind == "image":  # sent as an image later: the rule a user's image follows, checked before any write
            _image_part(block, _block_loc(loc, k, "content"))
    data = json.dumps(content, ensure_ascii=False).encode("utf-8")
    return data, JSON_MEDIA_TYPE, {"anthropic_blocks": True}


def _tool_use(block: Mapping[str, Any], loc: Loc) -> tuple[str, str, str]:
    call_id = require(block, "id", str, loc, "a string")
    name = require(block, "name", str, loc, "a string")
    arguments = require(block, "input", dict, loc, "an object")
    return call_id, name, json.dumps(arguments, ensure_ascii=False)


def _block_type(block: Any, loc: Loc) -> str:
    block = as_object(block, loc, "a content block object")
    kind: str = require(block, "type", str, loc, "a string")
    return kind


def _text_part(block: Any, loc: Loc) -> Part:
    block = as_object(block, loc, "a text block")
    if block.get("type") != "text":
        raise loc.error(f"expected a text block, got {block.get('type')!r}", "type")
    return {"type": "text", "text": require(block, "text", str, loc, "a string")}


def _image_part(block: Mapping[str, Any], loc: Loc) -> Part:
    sloc = loc.child("source")
    source = as_object(require(block, "source", dict, loc, "an object"), sloc)
    kind = require(source, "type", str, sloc, "a string")
    if kind == "base64":
        media_type = require(source, "media_type", str, sloc, "a string")
        data = require(source, "data", str, sloc, "a string")
        problem = base64_problem(data)
        if problem is not None:
            raise sloc.error(problem, "data")
        url = f"data:{media_type};base64,{data}"
    elif kind == "url":
        url = require(source, "url", str, sloc, "a string")
    else:
        raise sloc.error(f"unsupported image source {kind!r} (base64 or url)", "type")
    part = {"type": "image_url", "image_url": {"url": url}}
    problem = part_problem(part)  # the rule every stored part follows (an empty URL breaks it)
    if problem is not None:
        raise sloc.error(problem.problem, "url" if kind == "url" else "data")
    return part


def _content(parts: list[Part], as_string: bool) -> str | tuple[Part, ...] | None:
    if not parts:
        return None
    if as_string:
        return str(parts[0]["text"])
    return _single(tuple(parts))


def _single(parts: tuple[Part, ...]) -> str | tuple[Part, ...]:
    """One text part reads as its string; anything else stays as parts."""
    if len(parts) == 1 and parts[0].get("type") == "text":
        return str(parts[0]["text"])
    return parts


def _item_loc(loc: Loc, k: int) -> Loc:
    return Loc(loc.source, loc.index, f"{loc.prefix.rstrip('.')}[{k}].")


def _block_extras(blocks: list[Any]) -> dict[str, Any]:
    """``{"block_extras": {position: {key: value}}}`` for keys outside a part (``cache_control`` …)."""
    extras = {
        str(k): {key: v for key, v in block.items() if key not in _BLOCK_PART_KEYS}
        for k, block in enumerate(blocks)
        if isinstance(block, dict) and block.get("type") in ("text", "image") and block.keys() - _BLOCK_PART_KEYS
    }
    return {"block_extras": extras} if extras else {}


def _block_loc(loc: Loc, k: int, key: str = "content") -> Loc:
    return loc.child(f"{key}[{k}]")


def _meta(msg: Mapping[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in msg.items() if k not in _MESSAGE_KEYS}


def _external_id(msg: Mapping[str, Any]) -> str | None:
    value = msg.get("id")
    return None if value is None else str(value)
