"""The serialize phase: the chosen turns in order, the provider payload, its token count and hash."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ctxledger.assemble import stability
from ctxledger.assemble.costing import Coster
from ctxledger.assemble.phases.plan import Plan
from ctxledger.assemble.request import AssemblyRequest
from ctxledger.assemble.select import Option, payload_turns
from ctxledger.hashing import quick_content_hash
from ctxledger.serialize.anthropic_cache import with_breakpoints
from ctxledger.serialize.base import Serializer, Turn
from ctxledger.serialize.tool_names import request_tool_names, tool_name_map
from ctxledger.units import Unit


def _sum_costs(coster: Coster, turns: Sequence[Turn], tools: Sequence[Mapping[str, Any]]) -> int:
    return coster.base_tokens() + coster.tools_tokens(tools) + sum(coster.turn_tokens(t) for t in turns)


@dataclass(slots=True)
class Serialized:
    """The serialize phase's result.

    Attributes:
        turns: the payload's turns in order (instructions, then the chosen units by ``seq``).
        payload: the provider request body, validated.
        payload_hash: ``"sha256:<hex>"`` of the payload's canonical JSON.
        input_tokens: the payload's tokens, counted on its serialized form.
        prefix: what the payload shares with the previous assembly of the branch (``previous``, ``grown``,
            ``shared_tokens``, ``shared_messages``).
        parts: the payload's parts as :mod:`ctxledger.assemble.stability` remembers them for the next call.
        built_messages: the messages as built, before cache breakpoints.
    """

    turns: list[Turn]
    payload: dict[str, Any]
    payload_hash: str
    input_tokens: int
    prefix: dict[str, Any]
    parts: Any
    built_messages: tuple[Any, ...]


def serialize_payload(
    request: AssemblyRequest,
    fixed: Sequence[Unit],
    chosen: Sequence[Unit],
    options: Mapping[str, Option],
    costs: Mapping[str, int],
    tools: Sequence[Mapping[str, Any]],
    plan: Plan,
    previous: stability.PreviousAssembly | None,
    grown: bool,
    serializer: Serializer,
    coster: Coster,
    counter_for_payload: Any | None = None,
    recorded_prefix: stability.RecordedPrefix | None = None,
) -> Serialized:
    """Build, validate, count and hash the provider payload of ``fixed`` then ``chosen`` (each unit's option).

    Tool names the provider would refuse are renamed (``plan.tools["renamed"]``); for Anthropic Messages the
    instructions and the stable prefix get ``cache_control`` breakpoints (:func:`with_breakpoints`; Anthropic's
    prompt-caching rules: at most 4 breakpoints, a cached prefix of at least 1,024 tokens). ``previous`` and
    ``grown`` describe the assembly whose payload this one's shared prefix is measured against. ``input_tokens``
    is counted on the serialized payload by ``counter_for_payload`` (default: the coster's counter). A replay
    passes ``recorded_prefix``: the shared tokens and messages its manifest recorded stand for the measured ones,
    so the breakpoints go where the stored call put them even when the previous payload is not in memory.

    Returns:
        :class:`Serialized`.

    Raises:
        ProviderContractError: the payload breaks the provider's message rules (a bug; never sent).
    """
    turns = payload_turns(fixed, chosen, options)
    payload = serializer.build(turns, model=request.model, tools=tools)
    parts = stability.payload_parts(fixed, chosen, options, costs)
    if recorded_prefix is not None:
        prefix = {"previous": recorded_prefix.previous, "grown": grown, "shared_tokens": recorded_prefix.shared_tokens,
                  "shared_messages": recorded_prefix.shared_messages}  # fmt: skip
    else:
        prefix = {"previous": previous.assembly_id if previous else None, "grown": grown,
                  "shared_tokens": stability.shared_prefix_tokens(previous, parts),
                  "shared_messages": stability.shared_messages(previous, payload.get("messages") or [])}  # fmt: skip
    built_messages = tuple(payload.get("messages") or ())
    renamed = {k: v for k, v in tool_name_map(request_tool_names(turns, tools)).items() if k != v}
    if renamed:
        plan.tools["renamed"] = renamed
    counter = counter_for_payload or getattr(coster, "counter", None)
    input_tokens = serializer.count(payload, counter) if counter is not None else _sum_costs(coster, turns, tools)
    if request.api == "anthropic-messages":
        instructions = [t for t in turns if t.role in ("system", "developer")]
        head = coster.tools_tokens(tools) + sum(coster.turn_tokens(t) for t in instructions)
        payload = with_breakpoints(payload, stable_messages=prefix["shared_messages"],
                                   stable_tokens=prefix["shared_tokens"], input_tokens=input_tokens,
                                   head_tokens=head)  # fmt: skip
        serializer.validate(payload)
    return Serialized(turns, payload, quick_content_hash(payload), input_tokens, prefix, parts, built_messages)
