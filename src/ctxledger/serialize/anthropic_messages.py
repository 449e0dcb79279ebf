"""Anthropic Messages serializer.

Rules followed, from Anthropic's Messages API reference and its *Tool use* guide
(docs.anthropic.com/en/api/messages, …/agents-and-tools/tool-use/implement-tool-use):

* ``system`` and ``developer`` turns go to the top-level ``system`` field (a string for one text block,
  a list of text blocks otherwise), in turn order; they are never messages;
* the first message is from the user and roles alternate: adjacent same-role turns are merged into one
  message as consecutive content blocks (text is never concatenated, no message is invented);
* an assistant's tool calls become ``tool_use`` blocks whose ``input`` is the parsed arguments object;
  arguments that are not a JSON object (a model can emit broken JSON) become
  ``{"_raw_arguments": "<text>"}`` so the failed call and its error result stay visible to the model
  rather than making the whole request fail; call ids are mapped to valid, request-unique ``tool_use``
  ids (:func:`ctxledger.serialize.call_ids.unique_call_ids`, the renaming every serializer shares),
  because OpenAI logs may reuse an id in later turns;
* tool results become ``tool_result`` blocks (``is_error`` when set), all results of one assistant turn
  in the one user message that follows it, before any user text merged after them;
* OpenAI ``image_url`` parts become ``image`` blocks (a ``base64`` source for data URLs, a ``url``
  source otherwise); empty or whitespace-only text blocks are never emitted (the API rejects them);
* an author ``name`` is rendered as a ``"<name>: "`` label on the turn's first text block; another
  participant's turn relayed as a user turn (``Turn.relayed``) is a user message labelled so, never
  merged into the assistant's own message;
* a request with ``tool_use`` or ``tool_result`` blocks must define tools (the API refuses it otherwise: "Requests
  which include tool_use or tool_result blocks must define tools."), and a definition is ``name``,
  ``description`` and ``input_schema``, a JSON Schema object (*Define tools* guide,
  platform.claude.com/docs/en/agents-and-tools/tool-use/define-tools): every tool a ``tool_use`` block names is
  defined, a tool whose schema is not sent by a minimal definition (:mod:`ctxledger.serialize.undeclared_tools`:
  the name, ``{"type": "object"}``, and a description saying why its schema is missing).

Extended thinking: an assistant turn's ``thinking`` / ``redacted_thinking`` blocks (``Turn.thinking``, from
``meta["thinking"]`` of an imported message) are sent back complete and unmodified, signature included, at
their original positions in the message (:func:`with_thinking`), on every assistant turn that has them.
Anthropic's *Thinking in tool and multi-turn workflows* guide
(platform.claude.com/docs/build-with-claude/thinking-tool-workflows) states the rule: when a tool result is
returned, the thinking blocks of the assistant message that made the call must come back with it, and the
assistant message must be echoed exactly as received (rebuilding it or filtering out ``redacted_thinking``
blocks is a 400 error). Older models strip thinking blocks of earlier turns themselves; models with
*preserved thinking* (…/build-with-claude/preserved-thinking) keep them and check that nothing before a block
changed, so an assembly that leaves out or compacts earlier history can fail that check: such requests need
the API's ``prefix_mismatch_behavior`` set to drop rather than reject. Reasoning blocks are counted (thinking
text, or the redacted data, plus :data:`TOOL_BLOCK_TOKENS`) and never excerpted; a turn relayed as a user
turn carries none.

Token counts are estimates (Anthropic publishes no tokenizer; its ``count_tokens`` endpoint is the
exact source and the margin must cover the difference): :data:`MESSAGE_TOKENS` plus the role's tokens per
message (and once for ``system``), text as text, images at Anthropic's pixel rate
(:func:`ctxledger.serialize.images.anthropic_image_tokens`), ``tool_use`` as name + canonical JSON input +
:data:`TOOL_BLOCK_TOKENS`, ``tool_result`` as its content + :data:`TOOL_BLOCK_TOKENS`, and tools as
the tool-use system prompt Anthropic documents (*Tool use pricing*: 346 tokens for ``auto``/``none``
on Claude 4 models) plus each definition's canonical JSON, minimal definitions included. Merging turns only
removes message framing, so ``count(build(turns, tools=tools)) <= base_tokens + tools_tokens(request_tools(turns,
tools)) + sum(turn_tokens)``.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from ctxledger.errors import NOTHING_TO_SEND, NothingToSend, ProviderContractError
from ctxledger.hashing import canonical_json
from ctxledger.json_text import decode_json
from ctxledger.serialize._turns import at, check_turns, content_parts, function_definitions, speaker_label
from ctxledger.serialize.anthropic_cache import check_breakpoints
from ctxledger.serialize.base import Turn
from ctxledger.serialize.call_ids import unique_call_ids
from ctxledger.serialize.images import (
    anthropic_image_tokens,
    base64_problem,
    image_size_from_base64,
    parse_data_url,
)
from ctxledger.serialize.tool_names import TOOL_NAME, rename_tools, wire_tool_name
from ctxledger.serialize.undeclared_tools import undeclared_tools
from ctxledger.tokens import TokenCounter

MESSAGE_TOKENS = 3
"""Framing per message besides its role (estimate, the OpenAI-measured value)."""

REPLY_PRIMING = 3
"""Tokens opening the assistant's reply (estimate)."""

TOOL_BLOCK_TOKENS = 5
"""Framing of one ``tool_use`` or ``tool_result`` block besides its content (estimate)."""

TOOL_USE_SYSTEM_PROMPT_TOKENS = 346
"""Tool-use system prompt Anthropic adds when tools are sent (Claude 4 family, tool choice auto/none)."""

IMAGE_MEDIA_TYPES = ("image/jpeg", "image/png", "image/gif", "image/webp")
"""Image media types the Messages API accepts."""

_BLOCK_TYPES: Mapping[str, frozenset[str]] = {
    "user": frozenset({"text", "image", "tool_result", "document"}),
    "assistant": frozenset({"text", "tool_use", "thinking", "redacted_thinking"}),
}
"""Content block types each message role may carry."""

_SYSTEM_ROLES = ("system", "developer")

_ID_PATTERN = re.compile(r"[a-zA-Z0-9_-]+")


class AnthropicMessagesSerializer:
    """Builds, validates and counts Anthropic Messages requests.

    Args:
        tool_system_prompt_tokens: the documented tool-use system prompt size of the target model.
        recall: the model has the ``recall`` tool (accepted like the other serializers; images go in tool
            results here, so no text of this format names a way to read them back).
    """

    name = "anthropic-messages"
    sends_thinking = True
    thinking_types = ("thinking", "redacted_thinking")
    """Assistant turns carry their ``thinking`` / ``redacted_thinking`` blocks (see the module docstring)."""
    defines_called_tools = True
    """Every tool a call names must be defined in ``tools`` (see the module docstring)."""

    def __init__(self, *, tool_system_prompt_tokens: int = TOOL_USE_SYSTEM_PROMPT_TOKENS, recall: bool = False) -> None:
        self.tool_system_prompt_tokens = tool_system_prompt_tokens
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
        """Return ``{"model", "system"?, "messages", "tools"?, "max_tokens"?}`` for ``turns`` in order.

        ``tools`` (OpenAI form) are sent with a minimal definition added for each tool the turns call and
        ``tools`` does not define (:meth:`request_tools`).

        Raises:
            ProviderContractError: tool pairing is broken, the first non-system turn is not from the
                user (names its ref), a turn renders to no content, or an image is where the API
                allows none.
            InputError: a content part or a tool definition is malformed.
        """
        check_turns(turns)
        turns, tools = rename_tools(unique_call_ids(turns), self.request_tools(turns, tools))
        payload: dict[str, Any] = {"model": model}
        system = [b for i, t in enumerate(turns) if t.role in _SYSTEM_ROLES for b in self._blocks(i, t)]
        if system:
            payload["system"] = _system_value(system)
        payload["messages"] = self._messages(turns)
        if tools:
            payload["tools"] = anthropic_tools(tools)
        if max_tokens is not None:
            payload["max_tokens"] = max_tokens
        self.validate(payload)
        return payload

    def request_tools(self, turns: Sequence[Turn], tools: Sequence[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
        """The tool definitions (OpenAI form) :meth:`build` sends for ``turns``; :meth:`tools_tokens` costs them.

        ``tools``, then a minimal definition (:func:`~ctxledger.serialize.undeclared_tools.minimal_definition`) for
        each tool the turns call and ``tools`` does not define, in name order.
        """
        return [*tools, *undeclared_tools(turns, tools)[0]]

    def _messages(self, turns: Sequence[Turn]) -> list[dict[str, Any]]:
        """Merge the non-system turns into alternating messages, first from the user."""
        messages: list[dict[str, Any]] = []
        for index, turn in enumerate(turns):
            if turn.role in _SYSTEM_ROLES:
                continue
            role = _message_role(turn)
            if not messages and role != "user":
                raise ProviderContractError(
                    f"the first non-system turn {turn.ref!r} (index {index}) is from the {turn.role}; "
                    "the Messages API requires the first message to be from the user",
                    rule="first_not_user",
                    index=index,
                    refs=(turn.ref,),
                )
            blocks = self._blocks(index, turn)
            if messages and messages[-1]["role"] == role:
                messages[-1]["content"].extend(blocks)
            else:
                messages.append({"role": role, "content": blocks})
        if not messages:
            raise NothingToSend(NOTHING_TO_SEND, rule="no_messages")
        return messages

    def _blocks(self, index: int | None, turn: Turn) -> list[dict[str, Any]]:
        """The content blocks one turn renders to (never empty)."""
        if turn.role == "tool":
            return [self._tool_result(index, turn)]
        blocks = self._content_blocks(index, turn)
        if turn.name:
            blocks = _label(turn.name, blocks)
        blocks += [_tool_use(call.call_id, wire_tool_name(call.name), call.arguments) for call in turn.tool_calls]
        thinking = [(pos, b) for pos, b in turn.thinking if b.get("type") in self.thinking_types]
        if turn.role == "assistant" and thinking:
            blocks = with_thinking(blocks, thinking)
        if not blocks:
            raise ProviderContractError(
                f"{turn.role} {at(turn, index)} has no non-blank content to send",
                rule="empty_turn",
                index=index,
                refs=(turn.ref,),
            )
        return blocks

    def _content_blocks(self, index: int | None, turn: Turn) -> list[dict[str, Any]]:
        """Text and image blocks of the turn's content; images only where the role allows them."""
        blocks = []
        for part in content_parts(index, turn):
            if part["type"] == "text":
                if part["text"].strip():
                    blocks.append({"type": "text", "text": part["text"]})
                continue
            if turn.role not in ("user", "tool"):
                raise ProviderContractError(
                    f"{turn.role} {at(turn, index)} has an image; Anthropic accepts images "
                    "only in user content and tool results",
                    rule="part_not_allowed",
                    index=index,
                    refs=(turn.ref,),
                )
            blocks.append(_image_block(index, turn, part["image_url"]["url"]))
        return blocks

    def _tool_result(self, index: int | None, turn: Turn) -> dict[str, Any]:
        """One ``tool_result`` block; string content kept as given, parts as blocks."""
        block: dict[str, Any] = {"type": "tool_result", "tool_use_id": str(turn.tool_call_id)}
        if isinstance(turn.content, str):
            if turn.content.strip():
                block["content"] = turn.content
        else:
            content = self._content_blocks(index, turn)
            if content:
                block["content"] = content
        if turn.is_error:
            block["is_error"] = True
        return block

    # -- counting -------------------------------------------------------------------------------

    def base_tokens(self, counter: TokenCounter) -> int:
        """Tokens every request costs: the reply priming (estimate, 3)."""
        return REPLY_PRIMING

    def turn_tokens(self, turn: Turn, counter: TokenCounter) -> int:
        """Tokens the turn adds when sent as its own message (or system entry), framing included.

        Raises:
            ProviderContractError: the turn cannot be rendered (see :meth:`build`).
        """
        role = "system" if turn.role in _SYSTEM_ROLES else _message_role(turn)
        blocks = self._blocks(None, turn)
        return MESSAGE_TOKENS + counter.count(role) + sum(block_tokens(b, counter) for b in blocks)

    def tools_tokens(self, tools: Sequence[Mapping[str, Any]], counter: TokenCounter) -> int:
        """Tokens of the tool definitions (OpenAI form in), costed in Anthropic form; 0 without tools.

        Raises:
            InputError: a tool is not an OpenAI function tool (names its index and field).
        """
        return self._anthropic_tools_tokens(anthropic_tools(tools), counter)

    def _anthropic_tools_tokens(self, tools: Sequence[Mapping[str, Any]], counter: TokenCounter) -> int:
        """Tool-use system prompt + the canonical JSON of each Anthropic tool definition."""
        if not tools:
            return 0
        return self.tool_system_prompt_tokens + sum(counter.count(canonical_json(t)) for t in tools)

    def merged_framing(self, turns: Sequence[Turn], counter: TokenCounter) -> int:
        """Message framing :meth:`turn_tokens` charges ``turns`` (in payload order) that :meth:`build` does not send.

        A turn of the same message role as the non-system turn before it is merged into that message, and every
        ``system`` / ``developer`` turn after the first joins the one ``system`` field (the Messages API's
        alternating roles and top-level ``system``, as :meth:`build` follows them): each such turn's
        ``MESSAGE_TOKENS`` plus its role's tokens is charged but not sent. So ``count(build(turns, tools=tools))
        == base_tokens + tools_tokens(request_tools(turns, tools)) + sum(turn_tokens) - merged_framing(turns)``.

        Returns:
            Tokens under ``counter`` (0 when no two adjacent turns share a message).
        """
        saved, previous, system_seen = 0, None, False
        for turn in turns:
            if turn.role in _SYSTEM_ROLES:
                if system_seen:
                    saved += MESSAGE_TOKENS + counter.count("system")
                system_seen = True
                continue
            role = _message_role(turn)
            if role == previous:
                saved += MESSAGE_TOKENS + counter.count(role)
            previous = role
        return saved

    def count(self, payload: Mapping[str, Any], counter: TokenCounter) -> int:
        """Input tokens of a built payload: priming + system + every message + the tools.

        Raises:
            ProviderContractError: a block type this counter does not know.
        """
        tokens = REPLY_PRIMING + self._anthropic_tools_tokens(payload.get("tools") or (), counter)
        system = payload.get("system")
        if system:
            tokens += MESSAGE_TOKENS + counter.count("system") + _content_tokens(system, counter)
        for message in payload.get("messages", ()):
            tokens += MESSAGE_TOKENS + counter.count(str(message["role"]))
            tokens += _content_tokens(message["content"], counter)
        return tokens

    # -- validation -----------------------------------------------------------------------------

    def validate(self, payload: Mapping[str, Any]) -> None:
        """Check the Messages API rules on a payload.

        Rules: ``system`` is top-level, never a message role; the first message is from the user; roles
        alternate; content is never empty and text blocks are never blank; block types fit the role;
        every ``tool_use`` is answered by a ``tool_result`` in the next (user) message, results first;
        no ``tool_result`` without its ``tool_use`` right before it; ``tool_use`` ids are unique; at most four
        ``cache_control`` breakpoints, none on a thinking block (:mod:`ctxledger.serialize.anthropic_cache`); every
        tool and ``tool_use`` name matches ``^[a-zA-Z0-9_-]{1,64}$`` (:mod:`ctxledger.serialize.tool_names`;
        :meth:`build` maps recorded names to such names, so this only guards against a bug); a payload with
        ``tool_use`` or ``tool_result`` blocks defines tools (rule ``tools_undefined``, the API's own rule), and
        one for every name a ``tool_use`` block calls (rule ``tool_undefined``).

        Raises:
            ProviderContractError: with ``index`` (message position) and ``rule``.
        """
        _check_system(payload.get("system"))
        check_breakpoints(payload)
        messages = payload.get("messages")
        if not isinstance(messages, list) or not messages:
            raise NothingToSend(NOTHING_TO_SEND, rule="no_messages")
        pending: list[str] = []
        seen: set[str] = set()
        previous = None
        for index, message in enumerate(messages):
            role = _check_message(index, message, previous)
            blocks = message["content"] if isinstance(message["content"], list) else []
            _check_results(index, blocks, pending)
            pending = _tool_use_ids(index, blocks, seen)
            previous = role
        if pending:
            _fail(len(messages) - 1, "tool_call_unanswered", f"no tool_result for {pending}")
        for position, tool in enumerate(payload.get("tools") or ()):
            name = tool.get("name") if isinstance(tool, Mapping) else None
            if not isinstance(name, str) or not TOOL_NAME.fullmatch(name):
                raise ProviderContractError(
                    f"tools[{position}]: name {name!r} does not match ^[a-zA-Z0-9_-]{{1,64}}$", rule="bad_tool_name"
                )
        _check_tools_defined(messages, payload.get("tools") or ())


def anthropic_tools(tools: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Convert OpenAI function tools to ``{"name", "description"?, "input_schema"}``; store keys are dropped.

    Raises:
        InputError: a tool is not an OpenAI function tool (names its index and field).
    """
    out = []
    for function in function_definitions(tools):
        tool: dict[str, Any] = {"name": function["name"]}
        if function.get("description"):
            tool["description"] = function["description"]
        tool["input_schema"] = function.get("parameters") or {"type": "object", "properties": {}}
        out.append(tool)
    return out


def block_tokens(block: Mapping[str, Any], counter: TokenCounter) -> int:
    """Estimated tokens of one content block (see the module docstring).

    Raises:
        ProviderContractError: the block type is not one this serializer emits.
    """
    kind = block.get("type")
    if kind == "text":
        return counter.count(block["text"])
    if kind == "image":
        source = block["source"]
        size = image_size_from_base64(source["data"]) if source.get("type") == "base64" else None
        return anthropic_image_tokens(size)
    if kind == "tool_use":
        return TOOL_BLOCK_TOKENS + counter.count(block["name"]) + counter.count(canonical_json(block["input"]))
    if kind == "tool_result":
        return TOOL_BLOCK_TOKENS + _content_tokens(block.get("content") or "", counter)
    if kind == "thinking":
        return TOOL_BLOCK_TOKENS + counter.count(str(block.get("thinking") or ""))
    if kind == "redacted_thinking":
        return TOOL_BLOCK_TOKENS + counter.count(str(block.get("data") or ""))
    raise ProviderContractError(f"cannot count content block of type {kind!r}", rule="unknown_block")


def with_thinking(
    blocks: Sequence[dict[str, Any]], thinking: Sequence[tuple[int | None, Mapping[str, Any]]]
) -> list[dict[str, Any]]:
    """Put an assistant turn's reasoning blocks back where they were in the message it was imported from.

    Each block goes, as a copy of the block as received (signature and all), to its original position in
    the content array (clamped to the end); blocks without a position lead, in their order, which is where
    the API returns them. Nothing in a reasoning block is changed.
    """
    out = list(blocks)
    unplaced = [dict(b) for pos, b in thinking if pos is None]
    for pos, block in sorted(((pos, b) for pos, b in thinking if pos is not None), key=lambda p: p[0]):
        out.insert(min(pos, len(out)), dict(block))
    return [*unplaced, *out]


def _content_tokens(content: str | Sequence[Mapping[str, Any]], counter: TokenCounter) -> int:
    """Tokens of a string or of a list of blocks."""
    if isinstance(content, str):
        return counter.count(content)
    return sum(block_tokens(b, counter) for b in content)


def _message_role(turn: Turn) -> str:
    """``assistant`` for assistant turns; ``user`` for user turns and tool results."""
    return "assistant" if turn.role == "assistant" else "user"


def _system_value(blocks: list[dict[str, Any]]) -> str | list[dict[str, Any]]:
    """One text block becomes a plain string; several stay a list of text blocks."""
    return blocks[0]["text"] if len(blocks) == 1 else blocks


def _label(name: str, blocks: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Prefix the first text block with ``"<name>: "``, or lead with a ``"<name>:"`` block."""
    if blocks and blocks[0]["type"] == "text":
        return [{"type": "text", "text": speaker_label(name, blocks[0]["text"])}, *blocks[1:]]
    return [{"type": "text", "text": speaker_label(name, "")}, *blocks]


def _tool_use(call_id: str, name: str, arguments: str) -> dict[str, Any]:
    """A ``tool_use`` block; arguments that are not a JSON object are kept as ``{"_raw_arguments": text}``.

    ``input`` must be an object, so arguments that do not decode (malformed, or nested too deep:
    :mod:`ctxledger.json_text`) are kept that way too.
    """
    parsed = decode_json(arguments) if arguments.strip() else {}
    if not isinstance(parsed, dict):
        parsed = {"_raw_arguments": arguments}
    return {"type": "tool_use", "id": call_id, "name": name, "input": parsed}


def _image_block(index: int | None, turn: Turn, url: str) -> dict[str, Any]:
    """An ``image`` block: base64 source from a data URL, url source otherwise."""
    data_url = parse_data_url(url)
    if data_url is None:
        if url.startswith("data:"):
            raise ProviderContractError(
                f"{at(turn, index)} has a data URL that is not base64",
                rule="bad_image",
                index=index,
                refs=(turn.ref,),
            )
        return {"type": "image", "source": {"type": "url", "url": url}}
    if data_url.media_type not in IMAGE_MEDIA_TYPES:
        raise ProviderContractError(
            f"{at(turn, index)} has an image of type {data_url.media_type!r}; "
            f"the Messages API accepts {IMAGE_MEDIA_TYPES}",
            rule="unsupported_image_type",
            index=index,
            refs=(turn.ref,),
        )
    problem = base64_problem(data_url.data)
    if problem is not None:
        raise ProviderContractError(
            f"{at(turn, index)} has an image that cannot be sent: {problem}",
            rule="bad_image",
            index=index,
            refs=(turn.ref,),
        )
    source = {"type": "base64", "media_type": data_url.media_type, "data": data_url.data}
    return {"type": "image", "source": source}


def _fail(index: int, rule: str, what: str) -> None:
    """Raise the validation error for message ``index``."""
    raise ProviderContractError(f"message {index}: {what} (rule {rule})", rule=rule, index=index)


def _check_system(system: Any) -> None:
    """``system`` is absent, a non-blank string, or a non-empty list of non-blank text blocks."""
    if system is None:
        return
    if isinstance(system, str):
        if not system.strip():
            raise ProviderContractError("system is blank", rule="empty_content")
        return
    if not isinstance(system, list) or not system:
        raise ProviderContractError("system must be a string or a non-empty list of text blocks", rule="bad_system")
    for block in system:
        if not isinstance(block, Mapping) or block.get("type") != "text" or not str(block.get("text", "")).strip():
            raise ProviderContractError("system blocks must be non-blank text blocks", rule="bad_system")


def _check_message(index: int, message: Any, previous: str | None) -> str:
    """Keys, role order and content of one message; returns its role."""
    if not isinstance(message, Mapping) or set(message) - {"role", "content"}:
        _fail(index, "unknown_key", "a message has only 'role' and 'content'")
    role = message.get("role")
    if role == "system":
        _fail(index, "system_in_messages", "system goes in the top-level 'system' field, not in messages")
    if role not in _BLOCK_TYPES:
        _fail(index, "unknown_role", f"unknown role {role!r}")
    if previous is None and role != "user":
        _fail(index, "first_not_user", "the first message must be from the user")
    if role == previous:
        _fail(index, "roles_not_alternating", f"two {role} messages in a row")
    _check_content(index, role, message.get("content"))
    return role


def _check_content(index: int, role: str, content: Any) -> None:
    """Content is a non-blank string or a non-empty list of blocks the role may carry."""
    if isinstance(content, str):
        if not content.strip():
            _fail(index, "empty_content", "content is blank")
        return
    if not isinstance(content, list) or not content:
        _fail(index, "empty_content", "content is empty")
    for block in content:
        kind = block.get("type") if isinstance(block, Mapping) else None
        if kind not in _BLOCK_TYPES[role]:
            _fail(index, "block_not_allowed", f"{role} messages cannot hold {kind!r} blocks")
        if kind == "text" and not str(block.get("text", "")).strip():
            _fail(index, "empty_content", "text blocks must not be blank")
        if kind == "tool_use" and not (
            isinstance(block.get("id"), str)
            and _ID_PATTERN.fullmatch(block["id"])
            and isinstance(block.get("input"), dict)
        ):
            _fail(index, "bad_tool_use", "tool_use needs an id matching [a-zA-Z0-9_-]+ and an object input")


def _check_results(index: int, blocks: list[Any], pending: list[str]) -> None:
    """The results answering ``pending`` lead this message; no result answers anything else."""
    leading = 0
    while leading < len(blocks) and blocks[leading].get("type") == "tool_result":
        leading += 1
    if any(b.get("type") == "tool_result" for b in blocks[leading:]):
        _fail(index, "tool_result_not_first", "tool_result blocks must come before any other content")
    answered = [b.get("tool_use_id") for b in blocks[:leading]]
    for call_id in answered:
        if call_id not in pending:
            _fail(
                index,
                "tool_result_without_call",
                f"tool_result for {call_id!r} has no tool_use right before it",
            )
    missing = sorted(set(pending) - set(answered))
    if missing:
        _fail(index, "tool_call_unanswered", f"no tool_result for {missing} in the message after the tool_use")
    if len(set(answered)) != len(answered):
        _fail(index, "duplicate_tool_result", f"a tool_use is answered twice: {answered}")


def _check_tools_defined(messages: Sequence[Mapping[str, Any]], tools: Sequence[Any]) -> None:
    """Tool blocks need defined tools, and each ``tool_use`` name a definition of that name."""
    defined = {t.get("name") for t in tools if isinstance(t, Mapping)}
    for index, message in enumerate(messages):
        for block in message["content"] if isinstance(message["content"], list) else ():
            kind = block.get("type")
            if kind in ("tool_use", "tool_result") and not tools:
                _fail(
                    index,
                    "tools_undefined",
                    f"a {kind} block in a request that defines no tools (the API refuses it: requests which "
                    "include tool_use or tool_result blocks must define tools)",
                )
            if kind == "tool_use" and block.get("name") not in defined:
                _fail(index, "tool_undefined", f"tool_use calls {block.get('name')!r}, which no tool definition names")


def _tool_use_ids(index: int, blocks: list[Any], seen: set[str]) -> list[str]:
    """Ids of this message's ``tool_use`` blocks, checked unique across the request."""
    ids = [b["id"] for b in blocks if b.get("type") == "tool_use"]
    for block in blocks:
        if block.get("type") == "tool_use" and not TOOL_NAME.fullmatch(str(block.get("name"))):
            _fail(index, "bad_tool_name", f"tool_use name {block.get('name')!r} does not match ^[a-zA-Z0-9_-]{{1,64}}$")
    for call_id in ids:
        if call_id in seen:
            _fail(index, "duplicate_tool_call_id", f"tool_use id {call_id!r} is used twice")
        seen.add(call_id)
    return ids
