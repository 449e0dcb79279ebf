"""An optional non-user unit that would open the payload: anchored by the user turn before it, or dropped.

The payload must open with a user turn after the instructions (case B04). When the oldest chosen unit is an
assistant turn whose user turn was left out for budget, dropping it throws away a unit selection chose on its
merit (often the answer the question asks for). :func:`anchor_lead` instead admits the newest user message
before it (usually the question it answered), making room by leaving out chosen optional units of *lower*
utility than the lead, oldest-lowest first. When the room cannot be made that way, nothing changes and the
assembler drops the lead as before (``role_order``).
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass

from ctxledger.assemble.select import Option, SelectionItem
from ctxledger.assemble.units import Unit, UnitKind
from ctxledger.budget import BudgetLedger


@dataclass(frozen=True, slots=True)
class Anchor:
    """The user unit that opens the payload in front of the lead, its option, and the units it displaces."""

    unit: Unit
    option: Option
    displaced: tuple[Unit, ...]


def anchor_lead(
    chosen: Sequence[Unit],
    units: Sequence[Unit],
    items: Mapping[str, SelectionItem],
    options: Mapping[str, Option],
    budget_tokens: int,
    keep: Collection[str],
    ledger: BudgetLedger,
) -> Anchor | None:
    """The anchor that lets ``chosen[0]`` (an optional non-user unit) stay, or ``None``.

    Args:
        chosen: the chosen units in ``seq`` order; ``chosen[0]`` is the lead.
        units: the live units in ``seq`` order (the anchor is the newest user message before the lead).
        items: unit id → its selection item (options and utility).
        options: unit id → the chosen option (what each chosen unit costs now).
        budget_tokens: ``B_dynamic`` (tokens).
        keep: ids of chosen units that may not be displaced (required units, the preamble).
        ledger: the budget ledger (the anchor must fit its class cap, counting what its class gives back).

    Returns:
        An :class:`Anchor` whose option fits once its displaced units leave (each of lower utility than the
        lead), verbatim when that fits, else the anchor's cheapest option; ``None`` when there is no user
        message before the lead, or no such room. Pure: nothing is changed.
    """
    if not chosen:
        return None
    lead = chosen[0]
    anchor = None
    for unit in units:
        if unit.seq >= lead.seq:
            break
        if unit.role == "user" and unit.kind is UnitKind.MESSAGE:
            anchor = unit
    item = items.get(anchor.id) if anchor is not None else None
    lead_item = items.get(lead.id)
    if anchor is None or item is None or not item.options or lead_item is None:
        return None
    bar = _utility(lead_item)
    used = sum(o.tokens for o in options.values())
    movable = sorted(
        (u for u in chosen[1:] if u.id not in keep and u.id in items and _utility(items[u.id]) < bar),
        key=lambda u: (_utility(items[u.id]), u.seq),
    )
    cheapest = min(item.options, key=lambda o: (o.tokens, -o.utility))
    for option in [item.options[0]] if cheapest is item.options[0] else [item.options[0], cheapest]:
        room = budget_tokens - used
        displaced: list[Unit] = []
        for unit in movable:
            if option.tokens <= room:
                break
            displaced.append(unit)
            room += options[unit.id].tokens
        freed = sum(options[u.id].tokens for u in displaced if u.context_class is anchor.context_class)
        if option.tokens <= room and ledger.fits_cap(anchor.context_class.value, option.tokens - freed):
            return Anchor(anchor, option, tuple(displaced))
    return None


def _utility(item: SelectionItem) -> float:
    return max(o.utility for o in item.options)
