"""OpenAI Responses serializer (``api="openai-responses"``).

Rules followed, from OpenAI's API reference for ``POST /v1/responses`` (input items, ``instructions``,
``store``, ``include``, ``truncation``) and its *Function calling* and *Reasoning* guides:

* ``system`` and ``developer`` turns become the top-level ``instructions`` (their texts in turn order,
  joined by a blank line); they are never input items;
* a user turn is a ``message`` item (``role: user``; a string, or ``input_text`` / ``input_image`` parts);
* an assistant turn is, in this order, its reasoning items, a ``message`` item with its text (``role:
  assistant``) and one ``function_call`` item per tool call (``call_id``, ``name``, ``arguments`` text);
* a tool result is a ``function_call_output`` item (``call_id``, ``output``: the text as given, or parts);
  the results of one assistant turn follow its calls, all of them before any other item, so a call, its
  result and the reasoning before it always travel together;
* reasoning items (``type: reasoning``, with ``encrypted_content``) and compaction items (``type:
  compaction``) of an assistant turn (``Turn.thinking``, from ``meta["thinking"]`` of an imported response)
  go back complete and unmodified at their original positions among the turn's items: the Reasoning
  guide requires the reasoning items of a tool-calling turn to be passed back with its calls, and an
  encrypted item cannot be edited;
* ``store: false`` and ``include: ["reasoning.encrypted_content"]``: the state is the client's (this
  payload is the whole context, nothing is kept or looked up server-side, so no ``previous_response_id``
  and no ``conversation``), and reasoning comes back encrypted so that it can be sent again;
* ``truncation: "disabled"``: the provider fails a request that does not fit rather than dropping items,
  so what the manifest says was sent is what the model saw;
* an author ``name`` (messages have no ``name`` field) is a visible ``"<name>: "`` label on the text;
* tools are ``{"type": "function", "name", "description"?, "parameters", "strict"}`` (the Responses
  function-tool form; ``strict`` is sent as given, else ``false``, because the API's default is strict
  validation, which most recorded schemas do not satisfy);
* call ids are made valid and request-unique (:func:`ctxledger.serialize.call_ids.unique_call_ids`) and
  tool names valid (:mod:`ctxledger.serialize.tool_names`), as for the other serializers.

Token counts are estimates (OpenAI documents no rendering of Responses items): each message item costs
:data:`~ctxledger.serialize.openai_chat.TOKENS_PER_MESSAGE` plus its role's and content's tokens, the
instructions the same as a system message, a function call its name, arguments and
:data:`~ctxledger.serialize.openai_chat.TOOL_CALL_TOKENS`, a result the framing of a tool message plus its
output; images at the OpenAI rates; tools by the cookbook formula the Chat serializer uses. A reasoning
item costs its summary text plus a quarter of the bytes its ``encrypted_content`` decodes to (the provider
reads it back as tokens of unknown number; the margin covers the difference), a compaction item the same
for its ``encrypted_content``. ``count(build(turns)) <= base_tokens + tools_tokens + sum(turn_tokens)``
(equal unless several instruction texts are joined).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ctxledger.errors import NOTHING_TO_SEND, NothingToSend, ProviderContractError
from ctxledger.serialize._turns import at, check_turns, content_parts, function_definitions, speaker_label
from ctxledger.serialize.anthropic_messages import with_thinking
from ctxledger.serialize.base import Turn
from ctxledger.serialize.call_ids import CALL_ID, unique_call_ids
from ctxledger.serialize.images import GPT_4O_TILE_RATES, TileRates, image_size_from_url, openai_image_tokens
from ctxledger.serialize.openai_chat import (
    REPLY_PRIMING,
    TOKENS_PER_MESSAGE,
    TOOL_CALL_TOKENS,
    OpenAIChatSerializer,
    ToolSchemaRates,
)
from ctxledger.serialize.tool_names import TOOL_NAME, rename_tools, wire_tool_name
from ctxledger.tokens import TokenCounter

REASONING_ITEM_TYPES = ("reasoning", "compaction")
"""Opaque, provider-pinned item types an assistant turn carries back (``Turn.thinking``)."""

ENCRYPTED_REASONING = "reasoning.encrypted_content"
"""The ``include`` value that makes the API return reasoning items with their encrypted content."""

INSTRUCTIONS_SEPARATOR = "\n\n"
"""Between the texts of several system / developer turns in ``instructions``."""

_SYSTEM_ROLES = ("system", "developer")

_ITEM_KEYS: Mapping[str, frozenset[str]] = {
    "message": frozenset({"type", "role", "content"}),
    "function_call": frozenset({"type", "call_id", "name", "arguments", "id", "status"}),
    "function_call_output": frozenset({"type", "call_id", "output", "id", "status"}),
    "reasoning": frozenset({"type", "id", "summary", "encrypted_content", "content", "status"}),
    "compaction": frozenset({"type", "id", "encrypted_content", "created_by"}),
}
"""Input item types and the keys the API reference documents for each."""

_PART_TYPES: Mapping[str, frozenset[str]] = {
    "user": frozenset({"input_text", "input_image", "input_file"}),
    "system": frozenset({"input_text"}),
    "developer": frozenset({"input_text"}),
    "assistant": frozenset({"output_text", "refusal"}),
}
"""Content part types each message role accepts."""

_OUTPUT_PART_TYPES = frozenset({"input_text", "input_image", "input_file"})
"""Part types a ``function_call_output`` list may hold."""

_PAYLOAD_KEYS = frozenset(
    {"model", "instructions", "input", "tools", "store", "include", "truncation", "max_output_tokens"}
)


class OpenAIResponsesSerializer:
    """Builds, validates and counts OpenAI Responses requests (see the module docstring).

    Args:
        image_rates: the target model's image tile rates.
        tool_rates: the constants of the tool-schema formula.
        recall: the model has the ``recall`` tool (kept for the text this format shares with OpenAI Chat; tool
            results carry their images here).
    """

    name = "openai-responses"
    sends_thinking = True
    thinking_types = REASONING_ITEM_TYPES
    """Assistant turns carry their reasoning and compaction items; Anthropic thinking blocks are dropped."""

    def __init__(
        self,
        *,
        image_rates: TileRates = GPT_4O_TILE_RATES,
        tool_rates: ToolSchemaRates | None = None,
        recall: bool = False,
    ) -> None:
        self.image_rates = image_rates
        self.recall = recall
        self._chat = OpenAIChatSerializer(image_rates=image_rates, tool_rates=tool_rates, recall=recall)

    # -- building -------------------------------------------------------------------------------

    def build(
        self,
        turns: Sequence[Turn],
        *,
        model: str,
        tools: Sequence[Mapping[str, Any]] = (),
        max_tokens: int | None = None,
    ) -> dict[str, Any]:
        """Return ``{"model", "instructions"?, "input", "tools"?, "store", "include", "truncation", …}``.

        ``max_tokens`` is sent as ``max_output_tokens``.

        Raises:
            ProviderContractError: tool pairing is broken, a turn renders to nothing, or content cannot be
                carried by the turn's role (e.g. an image in an assistant turn).
            InputError: a content part or a tool definition is malformed.
        """
        check_turns(turns)
        turns, tools = rename_tools(unique_call_ids(turns), tools)
        payload: dict[str, Any] = {"model": model}
        instructions = [self._instruction(i, t) for i, t in enumerate(turns) if t.role in _SYSTEM_ROLES]
        if instructions:
            payload["instructions"] = INSTRUCTIONS_SEPARATOR.join(instructions)
        payload["input"] = [
            item for i, t in enumerate(turns) if t.role not in _SYSTEM_ROLES for item in self._items(i, t)
        ]
        if not payload["input"]:
            raise NothingToSend(NOTHING_TO_SEND, rule="no_input")
        if tools:
            payload["tools"] = responses_tools(tools)
        payload["store"] = False
        payload["include"] = [ENCRYPTED_REASONING]
        payload["truncation"] = "disabled"
        if max_tokens is not None:
            payload["max_output_tokens"] = max_tokens
        self.validate(payload)
        return payload

    def _instruction(self, index: int | None, turn: Turn) -> str:
        """The text a system or developer turn adds to ``instructions`` (text parts only)."""
        texts = []
        for part in content_parts(index, turn):
            if part["type"] != "text":
                raise ProviderContractError(
                    f"{turn.role} {at(turn, index)} has an image; instructions are text",
                    rule="part_not_allowed",
                    index=index,
                    refs=(turn.ref,),
                )
            texts.append(part["text"])
        text = "\n".join(texts)
        text = speaker_label(turn.name, text) if turn.name else text
        if not text.strip():
            raise ProviderContractError(
                f"{turn.role} {at(turn, index)} has no text", rule="empty_turn", index=index, refs=(turn.ref,)
            )
        return text

    def _items(self, index: int | None, turn: Turn) -> list[dict[str, Any]]:
        """The input items one user, assistant or tool turn renders to (never none)."""
        if turn.role == "tool":
            return [self._output(index, turn)]
        items = []
        content = self._content(index, turn)
        if content:
            items.append(
                {"type": "message", "role": "user" if turn.role == "user" else "assistant", "content": content}
            )
        items += [
            {"type": "function_call", "call_id": c.call_id, "name": wire_tool_name(c.name), "arguments": c.arguments}
            for c in turn.tool_calls
        ]
        reasoning = [(pos, b) for pos, b in turn.thinking if b.get("type") in REASONING_ITEM_TYPES]
        if turn.role == "assistant" and reasoning and items:
            items = _precede(with_thinking(items, reasoning))
        if not items:
            raise ProviderContractError(
                f"{turn.role} {at(turn, index)} has no non-blank content to send",
                rule="empty_turn",
                index=index,
                refs=(turn.ref,),
            )
        return items

    def _content(self, index: int | None, turn: Turn) -> str | list[dict[str, Any]] | None:
        """A message's content: a string as given, else Responses parts; ``None`` when there is nothing."""
        if isinstance(turn.content, str) or turn.content is None:
            text = turn.content or ""
            if turn.name:
                text = speaker_label(turn.name, text)
            return text if text.strip() else None
        parts = self._parts(index, turn, "output_text" if turn.role == "assistant" else "input_text")
        if turn.name:
            if parts and parts[0]["type"].endswith("_text"):
                parts[0] = {**parts[0], "text": speaker_label(turn.name, parts[0]["text"])}
            else:
                parts.insert(0, {"type": "input_text", "text": speaker_label(turn.name, "")})
        return parts or None

    def _parts(self, index: int | None, turn: Turn, text_type: str) -> list[dict[str, Any]]:
        """OpenAI-style parts as Responses parts; images only where the role allows them; blank text dropped."""
        out: list[dict[str, Any]] = []
        for part in content_parts(index, turn):
            if part["type"] == "text":
                if part["text"].strip():
                    out.append({"type": text_type, "text": part["text"]})
                continue
            if turn.role not in ("user", "tool"):
                raise ProviderContractError(
                    f"{turn.role} {at(turn, index)} has an image; the Responses API accepts images only in "
                    "user messages and function call outputs",
                    rule="part_not_allowed",
                    index=index,
                    refs=(turn.ref,),
                )
            image = part["image_url"]
            out.append({"type": "input_image", "image_url": image["url"], "detail": image.get("detail", "auto")})
        return out

    def _output(self, index: int | None, turn: Turn) -> dict[str, Any]:
        """One ``function_call_output`` item: string output as given, parts as input parts."""
        output: str | list[dict[str, Any]]
        if isinstance(turn.content, str) or turn.content is None:
            output = turn.content or ""
        else:
            output = self._parts(index, turn, "input_text") or ""
        return {"type": "function_call_output", "call_id": str(turn.tool_call_id), "output": output}

    # -- counting -------------------------------------------------------------------------------

    def base_tokens(self, counter: TokenCounter) -> int:
        """Tokens every request costs: the reply priming (3, as for Chat Completions)."""
        return REPLY_PRIMING

    def turn_tokens(self, turn: Turn, counter: TokenCounter) -> int:
        """Tokens the turn adds to a request (its instruction text, or its items), framing included.

        Raises:
            ProviderContractError: the turn cannot be rendered (see :meth:`build`).
        """
        if turn.role in _SYSTEM_ROLES:
            return self._instructions_tokens(self._instruction(None, turn), counter)
        return sum(self.item_tokens(item, counter) for item in self._items(None, turn))

    def _instructions_tokens(self, text: str, counter: TokenCounter) -> int:
        return TOKENS_PER_MESSAGE + counter.count("system") + counter.count(text)

    def item_tokens(self, item: Mapping[str, Any], counter: TokenCounter) -> int:
        """Tokens of one built input item (module docstring).

        Raises:
            ProviderContractError: an item or part type this counter does not know.
        """
        kind = item.get("type")
        if kind == "message":
            return (
                TOKENS_PER_MESSAGE + counter.count(str(item["role"])) + self._content_tokens(item["content"], counter)
            )
        if kind == "function_call":
            return TOOL_CALL_TOKENS + counter.count(str(item["name"])) + counter.count(str(item["arguments"]))
        if kind == "function_call_output":
            return TOKENS_PER_MESSAGE + counter.count("tool") + self._content_tokens(item["output"], counter)
        if kind in REASONING_ITEM_TYPES:
            summary = " ".join(str(s.get("text") or "") for s in item.get("summary") or () if isinstance(s, Mapping))
            encrypted = str(item.get("encrypted_content") or "")
            return TOOL_CALL_TOKENS + (counter.count(summary) if summary else 0) + (len(encrypted) * 3 // 4) // 4
        raise ProviderContractError(f"cannot count input item of type {kind!r}", rule="unknown_item")

    def _content_tokens(self, content: Any, counter: TokenCounter) -> int:
        if isinstance(content, str):
            return counter.count(content)
        total = 0
        for part in content:
            kind = part.get("type")
            if kind in ("input_text", "output_text"):
                total += counter.count(part["text"])
            elif kind == "refusal":
                total += counter.count(part["refusal"])
            elif kind == "input_image":
                size = image_size_from_url(str(part.get("image_url") or ""))
                total += openai_image_tokens(size, str(part.get("detail") or "auto"), self.image_rates)
            else:
                raise ProviderContractError(f"cannot count content part of type {kind!r}", rule="unknown_part")
        return total

    def tools_tokens(self, tools: Sequence[Mapping[str, Any]], counter: TokenCounter) -> int:
        """Tokens of the tool schemas (OpenAI Chat ``tools`` form in; the cookbook formula; 0 without tools).

        Raises:
            InputError: a tool is not an OpenAI function tool (names its index and field).
        """
        return self._chat.tools_tokens(tools, counter)

    def count(self, payload: Mapping[str, Any], counter: TokenCounter) -> int:
        """Input tokens of a built payload: priming + instructions + every item + the tool schemas.

        Raises:
            ProviderContractError: an item or part type this counter does not know.
        """
        tokens = REPLY_PRIMING + sum(self.item_tokens(item, counter) for item in payload.get("input", ()))
        if payload.get("instructions"):
            tokens += self._instructions_tokens(str(payload["instructions"]), counter)
        chat_tools = [
            {"type": "function", "function": {k: v for k, v in t.items() if k != "type"}}
            for t in payload.get("tools") or ()
        ]
        return tokens + self._chat.tools_tokens(chat_tools, counter)

    # -- validation -----------------------------------------------------------------------------

    def validate(self, payload: Mapping[str, Any]) -> None:
        """Check the Responses rules on a payload.

        Rules: only the request keys this serializer sends; ``store`` is ``false``, ``truncation``
        ``"disabled"`` and ``include`` asks for ``reasoning.encrypted_content`` (client-managed state: the
        payload is the whole context); ``instructions`` absent or non-blank text; ``input`` a non-empty list
        of known item types with their documented keys; message content a non-blank string or parts the
        role accepts; every ``function_call`` has a valid, request-unique ``call_id``, a valid name and
        string arguments, and is answered by a ``function_call_output`` before any message (reasoning items
        of the same turn may stand between parallel calls); no
        output without an unanswered call before it; a reasoning item is followed by the assistant output
        it belongs to (another reasoning item, an assistant message or a function call); tools are function
        tools with a valid name, ``parameters`` and a boolean ``strict``.

        Raises:
            ProviderContractError: with ``index`` (input item position) and ``rule``.
        """
        unknown = set(payload) - _PAYLOAD_KEYS
        if unknown:
            raise ProviderContractError(
                f"payload has keys this serializer never sends: {sorted(unknown)}", rule="unknown_key"
            )
        if payload.get("store") is not False:
            raise ProviderContractError(
                "store must be false: the payload carries the whole context", rule="store_not_false"
            )
        if payload.get("truncation") != "disabled":
            raise ProviderContractError(
                "truncation must be 'disabled': the provider must not drop what the manifest says was sent",
                rule="truncation_not_disabled",
            )
        if ENCRYPTED_REASONING not in (payload.get("include") or ()):
            raise ProviderContractError(
                f"include must ask for {ENCRYPTED_REASONING!r} so reasoning can be sent back",
                rule="reasoning_not_included",
            )
        instructions = payload.get("instructions")
        if instructions is not None and (not isinstance(instructions, str) or not instructions.strip()):
            raise ProviderContractError("instructions must be non-blank text", rule="empty_content")
        items = payload.get("input")
        if not isinstance(items, list) or not items:
            raise ProviderContractError("payload has no input items", rule="no_input")
        _check_items(items)
        _check_tools(payload.get("tools") or ())


def responses_tools(tools: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """OpenAI Chat ``tools`` entries as Responses function tools (``strict`` false unless given).

    Raises:
        InputError: an entry is not a function tool or has no string name (names index and field).
    """
    out = []
    for function in function_definitions(tools):
        tool: dict[str, Any] = {"type": "function", "name": function["name"]}
        if function.get("description"):
            tool["description"] = function["description"]
        tool["parameters"] = function.get("parameters") or {"type": "object", "properties": {}}
        tool["strict"] = bool(function.get("strict", False))
        out.append(tool)
    return out


def _precede(items: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Move reasoning items that ended up after a turn's last output item to just before it.

    A reasoning item must be followed by the output it belongs to; one recorded at a position past the
    turn's items (or with its output left out) goes right before the turn's last output item.
    """
    tail = len(items)
    while tail and items[tail - 1].get("type") in REASONING_ITEM_TYPES:
        tail -= 1
    if tail in (0, len(items)):
        return items
    return [*items[: tail - 1], *items[tail:], items[tail - 1]]


def _fail(index: int, rule: str, what: str) -> None:
    raise ProviderContractError(f"input item {index}: {what} (rule {rule})", rule=rule, index=index)


def _check_items(items: list[Any]) -> None:
    """Item keys, message content, call/output pairing, unique call ids and reasoning placement."""
    pending: set[str] = set()
    seen: set[str] = set()
    for index, item in enumerate(items):
        kind = item.get("type") if isinstance(item, Mapping) else None
        if kind not in _ITEM_KEYS:
            _fail(index, "unknown_item", f"unknown input item type {kind!r}")
        extra = set(item) - _ITEM_KEYS[kind]
        if extra:
            _fail(index, "unknown_key", f"{kind} item has keys the API does not define: {sorted(extra)}")
        if kind == "function_call_output":
            if item.get("call_id") not in pending:
                _fail(
                    index,
                    "tool_result_without_call",
                    f"output for {item.get('call_id')!r} has no unanswered call before it",
                )
            pending.discard(item["call_id"])
            _check_output(index, item.get("output"))
            continue
        if kind == "function_call":
            _check_call(index, item, seen)
            pending.add(item["call_id"])
            continue
        if pending and kind not in REASONING_ITEM_TYPES:
            _fail(index, "tool_call_unanswered", f"a {kind} item comes before the outputs for {sorted(pending)}")
        if kind == "message":
            _check_message(index, item)
        elif kind == "reasoning":
            _check_reasoning(index, item, items[index + 1] if index + 1 < len(items) else None)
        elif not isinstance(item.get("encrypted_content"), str):
            _fail(index, "bad_compaction", "a compaction item needs its encrypted_content")
    if pending:
        _fail(len(items) - 1, "tool_call_unanswered", f"no outputs for function calls {sorted(pending)}")


def _check_call(index: int, item: Mapping[str, Any], seen: set[str]) -> None:
    call_id, name = item.get("call_id"), item.get("name")
    if not isinstance(call_id, str) or not CALL_ID.fullmatch(call_id):
        _fail(index, "bad_call_id", f"call_id {call_id!r} must match [a-zA-Z0-9_-]+")
    if call_id in seen:
        _fail(index, "duplicate_tool_call_id", f"call_id {call_id!r} was used by an earlier function call")
    seen.add(call_id)
    if not isinstance(name, str) or not TOOL_NAME.fullmatch(name):
        _fail(index, "bad_tool_name", f"function call name {name!r} does not match ^[a-zA-Z0-9_-]{{1,64}}$")
    if not isinstance(item.get("arguments"), str):
        _fail(index, "bad_tool_calls", "function call arguments must be a string")


def _check_output(index: int, output: Any) -> None:
    if isinstance(output, str):
        return
    if not isinstance(output, list) or not output:
        _fail(index, "bad_output", "output must be a string or a non-empty list of input parts")
    for part in output:
        if not isinstance(part, Mapping) or part.get("type") not in _OUTPUT_PART_TYPES:
            _fail(index, "part_not_allowed", f"an output cannot hold a {part!r} part")


def _check_message(index: int, item: Mapping[str, Any]) -> None:
    role, content = item.get("role"), item.get("content")
    if role not in _PART_TYPES:
        _fail(index, "unknown_role", f"unknown role {role!r}")
    if isinstance(content, str):
        if not content.strip():
            _fail(index, "empty_content", "message content is blank")
        return
    if not isinstance(content, list) or not content:
        _fail(index, "empty_content", "message content must be a non-blank string or a non-empty list of parts")
    for part in content:
        kind = part.get("type") if isinstance(part, Mapping) else None
        if kind not in _PART_TYPES[role]:
            _fail(index, "part_not_allowed", f"{role} messages cannot hold {kind!r} parts")
        if kind in ("input_text", "output_text") and not str(part.get("text", "")).strip():
            _fail(index, "empty_content", "text parts must not be blank")
        if kind == "input_image" and part.get("detail") not in ("low", "high", "auto"):
            _fail(index, "bad_image", "input_image needs a detail of low, high or auto")


def _check_reasoning(index: int, item: Mapping[str, Any], following: Any) -> None:
    if not isinstance(item.get("summary"), list):
        _fail(index, "bad_reasoning", "a reasoning item needs its summary list")
    kind = following.get("type") if isinstance(following, Mapping) else None
    role = following.get("role") if isinstance(following, Mapping) else None
    if not (kind in ("reasoning", "function_call") or (kind == "message" and role == "assistant")):
        _fail(
            index,
            "reasoning_without_following_item",
            "a reasoning item must be followed by the assistant output it belongs to",
        )


def _check_tools(tools: Sequence[Any]) -> None:
    for position, tool in enumerate(tools):
        name = tool.get("name") if isinstance(tool, Mapping) else None
        if not isinstance(tool, Mapping) or tool.get("type") != "function":
            raise ProviderContractError(f"tools[{position}] is not a function tool", rule="bad_tool")
        if not isinstance(name, str) or not TOOL_NAME.fullmatch(name):
            raise ProviderContractError(
                f"tools[{position}]: function name {name!r} does not match ^[a-zA-Z0-9_-]{{1,64}}$",
                rule="bad_tool_name",
            )
        if not isinstance(tool.get("parameters"), Mapping) or not isinstance(tool.get("strict"), bool):
            raise ProviderContractError(f"tools[{position}] needs parameters and a boolean strict", rule="bad_tool")
