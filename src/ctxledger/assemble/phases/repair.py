"""The repair phase: room for errors, question/answer pairs, the provider's role order, and fill."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ctxledger.assemble.costing import Coster
from ctxledger.assemble.fill import fill_budget
from ctxledger.assemble.lead import anchor_lead, only_needed
from ctxledger.assemble.pairs import Pair, keep_pairs, partners, question_answer_pairs
from ctxledger.assemble.phases.budget import Budgeted
from ctxledger.assemble.phases.plan import Plan, omit_unit
from ctxledger.assemble.phases.select import Selected
from ctxledger.assemble.preamble import keep_preamble
from ctxledger.assemble.represent import EXCERPT_TOKENS, Pointer, charge_savings, settle_redundant
from ctxledger.assemble.request import AssemblyRequest
from ctxledger.assemble.room import anchor_user_turn, make_room_for_errors
from ctxledger.assemble.select import Option, SelectionItem, SelectionResult, payload_turns
from ctxledger.budget import BudgetLedger
from ctxledger.policy.base import Policy, ReasonCode
from ctxledger.units import Unit, UnitKind

FILL_TARGET = 0.95
"""Share of ``B_dynamic`` an assembly uses whenever it leaves something out for budget, or says why not."""


def fill_note(
    dynamic: int, chosen: Sequence[tuple[Unit, Option]], left_out: Iterable[SelectionItem], merged: int = 0
) -> str | None:
    """Why less than :data:`FILL_TARGET` of ``B_dynamic`` is used although units were left out for budget.

    ``None`` when the target is met, or when nothing was left out for budget and every unit is sent whole;
    otherwise a sentence with the tokens left and the cheapest form of any unit left out (none fits the room
    left, or a class cap or the role order kept it out), or, when nothing was left out but some units are sent
    cut (an excerpt, extraction, memory or reference of a unit too large to enter whole), which ones and the
    ladder's largest excerpt (:data:`~ctxledger.assemble.represent.EXCERPT_TOKENS`): part of their bytes was
    left out, and an excerpt stays bounded even when room is left. ``merged``: tokens of message framing charged
    per turn that the payload does not
    send, because the provider format merges consecutive same-role turns into one message
    (:meth:`~ctxledger.assemble.costing.Coster.merged_framing`); when the budget is charged to the target but
    what is sent falls short of it by that framing, the sentence says so.
    """
    left = list(left_out)
    used = sum(o.tokens for _, o in chosen)
    if dynamic <= 0:
        return None
    if not left:
        return _cut_note(dynamic, used, chosen)
    if used >= FILL_TARGET * dynamic:
        if used - merged >= FILL_TARGET * dynamic:
            return None
        sent = used - merged
        return (
            f"{used} of {dynamic} tokens of B_dynamic charged ({used / dynamic:.0%}), {sent} sent "
            f"({sent / dynamic:.0%}): each turn is charged as its own provider message, and merging consecutive "
            f"turns of one role into one message left {merged} tokens of message framing unsent"
        )
    room = dynamic - used
    cheapest = min(o.tokens for i in left for o in i.options)
    share = _share(used, dynamic)
    if cheapest > room:
        return f"{share}: the cheapest form of any unit left out for budget takes {cheapest} tokens"
    return f"{share}: units that would fit were kept out by class caps or the provider's role order"


def _share(used: int, dynamic: int) -> str:
    """How much of ``B_dynamic`` is used and left, as the fill notes say it."""
    return f"{used} of {dynamic} tokens of B_dynamic used ({used / dynamic:.0%}), {dynamic - used} left"


def _cut_note(dynamic: int, used: int, chosen: Sequence[tuple[Unit, Option]]) -> str | None:
    """Why room is left although units were sent cut (see :func:`fill_note`); ``None`` when none was."""
    cut = [(u, o) for u, o in chosen if o.representation != "verbatim"]
    if not cut or used >= FILL_TARGET * dynamic:
        return None
    forms = ", ".join(f"{u.id} as {o.transform or o.representation}" for u, o in cut[:3])
    more = f" and {len(cut) - 3} more" if len(cut) > 3 else ""
    return (
        f"{_share(used, dynamic)}; nothing was "
        f"left out for budget, but units too large to enter whole are sent cut ({forms}{more}): excerpts stay "
        f"within the ladder's largest size, {max(EXCERPT_TOKENS)} tokens, and their locators rehydrate the rest"
    )


def _fix_role_order(
    chosen: list[Unit],
    plan: Plan,
    options: dict[str, Option],
    required: Sequence[Unit],
    ledger: BudgetLedger,
    live: tuple[Sequence[Unit], Sequence[SelectionItem], int] | None = None,
) -> list[Unit]:
    """Anchor or drop leading optional units until the first non-instruction turn is a user turn (case B04).

    With ``live`` (the live units, the selection items, ``B_dynamic``), a leading optional unit first tries
    to stay behind the user message before it (:func:`~ctxledger.assemble.lead.anchor_lead`: room made from
    lower-utility units only); otherwise it is dropped. The ledger gets the tokens of what leaves back, so
    ``used`` stays what the payload carries.
    """
    required_ids = {u.id for u in required}
    while chosen and chosen[0].role != "user" and chosen[0].id not in required_ids:
        items = {i.unit_id: i for i in live[1]} if live is not None else {}
        found = anchor_lead(chosen, live[0], items, options, live[2], required_ids, ledger) if live else None
        if found is not None:
            for unit in found.displaced:
                ledger.charge(unit.context_class.value, -options.pop(unit.id).tokens)
                omit_unit(plan, unit, ReasonCode.BUDGET, "role_order")
            for rid in found.unit.record_ids:
                plan.omitted.pop(rid, None)
            options[found.unit.id] = found.option
            ledger.charge(found.unit.context_class.value, found.option.tokens)
            return [found.unit, *(u for u in chosen if u not in found.displaced)]
        unit = chosen.pop(0)
        dropped = options.pop(unit.id, None)
        if dropped is not None:
            ledger.charge(unit.context_class.value, -dropped.tokens)
        omit_unit(plan, unit, ReasonCode.ROLE_ORDER, "role_order")
    return chosen


def _fill(
    items: Sequence[SelectionItem],
    result: SelectionResult,
    chosen: list[Unit],
    by_id: Mapping[str, Unit],
    plan: Plan,
    dynamic: int,
    ledger: BudgetLedger,
    options_for: Any,
    coster: Coster,
    pairs: Sequence[Pair],
    target: float = FILL_TARGET,
) -> list[Unit]:
    """The fill phase (:func:`~ctxledger.assemble.fill.fill_budget`) after role order: the chosen units, grown.

    Only units after the first chosen one may enter: the payload still opens with the same user turn, and
    no unit the role-order repair dropped is left stranded behind an older one. Half of a question/answer
    pair enters only with the other half. The admitted units' records leave the omissions.
    """
    lead = chosen[0].seq if chosen else None
    admitted = fill_budget(
        items,
        result,
        dynamic,
        ledger,
        lambda i: options_for(by_id[i.unit_id], i.options[0], coster, required=True),
        target,
        allowed=lambda i: lead is not None and i.seq > lead,
        partners=partners(pairs),
    )
    for uid in admitted:
        for rid in by_id[uid].record_ids:
            plan.omitted.pop(rid, None)
    return sorted([*chosen, *(by_id[uid] for uid in admitted)], key=lambda u: u.seq)


FRAMING_ROUNDS = 8
"""Fill rounds into merged framing at most: each round's entrants merge too and free framing for the next."""


def _fill_merged_framing(
    items: Sequence[SelectionItem],
    result: SelectionResult,
    chosen: list[Unit],
    by_id: Mapping[str, Unit],
    plan: Plan,
    fixed: Sequence[Unit],
    dynamic: int,
    ledger: BudgetLedger,
    options_for: Any,
    coster: Coster,
    pairs: Sequence[Pair],
) -> tuple[list[Unit], int]:
    """Fill again into the message framing the payload will not send; return the chosen units and that credit.

    Each turn is charged as its own provider message, but a format that merges consecutive turns of one role
    (Anthropic: parallel tool results, several speakers relayed as user turns) sends their framing once
    (:meth:`~ctxledger.assemble.costing.Coster.merged_framing`). While units are left out for budget, fill runs
    again with ``B_dynamic`` plus that framing (up to :data:`FRAMING_ROUNDS` times, as what enters merges too);
    units it admitted are then taken back, weakest first (a question/answer pair together), until what is charged
    minus the framing of the final payload fits ``B_dynamic``, so the counted payload never exceeds ``B_input``.

    Returns:
        ``(chosen units in seq order, credit)``: ``credit`` is the tokens charged beyond ``B_dynamic`` (0 when
        nothing was merged, nothing was left out for budget, or nothing more entered).
    """
    if not any(r is ReasonCode.BUDGET for r in result.omitted.values()):
        return chosen, 0
    before = set(result.chosen)
    grown = chosen
    for _ in range(FRAMING_ROUNDS):  # what enters merges too, and frees its own framing for the next round
        merged = coster.merged_framing(payload_turns(fixed, grown, result.chosen))
        entering = len(result.chosen)
        if merged <= 0:
            break
        room = dynamic + merged  # filled until what is sent, not what is charged, reaches FILL_TARGET of B_dynamic
        target = (FILL_TARGET * dynamic + merged) / room
        grown = _fill(items, result, grown, by_id, plan, room, ledger, options_for, coster, pairs, target)
        if len(result.chosen) == entering:
            break
    if len(result.chosen) == len(before):
        return chosen, 0
    utility = {i.unit_id: i.options[0].utility for i in items}
    entered = sorted((u for u in grown if u.id not in before), key=lambda u: (utility.get(u.id, 0.0), -u.seq))
    mates = partners(pairs)
    used = sum(o.tokens for o in result.chosen.values())
    while entered and used - coster.merged_framing(payload_turns(fixed, grown, result.chosen)) > dynamic:
        weakest = entered.pop(0)
        for unit in [weakest, *(u for u in entered if u.id == mates.get(weakest.id))]:
            option = result.chosen.pop(unit.id)
            result.omitted[unit.id] = ReasonCode.BUDGET
            ledger.charge(unit.context_class.value, -option.tokens)
            omit_unit(plan, unit, ReasonCode.BUDGET, "selection")
            grown.remove(unit)
            used -= option.tokens
            if unit in entered:
                entered.remove(unit)
    result.used_tokens = used
    return grown, max(0, used - dynamic)


def _keep_final_pairs(
    units: Sequence[Unit],
    pairs: Sequence[Pair],
    items: Sequence[SelectionItem],
    result: SelectionResult,
    chosen: list[Unit],
    plan: Plan,
    dynamic: int,
    ledger: BudgetLedger,
) -> tuple[list[Unit], list[dict[str, str]]]:
    """The pair rule (:func:`~ctxledger.assemble.pairs.keep_pairs`) on the final inclusion set.

    Preamble carrying, role-order repair, the required lead's anchor and fill all run after the first pair
    pass and change what is included, so the pairs are checked again on what the payload carries: a missing
    half that fits the room left enters (its records leave the omissions), and the warnings name the pairs
    that stay split. Admitting a question or an answer keeps the payload's first turn a user turn.

    Returns:
        ``(the chosen units in seq order, the pair warnings)``.
    """
    before = set(result.chosen)
    warnings = keep_pairs(pairs, items, result, dynamic, ledger)
    admitted = [u for u in units if u.id in result.chosen and u.id not in before]
    if not admitted:
        return chosen, warnings
    for unit in admitted:
        for rid in unit.record_ids:
            plan.omitted.pop(rid, None)
    return sorted([*chosen, *admitted], key=lambda u: u.seq), warnings


def _anchor_required_lead(
    chosen: list[Unit],
    units: Sequence[Unit],
    items: Sequence[SelectionItem],
    plan: Plan,
    options: dict[str, Option],
    budget_tokens: int,
    ledger: BudgetLedger,
) -> list[Unit]:
    """When a *required* non-user unit leads the history, admit the newest user turn before it.

    Anthropic's Messages API requires the first message to come from the user and ctxledger never invents
    one, so the user turn that led to the required step (e.g. an unresolved tool call) is brought in at its
    cheapest form, with room made by leaving out optional chosen units, oldest first (``budget``), and only
    those the room needs (:func:`~ctxledger.assemble.lead.only_needed`: an older unit left out before a larger
    one that alone makes the room stays). The anchor becomes required, so no class cap binds it. If no user turn
    precedes it, the selection offers it in no form, or it cannot fit, nothing changes (OpenAI Chat accepts an
    assistant-first history; the Anthropic serializer then refuses with a ProviderContractError naming the turn).
    """
    if not chosen or chosen[0].role == "user":
        return chosen
    lead = chosen[0]
    before = [u for u in units if u.role == "user" and u.kind is UnitKind.MESSAGE and u.seq < lead.seq]
    if not before:
        return chosen
    anchor = before[-1]
    item = next((i for i in items if i.unit_id == anchor.id), None)
    if item is None or not item.options:  # offered in no form (none fits): nothing can bring it in
        return chosen
    option = min(item.options, key=lambda o: (o.tokens, -o.utility))
    room = budget_tokens - sum(o.tokens for o in options.values())
    droppable = [u for u in chosen if u.id not in plan.required]
    freed: list[Unit] = []
    while option.tokens > room and droppable:
        unit = droppable.pop(0)
        freed.append(unit)
        room += options[unit.id].tokens
    if option.tokens > room:
        return chosen
    freed = only_needed(freed, room, options, lambda left, _out: option.tokens <= left)
    for unit in freed:
        ledger.charge(unit.context_class.value, -options.pop(unit.id).tokens)
        omit_unit(plan, unit, ReasonCode.BUDGET, "role_order")
    for rid in anchor.record_ids:
        plan.omitted.pop(rid, None)
    options[anchor.id] = option
    ledger.charge(anchor.context_class.value, option.tokens, required=True)
    plan.required.setdefault(anchor.id, "turn_anchor")
    return sorted([anchor, *(u for u in chosen if u not in freed)], key=lambda u: u.seq)


@dataclass(slots=True)
class Repaired:
    """The repair phase's result.

    Attributes:
        chosen: the included live units, in ``seq`` order (their options are in the selection's ``result``).
        split_pairs: warnings naming the question/answer pairs that stay split.
        short: everything visited entered and less than :data:`FILL_TARGET` of ``B_dynamic`` is used: the reach
            should widen.
        framing_credit: tokens charged beyond ``B_dynamic`` for message framing the provider format merges away
            (:func:`_fill_merged_framing`); the payload still fits ``B_input``.
    """

    chosen: list[Unit]
    split_pairs: list[dict[str, str]]
    short: bool
    framing_credit: int = 0


def repair_selection(
    request: AssemblyRequest,
    units: Sequence[Unit],
    plan: Plan,
    budgeted: Budgeted,
    selected: Selected,
    policy: Policy,
    coster: Coster,
    options_for: Any,
) -> Repaired:
    """Repair the selection in place: error evidence, pairs, preamble, role order, the required lead, and fill.

    Every step amends ``selected.result`` (chosen options, omissions) and ``selected.ledger`` (tokens), and records
    what it left out in ``plan``. Fill is skipped when the selection keeps a stable prefix, so the prefix stays
    whole. The role-order steps follow the providers' rules: Anthropic Messages needs a user message first, OpenAI
    Chat takes an assistant turn first (case B04 of the shared failure cases).

    Returns:
        :class:`Repaired`: the chosen units in ``seq`` order, the pair warnings, and whether less than
        :data:`FILL_TARGET` of ``B_dynamic`` is used with nothing left out for budget (the reach should widen).
    """
    items, result, ledger, dynamic = selected.items, selected.result, selected.ledger, budgeted.dynamic
    by_id = {u.id: u for u in units}
    if options_for is not None:
        make_room_for_errors(items, result, dynamic, ledger)
        anchor_user_turn(items, result, dynamic, ledger, {u.id: u.role for u in units})
    pairs = question_answer_pairs(units)
    keep_pairs(pairs, items, result, dynamic, ledger)  # the manifest's pair warnings: _keep_final_pairs
    for uid, reason in result.omitted.items():
        omit_unit(plan, by_id[uid], reason, "selection")
    chosen_units = [u for u in units if u.id in result.chosen]
    lead = keep_preamble(
        request.api,
        chosen_units,
        units,
        result.chosen,
        coster,
        ledger,
        dynamic,
        lambda unit, plan=plan: omit_unit(plan, unit, ReasonCode.BUDGET, "role_order"),
        plan.required,
    )
    required = [*budgeted.required, *lead]
    chosen_units = [u for u in chosen_units if u.id in result.chosen]
    chosen_units = _fix_role_order(chosen_units, plan, result.chosen, required, ledger, (units, items, dynamic))
    chosen_units = _anchor_required_lead(chosen_units, units, items, plan, result.chosen, dynamic, ledger)
    keeps_prefix = policy.selection.stable_prefix and selected.previous is not None
    credit = 0
    if options_for is not None and not keeps_prefix:
        chosen_units = _fill(
            items, result, chosen_units, by_id, plan, selected.target, ledger, options_for, coster, pairs
        )
        chosen_units = _fix_role_order(chosen_units, plan, result.chosen, required, ledger)
    chosen_units, split_pairs = _keep_final_pairs(units, pairs, items, result, chosen_units, plan, dynamic, ledger)
    if options_for is not None and not keeps_prefix and selected.target == dynamic:
        chosen_units, credit = _fill_merged_framing(
            items, result, chosen_units, by_id, plan, budgeted.fixed, dynamic, ledger, options_for, coster, pairs
        )
    used = sum(o.tokens for o in result.chosen.values())
    left = any(r is ReasonCode.BUDGET for r in result.omitted.values())
    short = used < FILL_TARGET * dynamic and not left  # all it visited entered, and room is left
    return Repaired(chosen_units, split_pairs, short, credit)


def settle(
    filtered_units: Sequence[Unit],
    pointers: Mapping[str, str | Pointer],
    plan: Plan,
    budgeted: Budgeted,
    selected: Selected,
    repaired: Repaired,
) -> None:
    """Once the reach is final: record the split pairs, settle redundant units, and charge what the ladder saved.

    A redundant unit whose kept unit is not sent either leaves under that unit's reason
    (:func:`settle_redundant`); the ledger's ``saved`` gets the tokens each cheaper rung saved against verbatim.
    """
    if plan.ctx is not None:
        plan.ctx.warnings += repaired.split_pairs
    sent = {u.id for u in (*budgeted.fixed, *repaired.chosen)}
    settle_redundant(filtered_units, pointers, sent, plan.omitted, plan.decisions)
    charge_savings(selected.ledger.saved, selected.result.chosen, budgeted.costs)
