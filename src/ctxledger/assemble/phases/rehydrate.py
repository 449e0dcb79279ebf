"""The rehydrate phase: rehydration phase two on the chosen memories (raw artifacts read back or referenced)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from ctxledger.assemble.costing import Coster
from ctxledger.assemble.inputs import unserved_exact_evidence
from ctxledger.assemble.phases.plan import Plan
from ctxledger.assemble.phases.select import latest_user_text
from ctxledger.assemble.request import AssemblyRequest
from ctxledger.assemble.select import Option, SelectionResult
from ctxledger.budget import BudgetLedger
from ctxledger.policy.annotate import mark_attrs
from ctxledger.policy.base import Policy, StageContext
from ctxledger.policy.rehydration import hard_omission, rehydrate, wanted_memories
from ctxledger.policy.stages.visibility import promoted_records, sees
from ctxledger.records import Record
from ctxledger.units import Unit


def _rehydrate(
    request: AssemblyRequest,
    policy: Policy,
    plan: Plan,
    chosen: Sequence[Unit],
    result: Any,
    coster: Coster,
    read_blob: Callable[[str], bytes] | None,
    dynamic: int,
    ledger: BudgetLedger,
) -> None:
    """Rehydration phase two (:mod:`ctxledger.policy.rehydration`) on the selected memories."""
    if plan.ctx is None:
        return
    query = request.query if request.query is not None else latest_user_text(chosen)
    repairs = plan.ctx.repairs
    targets = wanted_memories(request, chosen, query, plan.ctx.record, repairs)
    if not targets:
        return
    current = {u.id: result.chosen[u.id].tokens for u in targets}
    remaining = dynamic - sum(o.tokens for o in result.chosen.values())
    rplan = rehydrate(
        request,
        policy,
        targets,
        plan.ctx.record,
        read_blob,
        coster.turn_tokens,
        current,
        remaining,
        repairs,
        lambda rid: mark_attrs(plan.marks.get(rid, ())),
        _hidden(plan.ctx, request.participant_id),
        hard_omission(plan.omitted, plan.decisions),
    )
    plan.rehydrations = rplan.entries
    for unit in targets:
        old = result.chosen[unit.id]
        turns = rplan.turns[unit.id]
        turn_tokens = tuple(coster.turn_tokens(t) for t in turns)
        representation = rplan.representation[unit.id]
        step = "rehydrated" if representation == "rehydrated" else "reference_hint"
        marked = unit.transforms.get(unit.records[0].id)  # e.g. provenance_repaired, stale_marked
        transform = f"{marked}+{step}" if marked else step
        result.chosen[unit.id] = Option(
            representation, sum(turn_tokens), old.utility, turns, transform, {}, turn_tokens
        )
        ledger.charge(unit.context_class.value, sum(turn_tokens) - old.tokens)


def _hidden(ctx: StageContext, who: str | None) -> Callable[[str], bool]:
    """Record id → whether the visibility rules withhold it from ``who`` (by visibility and promotion).

    Rehydration asks this before reading a private artifact back, so a promoted artifact comes back exactly
    for the promotion's audience, and never for someone an earlier stage's omission hid the question from.
    """
    promoted = promoted_records(ctx, who)

    def hidden(rid: str) -> bool:
        rec = ctx.record(rid)
        return rec is None or not sees(rec, who, promoted)

    return hidden


def rehydrate_chosen(
    request: AssemblyRequest,
    policy: Policy,
    plan: Plan,
    records: Sequence[Record],
    chosen: Sequence[Unit],
    result: SelectionResult,
    coster: Coster,
    read_blob: Callable[[str], bytes] | None,
    dynamic: int,
    ledger: BudgetLedger,
) -> list[dict[str, Any]]:
    """Rehydration phase two on the chosen memories: raw artifacts read back where exact evidence is needed.

    Seed 004: a raw artifact is rehydrated when exact evidence is required.

    A rehydrated memory's option in ``result`` is replaced by its raw artifact (hash-checked) or by a reference,
    and ``ledger`` is charged the difference in tokens within ``dynamic`` (``B_dynamic``); exact evidence the
    request named and nothing served becomes a warning in ``plan``.

    Returns:
        The manifest's rehydration entries (``plan.rehydrations``), one per memory read back or referenced.
    """
    _rehydrate(request, policy, plan, chosen, result, coster, read_blob, dynamic, ledger)
    if plan.ctx is not None:
        plan.ctx.warnings += unserved_exact_evidence(request, records, plan.omitted, plan.rehydrations)
    return plan.rehydrations
