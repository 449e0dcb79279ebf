"""The select phase: utility per live unit and the multiple-choice knapsack under ``B_dynamic``."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ctxledger.assemble import stability
from ctxledger.assemble.costing import Coster
from ctxledger.assemble.phases.budget import Budgeted
from ctxledger.assemble.phases.plan import Plan
from ctxledger.assemble.query import unit_relevance
from ctxledger.assemble.reach import (
    Reach,
    unvisited_newer,
)
from ctxledger.assemble.relevance import is_question
from ctxledger.assemble.request import AssemblyRequest
from ctxledger.assemble.select import Option, SelectionItem, SelectionResult, new_option, select
from ctxledger.assemble.semantic import default_embedder
from ctxledger.assemble.snapshot import Snapshot
from ctxledger.budget import Budget, BudgetLedger
from ctxledger.policy.base import VERBATIM_REASONS, Policy, ReasonCode
from ctxledger.records import Message, Role, ToolStatus
from ctxledger.units import ContextClass, Unit, UnitKind, content_text

KIND_PRIOR: Mapping[str, float] = {
    UnitKind.INSTRUCTION: 1.0,
    UnitKind.MESSAGE: 0.6,
    UnitKind.TOOL_EXCHANGE: 0.5,
    UnitKind.MEMORY: 0.7,
    UnitKind.COMPACTION: 0.8,
    UnitKind.CHECKPOINT: 0.9,
}
"""Prior utility of a unit by kind (user turns get +0.1, failed tool exchanges +0.3)."""

FILL_FACTOR = 0.25
"""Utility scale of conversation-visible or shared units of other branches: they rank below the lineage's."""

_CLASS_NAMES = {c: c.value for c in ContextClass}


def _selection_items(
    units: Sequence[Unit],
    plan: Plan,
    turn_costs: Mapping[str, tuple[int, ...]],
    relevance: Mapping[str, float],
    policy: Policy,
    coster: Coster,
    options_for: Any,
    weights: tuple[float, float, float] | None = None,
    oversized: Mapping[str, Sequence[Option]] | None = None,
    unvisited_newer: Mapping[str, int] | None = None,
    memo: dict[Any, Any] | None = None,
) -> list[SelectionItem]:
    """One selection item per dynamic unit; a unit's age counts the newer units, the unvisited ones too.

    ``memo`` (the snapshot's) keeps each unit's kind prior and class name while the unit object is unchanged.
    """
    params = policy.selection
    w_relevance, w_recency, w_kind = weights or params.weights(False)
    half_life = params.recency_half_life
    required_ids = plan.required
    newer = unvisited_newer or {}
    facts = _unit_facts(units, turn_costs, {} if memo is None else memo.setdefault("selection facts", {}))
    decay = _decay(memo, half_life, len(units) + (max(newer.values()) if newer else 0))
    items = []
    age = -1
    for unit, (prior, class_name, costs, total) in zip(reversed(units), reversed(facts), strict=True):
        if prior is None:  # an instruction: fixed, not selected
            continue
        age += 1
        uid = unit.id
        score = relevance.get(uid)
        utility = (
            w_relevance * (score or 0.0)
            + w_recency * decay[age + newer.get(uid, 0) if newer else age]
            + w_kind * prior
        )
        if score is None:  # from another branch: it only fills what the lineage leaves
            utility *= FILL_FACTOR
        verbatim = new_option("verbatim", total, round(utility, 9), unit.turns, None, None, costs)
        options = [verbatim]
        required = uid in required_ids
        if oversized and uid in oversized:  # too large to enter verbatim: exact excerpts only
            options = [dataclasses.replace(o, utility=round(utility * o.utility, 9)) for o in oversized[uid]]
        elif options_for is not None and not (required and required_ids[uid] in VERBATIM_REASONS):
            options += options_for(unit, verbatim, coster)
        items.append(SelectionItem(uid, unit.seq, class_name, options, required, required and len(options) == 1))
    return items


def _decay(memo: dict[Any, Any] | None, half_life: float, size: int) -> list[float]:
    """``0.5 ** (k / half_life)`` at each ``k`` below ``size`` at least: a unit's recency ``k`` units back.

    Kept in ``memo`` (the snapshot's) for the last half-life asked and extended as the history grows, so a call
    computes only the ages no earlier call reached.
    """
    kept = None if memo is None else memo.get("recency decay")
    if kept is None or kept[0] != half_life:
        kept = (half_life, [])
        if memo is not None:
            memo["recency decay"] = kept
    values: list[float] = kept[1]
    values += [0.5 ** (k / half_life) for k in range(len(values), size)]
    return values


def _unit_facts(
    units: Sequence[Unit], turn_costs: Mapping[str, tuple[int, ...]], table: dict[str, tuple[Unit, Any, Any]]
) -> list[tuple[Any, ...]]:
    """``(kind prior, class name, turn costs, their sum)`` of each unit, kept in ``table`` per unit object.

    The prior is ``None`` for an instruction (fixed, not selected; its costs are not asked). The costs are the
    very tuple of ``turn_costs`` (a unit's costs are kept per unit object by the budget phase, so the sum is
    taken again only when that tuple changes).
    """
    out = []
    get = turn_costs.get
    for unit in units:
        hit = table.get(unit.id)
        costs = get(unit.id)
        if hit is None or hit[0] is not unit or hit[1] is not costs:
            if unit.kind is UnitKind.INSTRUCTION:
                facts: tuple[Any, ...] = (None, _CLASS_NAMES[unit.context_class], costs, 0)
            else:
                facts = (_kind_prior(unit), _CLASS_NAMES[unit.context_class], turn_costs[unit.id], sum(costs))
            hit = table[unit.id] = (unit, costs, facts)
        out.append(hit[2])
    return out


def relevance_by_id(request: AssemblyRequest, snap: Snapshot, policy: Policy | None = None) -> dict[str, float]:
    """Relevance (normalised to [0, 1]) of the snapshot's units; other branches' units score 0."""
    scores = relevance_scores(request, snap, policy)
    return {u.id: float(scores[i]) for i, u in enumerate(snap.units)}


def relevance_scores(request: AssemblyRequest, snap: Snapshot, policy: Policy | None = None) -> np.ndarray:
    """Relevance of each unit to the query with the policy's signals (:func:`unit_relevance`), over the max.

    The query is ``request.query``, else the newest user turn (:func:`latest_user_text`). Returns a float array
    aligned with ``snap.units``, in [0, 1]; no errors of its own. The scores of the last query are kept on the
    snapshot's memo: a call on an unchanged snapshot (same ``seq``, same units) with the same query, settings and
    embedding model gets the same array back, read-only.
    """
    query = request.query if request.query is not None else latest_user_text(snap.units)
    selection = policy.selection if policy is not None else None
    key = (query, snap.seq, len(snap.units), default_embedder())
    table = snap.memo.setdefault("relevance", {})
    hit = table.get("")
    if hit is not None and hit[0] == key and hit[1] == selection:
        return hit[2]  # type: ignore[no-any-return]
    scores = unit_relevance(query, snap.index, snap.vectors, snap.facets, len(snap.units), selection)
    scores.setflags(write=False)
    table[""] = (key, selection, scores)
    return scores


def _asks_question(request: AssemblyRequest, units: Sequence[Unit]) -> bool:
    """The weight rule of :class:`SelectionParams`: the query is a question and no tool loop is under way."""
    dynamic = [u for u in units if u.kind is not UnitKind.INSTRUCTION]
    if dynamic and dynamic[-1].kind is UnitKind.TOOL_EXCHANGE:
        return False
    query = request.query if request.query is not None else latest_user_text(units)
    return bool(query) and is_question(query)


def latest_user_text(units: Sequence[Unit]) -> str:
    """The text of the newest user message among ``units`` (the default query), or ``""``."""
    for u in reversed(units):
        rec = u.records[0]
        if u.kind is UnitKind.MESSAGE and isinstance(rec, Message) and rec.role is Role.USER:
            return content_text(rec.content)
    return ""


def _kind_prior(unit: Unit) -> float:
    prior = KIND_PRIOR[unit.kind]
    if unit.role == "user" and not unit.turns[0].relayed:  # another participant's turn is no user turn
        prior += 0.1
    if unit.kind is UnitKind.TOOL_EXCHANGE and unit.status is not None and unit.status is not ToolStatus.SUCCEEDED:
        prior += 0.3
    return min(prior, 1.0)


@dataclass(slots=True)
class Selected:
    """The select phase's result.

    Attributes:
        items: one :class:`SelectionItem` per live dynamic unit (newest first), with its options.
        result: the chosen option per unit and the omission reason per unit left out.
        ledger: the budget ledger of ``B_dynamic`` per context class.
        previous: the previous assembly of this branch and budget made in this process (or, with a stable
            prefix, read from the store): what the payload's shared prefix is measured against.
        grown: whether the previous selection was grown instead of re-chosen.
        target: the tokens selection aimed at (``B_dynamic`` less the stable prefix's headroom).
        stable_key: ``(api, requested B_input)``: the key a later assembly finds this one under.
    """

    items: list[SelectionItem]
    result: SelectionResult
    ledger: BudgetLedger
    previous: stability.PreviousAssembly | None
    grown: bool
    target: int
    stable_key: tuple[str, int]


def select_units(
    request: AssemblyRequest,
    requested: Budget,
    snap: Snapshot,
    rch: Reach,
    scores: np.ndarray,
    units: Sequence[Unit],
    plan: Plan,
    budgeted: Budgeted,
    policy: Policy,
    coster: Coster,
    options_for: Any,
    stored_previous: Callable[[Any, int], Mapping[str, Any] | None] | None = None,
    recorded_prefix: stability.RecordedPrefix | None = None,
) -> Selected:
    """Score the live units and choose at most one option each under ``B_dynamic``.

    Constraints first, relevance second (seed 002); class caps from the budget ledger (seed 001).

    Args:
        request: the call.
        requested: the budget as the call asked it (``W``, ``O``, ``M`` in tokens).
        snap: the snapshot.
        rch: the units its reach visits.
        scores: relevance of every unit of ``snap`` in [0, 1] (:func:`relevance_scores`, aligned with
            ``snap.units``).
        units: the filter phase's live units.
        plan: the filter phase's plan.
        budgeted: the budget phase's result (``B_dynamic``, per-turn token costs, oversized required units).
        policy: the bound policy.
        coster: counts tokens of the provider's serialized form.
        options_for: the representation ladder, or ``None`` (verbatim only).
        stored_previous: reads the stored assembly a stable prefix grows from (:mod:`ctxledger.assemble.stability`).
        recorded_prefix: for a replay, what the stored manifest's ``prefix`` names as the previous assembly; it
            replaces the lookup by ``seq`` (:func:`~ctxledger.assemble.stability.recorded_previous`).

    With ``selection.stable_prefix`` the previous assembly of the branch and budget (kept in the snapshot's
    memo, else read through ``stored_previous``) is grown when it still fits, else re-chosen keeping its leading
    units.

    Returns:
        :class:`Selected`; every optional unit not chosen is in ``result.omitted`` (``budget`` or ``class_cap``).
    """
    dynamic = budgeted.dynamic
    ledger = BudgetLedger(dynamic, policy.selection.class_caps)
    visited_ids = [snap.units[p].id for p in rch.positions]
    relevance = dict(zip(visited_ids, scores[list(rch.positions)].tolist(), strict=True))
    weights = policy.selection.weights(_asks_question(request, units))
    older = {snap.units[p].id: k for p, k in unvisited_newer(rch).items()}
    items = _selection_items(
        units,
        plan,
        budgeted.turn_costs,
        relevance,
        policy,
        coster,
        options_for,
        weights,
        budgeted.oversized,
        older,
        snap.memo,
    )
    stable_key = (request.api, requested.input_tokens)
    if recorded_prefix is not None:
        prev = stability.recorded_previous(snap.memo, stable_key, recorded_prefix, items)
    else:
        prev = stability.previous(snap.memo, stable_key, snap.seq)
    if prev is None and recorded_prefix is None and policy.selection.stable_prefix and stored_previous is not None:
        prev = stability.from_manifest(stored_previous(stable_key, snap.seq), items)
    stable = prev if policy.selection.stable_prefix else None
    target = stability.target_budget(dynamic, policy.selection.stable_headroom, stable, items)
    result = select(items, target, ledger)
    grown = stability.grow(stable, items, result, dynamic, policy.selection.class_caps)
    if grown is not None:
        result, ledger = grown
    elif stable is not None and (kept := stability.keep_prefix(stable, items, target, policy.selection.stable_keep,
                                        stability.essentials(items, result))) is not None:  # fmt: skip
        ledger = BudgetLedger(dynamic, policy.selection.class_caps)
        result = select(kept[0], target, ledger)
        result.omitted.update(dict.fromkeys(kept[1], ReasonCode.BUDGET))
    return Selected(items, result, ledger, prev, grown is not None, target, stable_key)
