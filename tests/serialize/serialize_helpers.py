"""Helpers shared by the serializer tests: real image files, data URLs, turns from OpenAI messages."""

from __future__ import annotations

import base64
import functools
import io
import json
from collections.abc import Mapping, Sequence
from typing import Any

from PIL import Image

from ctxledger.serialize import CallView, Turn


def image_bytes(width: int, height: int, fmt: str, **save: Any) -> bytes:
    """A real image file of the given size and format, written by Pillow."""
    mode = "RGBA" if save.pop("alpha", False) else "RGB"
    buffer = io.BytesIO()
    Image.new(mode, (width, height), (200, 30, 90, 255)[: len(mode)]).save(buffer, format=fmt, **save)
    return buffer.getvalue()


def data_url(data: bytes, media_type: str) -> str:
    """A base64 data URL for ``data``."""
    return f"data:{media_type};base64,{base64.b64encode(data).decode('ascii')}"


def turns_from_openai(messages: Sequence[Mapping[str, Any]]) -> list[Turn]:
    """Neutral turns from OpenAI Chat messages (as in tau-bench and the cases); store keys ignored."""
    turns = []
    for index, m in enumerate(messages):
        calls = tuple(
            CallView(c["id"], c["function"]["name"], c["function"]["arguments"])
            for c in m.get("tool_calls") or ()
        )
        content = m.get("content")
        if isinstance(content, list):
            content = tuple(content)
        turns.append(
            Turn(
                ref=str(m.get("id", f"m{index}")),
                role=m["role"],
                content=content,
                name=m.get("name") if m["role"] != "tool" else None,
                tool_calls=calls,
                tool_call_id=m.get("tool_call_id"),
                tool_name=m.get("name") if m["role"] == "tool" else None,
                is_error=m["role"] == "tool" and str(content).startswith("Error"),
            )
        )
    return turns


def load_json(path: Any) -> Any:
    """Parse a JSON file."""
    with open(path, encoding="utf-8") as handle:
        return json.load(handle)


STORE_ONLY_KEYS = frozenset({"id", "tokens", "tags", "meta", "external_id"})
"""Keys of the store (records, case files) that must never reach a provider payload."""


@functools.cache
def _openai_adapters() -> tuple[Any, Any]:
    """TypeAdapters of the OpenAI SDK's message and tool request types, unknown keys forbidden."""
    from openai.types.chat import ChatCompletionMessageParam, ChatCompletionToolParam
    from pydantic import ConfigDict, TypeAdapter

    forbid = ConfigDict(extra="forbid")
    return (
        TypeAdapter(list[ChatCompletionMessageParam], config=forbid),
        TypeAdapter(list[ChatCompletionToolParam], config=forbid),
    )


@functools.cache
def _anthropic_adapters() -> tuple[Any, Any, Any]:
    """TypeAdapters of the Anthropic SDK's message, tool and system request types, unknown keys forbidden."""
    from anthropic.types import MessageParam, TextBlockParam, ToolParam
    from pydantic import ConfigDict, TypeAdapter

    forbid = ConfigDict(extra="forbid")
    return (
        TypeAdapter(list[MessageParam], config=forbid),
        TypeAdapter(list[ToolParam], config=forbid),
        TypeAdapter(str | list[TextBlockParam], config=forbid),
    )


def _drain(value: Any) -> None:
    """Force pydantic's lazy validation of SDK ``Iterable`` fields; reject matches of response models.

    SDK request types declare lists as ``Iterable[...]``, which pydantic validates only when iterated,
    and Anthropic's block unions also admit response models that accept unknown keys: a value that only
    validates as such a model is not a valid request block.
    """
    from pydantic import BaseModel

    if type(value).__name__ == "ValidatorIterator":
        value = list(value)
    if isinstance(value, BaseModel):
        raise AssertionError(f"matches only the response type {type(value).__name__}, not a request type")
    for item in value.values() if isinstance(value, dict) else value if isinstance(value, list) else ():
        _drain(item)


def sdk_valid_openai(payload: Mapping[str, Any]) -> None:
    """Validate messages and tools against the OpenAI SDK's request types (no unknown keys)."""
    messages, tools = _openai_adapters()
    _drain(messages.validate_python(payload["messages"]))
    _drain(tools.validate_python(payload.get("tools", [])))


def sdk_valid_anthropic(payload: Mapping[str, Any]) -> None:
    """Validate system, messages and tools against the Anthropic SDK's request types (no unknown keys)."""
    messages, tools, system = _anthropic_adapters()
    _drain(messages.validate_python(payload["messages"]))
    _drain(tools.validate_python(payload.get("tools", [])))
    _drain(system.validate_python(payload.get("system", "x")))


def structural_keys(payload: Mapping[str, Any]) -> set[str]:
    """Keys of the payload envelope, messages, parts, blocks, calls and tools (not of schemas or inputs).

    The provider's own ``id`` of a tool call or ``tool_use`` block is left out: it is API data, not the
    store's record id.
    """
    if "input" in payload:
        return _responses_keys(payload)
    keys = set(payload)
    for message in payload["messages"]:
        keys |= set(message)
        content = message.get("content")
        for item in content if isinstance(content, list) else ():
            keys |= set(item) - ({"id"} if item.get("type") == "tool_use" else set())
            for inner in item.get("content") if isinstance(item.get("content"), list) else ():
                keys |= set(inner)
        for call in message.get("tool_calls") or ():
            keys |= (set(call) - {"id"}) | set(call["function"])
    for tool in payload.get("tools", ()):
        keys |= set(tool) | set(tool.get("function", {}))
    return keys


@functools.cache
def _responses_adapters() -> tuple[Any, Any]:
    """TypeAdapters of the OpenAI SDK's Responses input-item and function-tool request types."""
    from openai.types.responses import FunctionToolParam, ResponseInputParam
    from pydantic import ConfigDict, TypeAdapter

    forbid = ConfigDict(extra="forbid")
    return TypeAdapter(ResponseInputParam, config=forbid), TypeAdapter(list[FunctionToolParam], config=forbid)


def sdk_valid_responses(payload: Mapping[str, Any]) -> None:
    """Validate input items, tools and request keys against the OpenAI SDK's Responses request types."""
    from openai.types.responses.response_create_params import ResponseCreateParamsBase

    items, tools = _responses_adapters()
    _drain(items.validate_python(payload["input"]))
    _drain(tools.validate_python(payload.get("tools", [])))
    unknown = set(payload) - set(ResponseCreateParamsBase.__annotations__)
    assert not unknown, f"request keys the SDK does not define: {unknown}"


def _responses_keys(payload: Mapping[str, Any]) -> set[str]:
    """Keys of a Responses envelope, items, parts and tools (a reasoning item's provider ``id`` left out)."""
    keys = set(payload)
    for item in payload["input"]:
        keys |= set(item) - ({"id"} if item["type"] == "reasoning" else set())
        for part in item.get("content") if isinstance(item.get("content"), list) else ():
            keys |= set(part)
    for tool in payload.get("tools", ()):
        keys |= set(tool)
    return keys
