"""Provider responses read into one neutral form, so that a recorder can write them as they come.

:func:`read_response` accepts the three response shapes a model call returns, as a dict or as the SDK's
pydantic object:

* an OpenAI Chat Completions ``ChatCompletion`` (``choices[0].message``: ``content``, ``tool_calls``;
  ``usage.prompt_tokens`` / ``completion_tokens``), API reference *The chat completion object*;
* an OpenAI Responses ``Response`` (``output`` items: ``reasoning``, ``compaction``, ``message`` with
  ``output_text`` parts, ``function_call``; ``usage.input_tokens`` / ``output_tokens``), API reference
  *The response object*;
* an Anthropic ``Message`` (``content`` blocks: ``text``, ``tool_use``, ``thinking``,
  ``redacted_thinking``; ``usage.input_tokens`` / ``output_tokens``), Messages API reference.

Reasoning (Responses ``reasoning`` / ``compaction`` items, Anthropic thinking blocks) is kept as received,
with its positions among the output's items or blocks, the way the importers store it
(``meta["thinking"]``, ``meta["thinking_at"]``).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ctxledger.errors import InputError

SOURCE = "<response>"
"""``InputError.source`` for a response that cannot be read."""


@dataclass(frozen=True, slots=True)
class ResponseCall:
    """One tool call of a response: provider ``call_id``, tool ``name``, JSON ``arguments`` text."""

    call_id: str
    name: str
    arguments: str


@dataclass(frozen=True, slots=True)
class ReadResponse:
    """What a model response says, in neutral form.

    Attributes:
        api: ``openai-chat``, ``openai-responses`` or ``anthropic-messages``.
        text: the assistant's visible text (``None`` when it only called tools).
        calls: the tool calls in order (parallel calls included).
        thinking: reasoning items / blocks as received, and their positions (``meta["thinking"]``, ``"thinking_at"``).
        input_tokens, output_tokens: the usage the provider reported (``None`` when absent).
        model: the model that answered, when given.
        response_id: the provider's id of the response.
    """

    api: str
    text: str | None
    calls: tuple[ResponseCall, ...] = ()
    thinking: tuple[Mapping[str, Any], ...] = ()
    thinking_at: tuple[int, ...] = ()
    input_tokens: int | None = None
    output_tokens: int | None = None
    model: str | None = None
    response_id: str | None = None


def read_response(response: Any) -> ReadResponse:
    """Read a provider response (dict or SDK object) into a :class:`ReadResponse`.

    Raises:
        InputError: not one of the three shapes, or a field of the wrong type (names the field).
    """
    data = _as_dict(response)
    if isinstance(data.get("choices"), list):
        return _chat(data)
    if isinstance(data.get("output"), list):
        return _responses(data)
    if isinstance(data.get("content"), list) and data.get("role", "assistant") == "assistant":
        return _anthropic(data)
    raise InputError(
        "not a provider response: expected an OpenAI chat completion ('choices'), a Responses result ('output') "
        "or an Anthropic message ('content' blocks)",
        source=SOURCE,
    )


def _as_dict(response: Any) -> Mapping[str, Any]:
    if isinstance(response, Mapping):
        return response
    dump = getattr(response, "model_dump", None)
    if callable(dump):
        return dump(mode="json")
    raise InputError(f"expected a dict or an SDK response object, got {type(response).__name__}", source=SOURCE)


def _usage(data: Mapping[str, Any], input_key: str, output_key: str) -> tuple[int | None, int | None]:
    usage = data.get("usage")
    if not isinstance(usage, Mapping):
        return None, None
    tokens_in, tokens_out = usage.get(input_key), usage.get(output_key)
    return (
        tokens_in if isinstance(tokens_in, int) else None,
        tokens_out if isinstance(tokens_out, int) else None,
    )


def _string(value: Any, field_name: str) -> str:
    if not isinstance(value, str):
        raise InputError(f"expected a string, got {type(value).__name__}", source=SOURCE, field=field_name)
    return value


def _chat(data: Mapping[str, Any]) -> ReadResponse:
    if not data["choices"]:
        raise InputError("a chat completion without choices", source=SOURCE, field="choices")
    message = data["choices"][0].get("message") or {}
    calls = []
    for k, call in enumerate(message.get("tool_calls") or ()):
        function = call.get("function") or {}
        calls.append(
            ResponseCall(
                _string(call.get("id"), f"choices[0].message.tool_calls[{k}].id"),
                _string(function.get("name"), f"choices[0].message.tool_calls[{k}].function.name"),
                _string(function.get("arguments"), f"choices[0].message.tool_calls[{k}].function.arguments"),
            )
        )
    content = message.get("content")
    if not (isinstance(content, str) and content):  # a refusal comes with no content: its text is what was said
        refusal = message.get("refusal")
        content = refusal if isinstance(refusal, str) else None
    tokens_in, tokens_out = _usage(data, "prompt_tokens", "completion_tokens")
    return ReadResponse(
        "openai-chat",
        content if isinstance(content, str) and content else None,
        tuple(calls),
        input_tokens=tokens_in,
        output_tokens=tokens_out,
        model=data.get("model"),
        response_id=data.get("id"),
    )


def _responses(data: Mapping[str, Any]) -> ReadResponse:
    texts, calls, thinking, at = [], [], [], []
    for k, item in enumerate(data["output"]):
        kind = item.get("type")
        if kind in ("reasoning", "compaction"):
            thinking.append({key: value for key, value in item.items() if value is not None})
            at.append(k)
        elif kind == "function_call":
            calls.append(
                ResponseCall(
                    _string(item.get("call_id"), f"output[{k}].call_id"),
                    _string(item.get("name"), f"output[{k}].name"),
                    _string(item.get("arguments"), f"output[{k}].arguments"),
                )
            )
        elif kind == "message":
            texts += [str(p.get("text") or p.get("refusal") or "") for p in item.get("content") or ()]
        else:
            raise InputError(
                f"output item type {kind!r} is not recorded (hosted tools keep their state on the provider)",
                source=SOURCE,
                field=f"output[{k}].type",
            )
    tokens_in, tokens_out = _usage(data, "input_tokens", "output_tokens")
    text = "".join(texts)
    return ReadResponse(
        "openai-responses",
        text or None,
        tuple(calls),
        tuple(thinking),
        tuple(at),
        tokens_in,
        tokens_out,
        data.get("model"),
        data.get("id"),
    )


def _anthropic(data: Mapping[str, Any]) -> ReadResponse:
    texts, calls, thinking, at = [], [], [], []
    for k, block in enumerate(data["content"]):
        kind = block.get("type")
        if kind == "text":
            texts.append(str(block.get("text") or ""))
        elif kind == "tool_use":
            arguments = json.dumps(block.get("input") or {}, ensure_ascii=False, sort_keys=True)
            calls.append(
                ResponseCall(
                    _string(block.get("id"), f"content[{k}].id"),
                    _string(block.get("name"), f"content[{k}].name"),
                    arguments,
                )
            )
        elif kind in ("thinking", "redacted_thinking"):
            thinking.append({key: value for key, value in block.items() if value is not None})
            at.append(k)
        else:
            raise InputError(f"content block type {kind!r} is not recorded", source=SOURCE, field=f"content[{k}].type")
    tokens_in, tokens_out = _usage(data, "input_tokens", "output_tokens")
    text = "".join(texts)
    return ReadResponse(
        "anthropic-messages",
        text or None,
        tuple(calls),
        tuple(thinking),
        tuple(at),
        tokens_in,
        tokens_out,
        data.get("model"),
        data.get("id"),
    )
