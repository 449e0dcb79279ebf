"""Turns recorded before the first user turn: kept, never dropped for role order.

Autonomous, scheduled and cron agents (seed 004 §4.13) start without a user turn: the run begins with the
agent's own turns and tool calls, and a compaction can leave an unsummarised tool exchange (an open call's
late result) ahead of the first user-role turn. Those leading units are the *preamble*: chosen units that
precede every live user-role unit (a user message, or a memory, compaction or checkpoint rendered as a user
data turn). What happens to them depends on the API contract:

* OpenAI Chat Completions and Responses accept an assistant turn first (the API reference puts no rule on the
  first non-system message): the preamble is sent as it is;
* Anthropic Messages requires the first message to be a user message: each preamble unit is carried as one
  user turn holding its turns as delimited data (``<data … note="recorded before the first user turn">``:
  the assistant's text and tool calls, each tool result with its call id), which the serializer merges with
  the user turn that follows. Transform ``carried_as_data``.

Leading units that *follow* a live user turn left out for budget are not a preamble: the assembler still drops
them with ``role_order`` so the payload starts at a user turn (case B04).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Container, MutableMapping, Sequence

from ctxledger.assemble.costing import Coster
from ctxledger.assemble.select import Option
from ctxledger.assemble.units import Unit, render_data_block
from ctxledger.budget import BudgetLedger
from ctxledger.serialize.base import Turn

ASSISTANT_FIRST_APIS = frozenset({"openai-chat", "openai-responses"})
"""API contracts that accept a non-user turn right after the instructions."""

CARRIED = "carried_as_data"
"""Transform of a preamble unit carried inside a user turn as delimited data."""

NOTE = "recorded before the first user turn"


def preamble(chosen: Sequence[Unit], live: Sequence[Unit]) -> list[Unit]:
    """The leading chosen units that precede every live user-role unit (see the module docstring)."""
    first_user = min((u.seq for u in live if u.role == "user"), default=None)
    out = []
    for unit in chosen:
        if unit.role == "user" or (first_user is not None and unit.seq > first_user):
            break
        out.append(unit)
    return out


def _turn_text(turn: Turn) -> str:
    content = turn.content
    if isinstance(content, str) or content is None:
        text = content or ""
    else:
        text = "\n".join(str(p.get("text", "")) if p.get("type") == "text" else "[image]" for p in content)
    if turn.role == "tool":
        error = " (error)" if turn.is_error else ""
        return f"tool result of {turn.tool_name or 'tool'} [{turn.tool_call_id}]{error}:\n{text}"
    lines = [f"{turn.role}: {text}"] if text else []
    lines += [f"{turn.role} called {c.name}({c.arguments}) [{c.call_id}]" for c in turn.tool_calls]
    return "\n".join(lines)


def as_data(unit: Unit, option: Option) -> Option:
    """``option`` with its turns carried as one delimited user data turn (tokens not yet recounted)."""
    text = "\n".join(t for t in (_turn_text(turn) for turn in option.turns) if t)
    turn = Turn(ref=unit.id, role="user", content=render_data_block(unit.records[0], text, {"note": NOTE}))
    return dataclasses.replace(option, turns=(turn,), transform=CARRIED, turn_tokens=())


def keep_preamble(
    api: str,
    chosen: Sequence[Unit],
    live: Sequence[Unit],
    options: MutableMapping[str, Option],
    coster: Coster,
    ledger: BudgetLedger,
    budget_tokens: int,
    omit: Callable[[Unit], None],
    required: Container[str] = (),
) -> list[Unit]:
    """Keep the preamble of ``chosen``: as it is for :data:`ASSISTANT_FIRST_APIS`, else carried as data.

    Carried options are recounted with ``coster`` and the budget ledger charged the difference; when the data
    form no longer fits ``budget_tokens`` (the chosen options' total), chosen units that are not ``required``
    are left out, lowest utility per token first (``omit`` records why, ``budget``), until it fits.

    Returns:
        The preamble units kept (the assembler's role-order step leaves them in place).
    """
    lead = preamble(chosen, live)
    if api in ASSISTANT_FIRST_APIS or not lead:
        return lead
    for unit in lead:
        old = options[unit.id]
        new = as_data(unit, old)
        tokens = sum(coster.turn_tokens(t) for t in new.turns)
        options[unit.id] = dataclasses.replace(new, tokens=tokens, turn_tokens=(tokens,))
        ledger.charge(unit.context_class.value, tokens - old.tokens)
    used = sum(o.tokens for o in options.values())
    optional = sorted((u for u in chosen if u.id not in required), key=lambda u: (options[u.id].density, u.seq))
    for unit in optional:
        if used <= budget_tokens:
            break
        if unit in lead:
            lead.remove(unit)
        dropped = options.pop(unit.id)
        used -= dropped.tokens
        ledger.charge(unit.context_class.value, -dropped.tokens)
        omit(unit)
    return lead
