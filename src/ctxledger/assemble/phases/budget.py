"""The budget phase: ``B_input`` checked against the fixed blocks and the required units; ``B_dynamic``."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ctxledger.assemble.costing import KEY_CACHE_SIZE, Coster
from ctxledger.assemble.phases.plan import Plan
from ctxledger.assemble.request import AssemblyRequest
from ctxledger.assemble.select import Option
from ctxledger.assemble.snapshot import Snapshot
from ctxledger.budget import Budget, BudgetLedger, contract_budget
from ctxledger.errors import BudgetItem
from ctxledger.policy.base import VERBATIM_REASONS, Policy
from ctxledger.units import Unit, UnitKind

REQUIRED_VERBATIM_SHARE = 1.0
"""A required unit whose verbatim form costs more than this share of ``B_dynamic`` (tokens) is offered only as
exact excerpts (:func:`oversized_required`): the bytes it shows are the stored bytes, with locators to the rest.
``1.0``: only when it cannot fit at all — a required output that fits is sent whole (the agent may need all of
it, e.g. a file it is about to edit), however little room it leaves the rest."""


def effective_budget(request: AssemblyRequest, policy: Policy) -> Budget:
    """The request's budget, with ``B_input`` capped by the bound contract's allocation (seed 001 ledger)."""
    return contract_budget(request.budget(), policy.contract.max_input_tokens if policy.contract is not None else None)


def _short(units: Sequence[Unit], turn_costs: Mapping[str, tuple[int, ...]], dynamic: int) -> bool:
    """Whether the live units after the filters cost less than ``B_dynamic``: too few to fill it."""
    live = 0
    for unit in units:
        if unit.kind is not UnitKind.INSTRUCTION:
            live += sum(turn_costs[unit.id])
            if live >= dynamic:
                return False
    return True


def _turn_costs(snap: Snapshot, coster: Coster, units: Sequence[Unit]) -> dict[str, tuple[int, ...]]:
    """Per-turn costs of each unit: the snapshot's cache for its own units, else counted.

    Others (annotated by a mark, or from another branch) are counted once per unit object and coster and
    kept on the snapshot's memo.
    """
    own = unit_turn_costs(snap, coster)
    at = snap.reach_index.unit_of
    others = snap.memo.setdefault(("turn_costs", coster.counter_id), {})
    out: dict[str, tuple[int, ...]] = {}
    missing: list[Unit] = []
    for unit in units:
        pos = at.get(unit.id)
        if pos is not None and pos < len(own) and snap.units[pos] is unit:
            out[unit.id] = own[pos]
            continue
        cached = others.get(unit.id)
        if cached is not None and cached[0] is unit:
            out[unit.id] = cached[1]
        else:
            missing.append(unit)
    if missing:  # one read and one write of the store's count table, not one per turn
        coster.prefetch([t for u in missing for t in u.turns])
    for unit in missing:
        out[unit.id] = tuple(coster.turn_tokens(t) for t in unit.turns)
        others[unit.id] = (unit, out[unit.id])
    return {u.id: out[u.id] for u in units}


PREFETCH_TURNS = KEY_CACHE_SIZE
"""Turns whose counts :func:`unit_turn_costs` reads in one round: their keys, computed by the prefetch, are still
in the coster's key cache when each turn's count is then taken (a round over the whole history would empty it)."""


def unit_turn_costs(snap: Snapshot, coster: Coster) -> list[tuple[int, ...]]:
    """Per-turn token costs of every unit of the snapshot (cached on the snapshot per coster)."""
    cached = snap.costs.setdefault(coster.counter_id, [])
    while len(cached) < len(snap.units):
        todo = _round(snap.units, len(cached))
        coster.prefetch([t for u in todo for t in u.turns])
        cached.extend(tuple(coster.turn_tokens(t) for t in u.turns) for u in todo)
    return cached


def _round(units: Sequence[Unit], start: int) -> Sequence[Unit]:
    """The units from ``start`` on whose turns add up to at most :data:`PREFETCH_TURNS` (at least one unit)."""
    end, turns = start, 0
    while end < len(units) and (end == start or turns + len(units[end].turns) <= PREFETCH_TURNS):
        turns += len(units[end].turns)
        end += 1
    return units[start:end]


def unit_token_sums(snap: Snapshot, coster: Coster) -> list[int]:
    """Running sums of the units' verbatim tokens: entry ``i`` is the tokens of units ``0 … i-1`` (cached)."""
    costs = unit_turn_costs(snap, coster)
    sums = snap.token_sums.setdefault(coster.counter_id, [0])
    for cost in costs[len(sums) - 1 :]:
        sums.append(sums[-1] + sum(cost))
    return sums


def _check_budget(
    budget: Budget,
    units: Sequence[Unit],
    plan: Plan,
    turn_costs: Mapping[str, tuple[int, ...]],
    coster: Coster,
    tools: Sequence[Mapping[str, Any]],
    options_for: Any,
) -> tuple[list[Unit], list[Unit], int, dict[str, list[Option]]]:
    """Check that the fixed blocks and the required units fit ``B_input``; return them and ``B_dynamic``.

    Returns:
        ``(fixed units, required units, B_dynamic, oversized)``: ``oversized`` maps the required units
        too large to enter verbatim to their excerpt options (:func:`oversized_required`).

    Raises:
        RequiredBlocksDoNotFit: itemised, each required unit at its cheapest allowed form.
    """
    costs = {uid: sum(c) for uid, c in turn_costs.items()}
    fixed = [u for u in units if u.kind is UnitKind.INSTRUCTION]
    required = [u for u in units if u.id in plan.required and u.kind is not UnitKind.INSTRUCTION]
    blocks = [BudgetItem("request", "reply priming", coster.base_tokens())]
    if tools:
        blocks.append(BudgetItem("tools", f"{len(tools)} tool schemas", coster.tools_tokens(tools)))
    blocks += [BudgetItem(u.id, "instruction", costs[u.id]) for u in fixed]
    fixed_tokens = sum(b.tokens for b in blocks)
    dynamic = budget.input_tokens - fixed_tokens
    oversized = oversized_required(required, plan.required, turn_costs, coster, dynamic, options_for)
    for u in required:
        cheapest = costs[u.id]
        if u.id in oversized:
            cheapest = min(o.tokens for o in oversized[u.id])
        elif options_for is not None and plan.required[u.id] not in VERBATIM_REASONS:
            alternatives = options_for(u, _verbatim(u, costs[u.id]), coster)
            cheapest = min([cheapest, *(o.tokens for o in alternatives)])
        ext = _external(u)
        blocks.append(BudgetItem(u.id if ext is None else f"{u.id} ({ext})", plan.required[u.id], cheapest))
    budget.check_required(blocks)
    return fixed, required, dynamic, oversized


def oversized_required(
    required: Sequence[Unit],
    reasons: Mapping[str, str],
    turn_costs: Mapping[str, tuple[int, ...]],
    coster: Coster,
    dynamic: int,
    options_for: Any,
) -> dict[str, list[Option]]:
    """The required units too large to enter verbatim, each with the excerpts it may enter as instead.

    A required unit (a failed call not yet followed by a success, the step being continued: a message, a tool
    exchange or a checkpoint …) whose verbatim form costs more than :data:`REQUIRED_VERBATIM_SHARE` of
    ``B_dynamic`` (all of it) would make every later call fail with ``RequiredBlocksDoNotFit``. Such a unit
    is offered only as the representation ladder's *excerpts* (exact bytes: head, tail and the error lines
    with their neighbours, plus locators to rehydrate the rest): an excerpt of exact bytes is not a summary,
    and extractions, memories and references are not offered for it. Each excerpt's ``detail["note"]`` says
    that the verbatim form did not fit (the manifest shows it).

    Units stay verbatim, and the budget check decides, when their protection reason is in
    :data:`~ctxledger.policy.base.VERBATIM_REASONS` (the latest user turn, constraints, approvals,
    ``retry_critical`` …: case B15 wants a user turn that cannot fit
    to fail loudly, never to be cut), when they have no large text to excerpt (long tool-call arguments), or
    when the ladder is off.

    A required unit that fits ``B_dynamic`` alone but not beside the other required units is not oversized:
    :func:`_check_budget` prices it at its cheapest rung (for a message or checkpoint, its smallest excerpt)
    and selection upgrades it as far as the room allows.

    Args:
        required: the required non-instruction units.
        reasons: unit id → protection reason.
        turn_costs: unit id → verbatim tokens per turn.
        coster: this assembly's coster.
        dynamic: ``B_dynamic`` in tokens.
        options_for: the representation ladder (called with ``required=True``); ``None`` → no excerpts.

    Returns:
        unit id → excerpt options (their utility is the rung factor; the caller scales it); units that stay
        verbatim are absent.
    """
    out: dict[str, list[Option]] = {}
    if options_for is None:
        return out
    limit = REQUIRED_VERBATIM_SHARE * max(dynamic, 0)
    for unit in required:
        per_turn = turn_costs[unit.id]
        tokens = sum(per_turn)
        if tokens <= limit or reasons.get(unit.id) in VERBATIM_REASONS:
            continue
        verbatim = Option("verbatim", tokens, 1.0, unit.turns, turn_tokens=per_turn)
        excerpts = [o for o in options_for(unit, verbatim, coster, required=True) if o.representation == "excerpt"]
        if not excerpts:
            continue
        note = (
            f"required, but its verbatim form ({tokens} tokens) does not fit B_dynamic ({dynamic} tokens): "
            "entered as an exact excerpt of the stored bytes; the locators rehydrate the rest"
        )
        out[unit.id] = [dataclasses.replace(o, detail={**o.detail, "note": note}) for o in excerpts]
    return out


def _external(unit: Unit) -> str | None:
    ids = [r.external_id for r in unit.records if r.external_id]
    return ",".join(ids) if ids else None


def _verbatim(unit: Unit, tokens: int) -> Option:
    return Option("verbatim", tokens, 1.0, unit.turns)


@dataclass(slots=True)
class Budgeted:
    """The budget phase's result.

    Attributes:
        turn_costs: live unit id → verbatim tokens of each of its turns (serialized form).
        costs: live unit id → verbatim tokens.
        fixed: the instruction units (sent whole, first).
        required: the other required live units.
        dynamic: ``B_dynamic`` = ``B_input`` − ``F`` (tokens).
        oversized: required units too large to enter verbatim → their excerpt options (:func:`oversized_required`).
        short: the live units cost less than ``B_dynamic``: the reach should widen before selecting.
    """

    turn_costs: dict[str, tuple[int, ...]]
    costs: dict[str, int]
    fixed: list[Unit]
    required: list[Unit]
    dynamic: int
    oversized: dict[str, list[Option]]
    short: bool


def fit_budget(
    budget: Budget,
    filtered_units: Sequence[Unit],
    plan: Plan,
    tools: Sequence[Mapping[str, Any]],
    snap: Snapshot,
    coster: Coster,
    options_for: Any,
) -> Budgeted:
    """Cost the live units and check that ``F`` and the required units fit ``budget.input_tokens``.

    ``B_input = W − O − M`` and ``B_dynamic = B_input − F`` in tokens, ``F`` being the reply priming, the tool
    schemas and the instructions (seed 001, the budget ledger). ``options_for`` (the ladder, or ``None``) gives a
    required unit's cheaper forms, so it must fit only at its cheapest allowed one.

    Returns:
        :class:`Budgeted`.

    Raises:
        RequiredBlocksDoNotFit: ``F`` and the required units exceed ``B_input``; every block is listed with its
            tokens (:func:`_check_budget`).
    """
    turn_costs = _turn_costs(snap, coster, filtered_units)
    costs = {uid: sum(c) for uid, c in turn_costs.items()}
    fixed, required, dynamic, oversized = _check_budget(
        budget, filtered_units, plan, turn_costs, coster, tools, options_for
    )
    short = _short(filtered_units, turn_costs, dynamic)
    return Budgeted(turn_costs, costs, fixed, required, dynamic, oversized, short)


def charge_fixed(ledger: BudgetLedger, budgeted: Budgeted, coster: Coster, tools: Sequence[Mapping[str, Any]]) -> None:
    """Charge ``F`` to the ledger as required: each instruction unit in its class, the rest as ``framing``.

    ``framing`` (reply priming and tool schemas, in tokens counted by ``coster``) belongs to no context class
    (seed 001, the budget ledger). No errors of its own.
    """
    for unit in budgeted.fixed:
        ledger.charge(unit.context_class.value, budgeted.costs[unit.id], required=True)
    framing = coster.base_tokens() + coster.tools_tokens(tools)
    if framing:
        ledger.charge("framing", framing, required=True)
