"""OpenAI Chat Completions serializer.

One turn becomes exactly one message (no message is invented, merged or reordered): ``system``,
``developer``, ``user``, ``assistant`` (with ``tool_calls``) or ``tool`` (with ``tool_call_id``), as in
OpenAI's API reference for ``POST /v1/chat/completions``. Tool results are the data channel: their
content is sent as given, never rewritten into instructions. Multi-part content (text and
``image_url`` parts) is kept intact (case B08). Another participant's turn relayed as a user turn
(``Turn.relayed``) carries ``name`` and, since not every model shows ``name`` to itself, a visible
``"<name>: "`` label on its text as well.

Token counts follow the OpenAI cookbook *How to count tokens with tiktoken* (gpt-4o family):

* every message costs :data:`TOKENS_PER_MESSAGE` plus the tokens of its role and content, and
  :data:`TOKENS_PER_NAME` more plus the name's tokens when it carries ``name``;
* every request is primed with :data:`REPLY_PRIMING` tokens (``<|start|>assistant<|message|>``);
* tool schemas cost ``num_tokens_for_tools`` of the same notebook (section 7, the constants in
  :class:`ToolSchemaRates`);
* a tool result's image parts (images inside tool output, :mod:`ctxledger.serialize.tool_images`) become text
  references naming the artifact: tool messages carry text only;
* image parts cost what OpenAI bills for images (:mod:`ctxledger.serialize.images`), not their base64
  text;
* an assistant tool call costs its function name, its arguments text and :data:`TOOL_CALL_TOKENS`. The
  rendering of calls is not documented; 5 tokens of framing per call reproduces the 35 prompt tokens the
  API reported for the call/result pair measured in forestwanglin/openai-java#5, where the tool message's
  ``tool_call_id`` is evidently not rendered (counting it would overshoot by 18), so it is not counted.

Call ids a history reuses are renamed so that each is unique in the request
(:func:`ctxledger.serialize.call_ids.unique_call_ids`, shared by every serializer);
:meth:`OpenAIChatSerializer.validate` flags a repeated id.

The counts are additive: ``count(build(turns)) == base_tokens + tools_tokens + sum(turn_tokens)``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ctxledger.errors import NOTHING_TO_SEND, NothingToSend, ProviderContractError
from ctxledger.hashing import canonical_json
from ctxledger.serialize._turns import at, check_turns, content_parts, function_definitions, speaker_label
from ctxledger.serialize.base import Turn
from ctxledger.serialize.call_ids import unique_call_ids
from ctxledger.serialize.images import (
    GPT_4O_TILE_RATES,
    TileRates,
    image_part_url,
    image_size_from_url,
    openai_image_tokens,
)
from ctxledger.serialize.tool_images import image_reference
from ctxledger.serialize.tool_names import TOOL_NAME, rename_tools, wire_tool_name
from ctxledger.tokens import TokenCounter

TOKENS_PER_MESSAGE = 3
"""Framing of every message: ``<|start|>{role}<|message|>…<|end|>`` minus the role (cookbook, gpt-4o)."""

TOKENS_PER_NAME = 1
"""Extra tokens when a message carries ``name`` (cookbook)."""

REPLY_PRIMING = 3
"""Every reply is primed with ``<|start|>assistant<|message|>`` (cookbook)."""

TOOL_CALL_TOKENS = 5
"""Framing of one assistant tool call besides its name and arguments (measured; see module docstring)."""

_ALLOWED_KEYS: Mapping[str, frozenset[str]] = {
    "system": frozenset({"role", "content", "name"}),
    "developer": frozenset({"role", "content", "name"}),
    "user": frozenset({"role", "content", "name"}),
    "assistant": frozenset({"role", "content", "name", "tool_calls", "refusal", "audio"}),
    "tool": frozenset({"role", "content", "tool_call_id"}),
}
"""Message keys the Chat Completions API reference documents for each role."""

_PART_TYPES: Mapping[str, frozenset[str]] = {
    "system": frozenset({"text"}),
    "developer": frozenset({"text"}),
    "user": frozenset({"text", "image_url"}),
    "assistant": frozenset({"text", "refusal"}),
    "tool": frozenset({"text"}),
}
"""Content part types each role accepts (the API reference's per-role content part unions)."""


@dataclass(frozen=True, slots=True)
class ToolSchemaRates:
    """Constants of the cookbook's ``num_tokens_for_tools`` (section 7; gpt-4o / gpt-4o-mini values).

    Attributes:
        func_init: tokens at the start of each function.
        prop_init: tokens when a function has properties.
        prop_key: tokens per property.
        enum_init: adjustment when a property has an enum.
        enum_item: tokens per enum value (plus the value's own tokens).
        func_end: tokens closing the whole tool list (added once).
    """

    func_init: int = 7
    prop_init: int = 3
    prop_key: int = 3
    enum_init: int = -3
    enum_item: int = 3
    func_end: int = 12


def _image_references(parts: list[dict[str, Any]], ref: str, *, recall: bool = False) -> list[dict[str, Any]]:
    """A tool message's parts with each image part replaced by a text reference (tool messages take text only).

    The API reference's tool message content is a string or text parts; an image from a tool output is
    named with the artifact that holds it (:func:`~ctxledger.serialize.tool_images.image_reference`).
    """
    out, number = [], 0
    for part in parts:
        if part["type"] == "image_url":
            number += 1
            part = {"type": "text", "text": image_reference(number, ref, recall=recall)}
        out.append(part)
    return out


class OpenAIChatSerializer:
    """Builds, validates and counts OpenAI Chat Completions requests.

    Args:
        image_rates: tile rates for image parts (gpt-4o family by default; see
            :func:`ctxledger.serialize.images.openai_tile_rates`).
        tool_rates: the constants of the tool-schema formula.
        recall: the model has the ``recall`` tool: an image left out of a tool result names a ``recall`` call
            instead of the ``ctxledger rehydrate`` command (:func:`~ctxledger.serialize.tool_images.image_reference`).
    """

    name = "openai-chat"

    def __init__(
        self,
        *,
        image_rates: TileRates = GPT_4O_TILE_RATES,
        tool_rates: ToolSchemaRates | None = None,
        recall: bool = False,
    ) -> None:
        self.image_rates = image_rates
        self.tool_rates = tool_rates or ToolSchemaRates()
        self.recall = recall

    # -- building -------------------------------------------------------------------------------

    def build(
        self,
        turns: Sequence[Turn],
        *,
        model: str,
        tools: Sequence[Mapping[str, Any]] = (),
        max_tokens: int | None = None,
    ) -> dict[str, Any]:
        """Return ``{"model", "messages", "tools"?, "max_completion_tokens"?}`` for ``turns`` in order.

        ``max_tokens`` is sent as ``max_completion_tokens`` (the API reference deprecates ``max_tokens``,
        which o-series models reject).

        Raises:
            ProviderContractError: a tool call is not answered right after it, a result has no call, or
                content cannot be carried by the turn's role (e.g. an image in a tool result).
            InputError: a content part or a tool definition is malformed.
        """
        check_turns(turns)
        turns, tools = rename_tools(unique_call_ids(turns), tools)
        payload: dict[str, Any] = {
            "model": model,
            "messages": [self._message(index, turn) for index, turn in enumerate(turns)],
        }
        if tools:
            payload["tools"] = [{"type": "function", "function": f} for f in function_definitions(tools)]
        if max_tokens is not None:
            payload["max_completion_tokens"] = max_tokens
        self.validate(payload)
        return payload

    def _message(self, index: int | None, turn: Turn) -> dict[str, Any]:
        """Render one turn as one Chat Completions message."""
        message: dict[str, Any] = {"role": turn.role}
        if turn.role == "tool":
            message["tool_call_id"] = turn.tool_call_id
        message["content"] = self._content(index, turn)
        if turn.relayed and turn.name:
            message["content"] = _labelled(turn.name, message["content"])
        if turn.name is not None and turn.role != "tool":
            message["name"] = turn.name
        if turn.tool_calls:
            message["tool_calls"] = [
                {
                    "id": c.call_id,
                    "type": "function",
                    "function": {"name": wire_tool_name(c.name), "arguments": c.arguments},
                }
                for c in turn.tool_calls
            ]
        return message

    def _content(self, index: int | None, turn: Turn) -> str | list[dict[str, Any]] | None:
        """The message content: a string as given, parts kept as parts, ``None`` only for tool-call turns."""
        if turn.content is None:
            if turn.role == "assistant":
                return None
            raise ProviderContractError(
                f"{turn.role} {at(turn, index)} has no content",
                rule="missing_content",
                index=index,
                refs=(turn.ref,),
            )
        if isinstance(turn.content, str):
            return turn.content
        parts = content_parts(index, turn)
        if turn.role == "tool":
            parts = _image_references(parts, turn.ref, recall=self.recall)
        for part in parts:
            if part["type"] not in _PART_TYPES[turn.role]:
                raise ProviderContractError(
                    f"{turn.role} {at(turn, index)} has a {part['type']} part; "
                    f"{turn.role} messages accept only {sorted(_PART_TYPES[turn.role])}",
                    rule="part_not_allowed",
                    index=index,
                    refs=(turn.ref,),
                )
        return parts

    # -- counting -------------------------------------------------------------------------------

    def base_tokens(self, counter: TokenCounter) -> int:
        """Tokens every request costs: the reply priming (3)."""
        return REPLY_PRIMING

    def turn_tokens(self, turn: Turn, counter: TokenCounter) -> int:
        """Tokens the turn's message adds to a request, framing, name, tool-call JSON and images included.

        Raises:
            ProviderContractError: the turn cannot be rendered as a message (see :meth:`build`).
        """
        return self.message_tokens(self._message(None, turn), counter)

    def message_tokens(self, message: Mapping[str, Any], counter: TokenCounter) -> int:
        """Tokens of one built message (cookbook framing; images at provider rates).

        Raises:
            ProviderContractError: the message holds a content part type this counter does not know.
        """
        tokens = TOKENS_PER_MESSAGE + counter.count(str(message["role"]))
        tokens += self._content_tokens(message.get("content"), counter)
        if message.get("name") is not None:
            tokens += TOKENS_PER_NAME + counter.count(str(message["name"]))
        for call in message.get("tool_calls") or ():
            function = call["function"]
            tokens += TOOL_CALL_TOKENS + counter.count(function["name"]) + counter.count(function["arguments"])
        return tokens

    def _content_tokens(self, content: Any, counter: TokenCounter) -> int:
        """Tokens of a message content: text as text, images at the configured tile rates."""
        if content is None:
            return 0
        if isinstance(content, str):
            return counter.count(content)
        total = 0
        for part in content:
            kind = part.get("type")
            if kind == "text":
                total += counter.count(part["text"])
            elif kind == "refusal":
                total += counter.count(part["refusal"])
            elif kind == "image_url":
                url, detail = image_part_url(part)
                total += openai_image_tokens(image_size_from_url(url), detail, self.image_rates)
            else:
                raise ProviderContractError(f"cannot count content part of type {kind!r}", rule="unknown_part")
        return total

    def tools_tokens(self, tools: Sequence[Mapping[str, Any]], counter: TokenCounter) -> int:
        """Tokens the tool schemas add (cookbook ``num_tokens_for_tools``; 0 without tools).

        Per function: ``func_init`` + tokens of ``"name:description"`` (one trailing period dropped); per
        property ``prop_key`` + tokens of ``"key:type:description"``, enum values at ``enum_item`` each;
        ``func_end`` once. The cookbook ignores nested schema keywords (``items``, nested
        ``properties`` …); they are added as the tokens of their canonical JSON, an overestimate.

        Raises:
            InputError: a tool is not an OpenAI function tool (names its index and field).
        """
        functions = function_definitions(tools)
        if not functions:
            return 0
        rates = self.tool_rates
        return rates.func_end + sum(self._function_tokens(f, counter) for f in functions)

    def _function_tokens(self, function: Mapping[str, Any], counter: TokenCounter) -> int:
        """Tokens of one function definition under the cookbook formula."""
        rates = self.tool_rates
        description = str(function.get("description") or "").removesuffix(".")
        tokens = rates.func_init + counter.count(f"{function['name']}:{description}")
        properties = (function.get("parameters") or {}).get("properties") or {}
        if properties:
            tokens += rates.prop_init
            for key, schema in properties.items():
                tokens += rates.prop_key + self._property_tokens(str(key), schema, counter)
        return tokens

    def _property_tokens(self, key: str, schema: Mapping[str, Any], counter: TokenCounter) -> int:
        """Tokens of one property: ``key:type:description``, its enum and any nested keywords."""
        rates = self.tool_rates
        kind = schema.get("type", "")
        kind_text = kind if isinstance(kind, str) else canonical_json(kind)
        description = str(schema.get("description") or "").removesuffix(".")
        tokens = counter.count(f"{key}:{kind_text}:{description}")
        if "enum" in schema:
            values = schema["enum"] or []
            tokens += rates.enum_init + sum(rates.enum_item + counter.count(str(v)) for v in values)
        nested = {k: v for k, v in schema.items() if k not in ("type", "description", "enum")}
        if nested:
            tokens += counter.count(canonical_json(nested))
        return tokens

    def count(self, payload: Mapping[str, Any], counter: TokenCounter) -> int:
        """Input tokens of a built payload: priming + every message + the tool schemas.

        Raises:
            ProviderContractError: a message holds a content part type this counter does not know.
        """
        messages = sum(self.message_tokens(m, counter) for m in payload.get("messages", ()))
        return REPLY_PRIMING + messages + self.tools_tokens(payload.get("tools") or (), counter)

    # -- validation -----------------------------------------------------------------------------

    def validate(self, payload: Mapping[str, Any]) -> None:
        """Check the Chat Completions message rules on a payload.

        Rules (API reference and function-calling guide): known roles and message keys only; content
        required except on an assistant message with ``tool_calls``; part types allowed for the role;
        every ``tool_calls`` id answered by ``tool`` messages immediately after it, all of them before
        any other role; no ``tool`` message without an unanswered call right before it; every tool and
        call name matches ``^[a-zA-Z0-9_-]{1,64}$`` (:mod:`ctxledger.serialize.tool_names`; :meth:`build`
        maps recorded names to such names, so this only guards against a bug).

        Raises:
            ProviderContractError: with ``index`` (message position) and ``rule``.
        """
        messages = payload.get("messages")
        if not isinstance(messages, list) or not messages:
            raise NothingToSend(NOTHING_TO_SEND, rule="no_messages")
        pending: set[str] = set()
        seen: set[str] = set()
        for index, message in enumerate(messages):
            role = message.get("role") if isinstance(message, Mapping) else None
            if role not in _ALLOWED_KEYS:
                _fail(index, "unknown_role", f"unknown role {role!r}")
            _check_message(index, message)
            for call in message.get("tool_calls") or ():
                if call["id"] in seen:
                    _fail(index, "duplicate_tool_call_id", f"tool call id {call['id']!r} was used by an earlier call")
                seen.add(call["id"])
            if role == "tool":
                call_id = message.get("tool_call_id")
                if call_id not in pending:
                    _fail(
                        index,
                        "tool_result_without_call",
                        f"tool message answers {call_id!r}, no call before it",
                    )
                pending.discard(call_id)
                continue
            if pending:
                _fail(
                    index,
                    "tool_call_unanswered",
                    f"{role} message comes before results for {sorted(pending)}",
                )
            pending = {call["id"] for call in message.get("tool_calls") or ()}
        if pending:
            _fail(len(messages) - 1, "tool_call_unanswered", f"no results for tool calls {sorted(pending)}")
        for position, tool in enumerate(payload.get("tools") or ()):
            name = (tool.get("function") or {}).get("name") if isinstance(tool, Mapping) else None
            if not isinstance(name, str) or not TOOL_NAME.fullmatch(name):
                raise ProviderContractError(
                    f"tools[{position}]: function name {name!r} does not match ^[a-zA-Z0-9_-]{{1,64}}$",
                    rule="bad_tool_name",
                )


def _labelled(name: str, content: Any) -> Any:
    """Content with a visible ``"<name>: "`` label: on the string, or on (or before) the first text part."""
    if isinstance(content, str):
        return speaker_label(name, content)
    parts = list(content or ())
    if parts and parts[0].get("type") == "text":
        return [{**parts[0], "text": speaker_label(name, str(parts[0]["text"]))}, *parts[1:]]
    return [{"type": "text", "text": speaker_label(name, "")}, *parts]


def _fail(index: int, rule: str, what: str) -> None:
    """Raise the validation error for message ``index``."""
    raise ProviderContractError(f"message {index}: {what} (rule {rule})", rule=rule, index=index)


def _check_message(index: int, message: Mapping[str, Any]) -> None:
    """Check one message's keys, content and tool calls against its role."""
    role = message["role"]
    unknown = set(message) - _ALLOWED_KEYS[role]
    if unknown:
        _fail(index, "unknown_key", f"{role} message has keys the API does not define: {sorted(unknown)}")
    content = message.get("content")
    if content is None and not (role == "assistant" and message.get("tool_calls")):
        _fail(index, "missing_content", f"{role} message has no content")
    if isinstance(content, list):
        _check_parts(index, role, content)
    elif content is not None and not isinstance(content, str):
        _fail(index, "bad_content", "content must be a string, a list of parts or null")
    if role == "tool" and not isinstance(message.get("tool_call_id"), str):
        _fail(index, "tool_call_id_missing", "tool message has no tool_call_id")
    _check_tool_calls(index, message.get("tool_calls"))


def _check_parts(index: int, role: str, parts: list[Any]) -> None:
    """Each part has a type the role accepts."""
    if not parts:
        _fail(index, "empty_content", "content part list is empty")
    for part in parts:
        kind = part.get("type") if isinstance(part, Mapping) else None
        if kind not in _PART_TYPES[role]:
            _fail(index, "part_not_allowed", f"{role} messages cannot hold {kind!r} parts")


def _check_tool_calls(index: int, calls: Any) -> None:
    """``tool_calls`` entries are function calls with an id, a name and string arguments."""
    if calls is None:
        return
    if not isinstance(calls, list) or not calls:
        _fail(index, "bad_tool_calls", "tool_calls must be a non-empty list")
    ids = []
    for call in calls:
        function = call.get("function") if isinstance(call, Mapping) else None
        if (
            not isinstance(function, Mapping)
            or call.get("type") != "function"
            or not isinstance(call.get("id"), str)
            or not isinstance(function.get("name"), str)
            or not isinstance(function.get("arguments"), str)
        ):
            _fail(index, "bad_tool_calls", "a tool call needs id, type 'function', name and string arguments")
        if not TOOL_NAME.fullmatch(function["name"]):
            _fail(index, "bad_tool_name", f"tool call name {function['name']!r} does not match ^[a-zA-Z0-9_-]{{1,64}}$")
        ids.append(call["id"])
    if len(set(ids)) != len(ids):
        _fail(index, "duplicate_tool_call_id", f"tool call ids repeat: {ids}")
