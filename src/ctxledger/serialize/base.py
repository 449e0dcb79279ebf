"""The neutral form serializers consume, and the serializer interface.

The assembler turns selected graph records into :class:`Turn` values: one per provider-visible
message, in ``seq`` order, carrying only model-facing fields (store-only fields such as ``meta``,
``external_id`` or token costs never appear here, so they can never reach a payload). A serializer turns
a sequence of turns into one provider's request payload and counts its tokens on that serialized form.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal, Protocol, runtime_checkable

from ctxledger.tokens import TokenCounter

TurnRole = Literal["system", "developer", "user", "assistant", "tool"]


@dataclass(frozen=True, slots=True)
class CallView:
    """A tool call as the model emitted it: provider ``call_id``, tool ``name``, JSON ``arguments`` text."""

    call_id: str
    name: str
    arguments: str


@dataclass(frozen=True, slots=True)
class Turn:
    """One provider-visible message in neutral form.

    Attributes:
        ref: id of the graph record it renders (for the manifest; never serialized).
        role: ``system``, ``developer``, ``user``, ``assistant`` or ``tool`` (a tool result).
        content: text, ``None`` (assistant turn with only tool calls), or OpenAI-style content parts
            (``{"type": "text", …}``, ``{"type": "image_url", …}``) kept intact.
        name: optional author name (OpenAI ``name``; rendered as a label for Anthropic).
        tool_calls: for assistant turns, the calls it requested (parallel calls in order).
        tool_call_id: for tool turns, the ``call_id`` it answers.
        tool_name: for tool turns, the tool's name.
        is_error: for tool turns, whether the result is an error.
        relayed: another participant's assistant turn shown to this call's participant as a user turn
            (multi-participant conversations): it carries its speaker's ``name``, and every serializer
            puts a visible ``"<name>: "`` label on its text, so it never reads as the model's own turn.
        thinking: for assistant turns, the provider's reasoning blocks as received (Anthropic ``thinking``
            / ``redacted_thinking`` blocks with their ``signature``), each with its position in the
            message's original content array (``None`` when unknown: before the other blocks). Only a
            serializer whose ``sends_thinking`` is true sends them, unmodified; the assembler drops them
            for the others and records the transform ``thinking_dropped``.
    """

    ref: str
    role: TurnRole
    content: str | tuple[Mapping[str, Any], ...] | None
    name: str | None = None
    tool_calls: tuple[CallView, ...] = ()
    tool_call_id: str | None = None
    tool_name: str | None = None
    is_error: bool = False
    relayed: bool = False
    thinking: tuple[tuple[int | None, Mapping[str, Any]], ...] = ()


@runtime_checkable
class Serializer(Protocol):
    """Turns neutral turns into one provider's request payload.

    Attributes:
        name: the API contract, e.g. ``"openai-chat"`` or ``"anthropic-messages"``.
    """

    name: str

    def turn_tokens(self, turn: Turn, counter: TokenCounter) -> int:
        """Tokens this turn adds to a payload, framing included (additive over turns)."""
        ...

    def tools_tokens(self, tools: Sequence[Mapping[str, Any]], counter: TokenCounter) -> int:
        """Tokens the tool schemas add to a request (OpenAI ``tools`` form in, provider form costed)."""
        ...

    def base_tokens(self, counter: TokenCounter) -> int:
        """Tokens every request costs regardless of content (e.g. reply priming)."""
        ...

    def build(self, turns: Sequence[Turn], *, model: str, tools: Sequence[Mapping[str, Any]] = ()) -> dict[str, Any]:
        """Return the request payload (a JSON-able dict) for ``turns`` in the given order, checked by :meth:`validate`.

        Raises:
            ProviderContractError: the turns cannot form a valid request under the provider's rules.
        """
        ...

    def count(self, payload: Mapping[str, Any], counter: TokenCounter) -> int:
        """Count the input tokens of a built payload on its serialized form."""
        ...

    def validate(self, payload: Mapping[str, Any]) -> None:
        """Check the provider's documented message rules. Raises ``ProviderContractError``."""
        ...
