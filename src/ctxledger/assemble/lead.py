"""An optional non-user unit that would open the payload: anchored by the user turn before it, or dropped.

The payload must open with a user turn after the instructions (case B04). When the oldest chosen unit is an
assistant turn whose user turn was left out for budget, dropping it throws away a unit selection chose on its
merit (often the answer the question asks for). :func:`anchor_lead` instead admits the newest user message
before it (usually the question it answered), making room by leaving out chosen optional units of *lower*
utility than the lead, lowest (then oldest) first, and only those the room needs: a weaker unit left out before a
larger one that alone makes the room stays. When the room cannot be made that way, nothing changes and the
assembler drops the lead as before (``role_order``).
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping, Sequence
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
        lead, and each needed: with any one of them back the option no longer fits), verbatim when that fits,
        else the anchor's cheapest option; ``None`` when there is no user message before the lead, or no such
        room. Pure: nothing is changed.
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
        displaced = _needed(displaced, option, room, anchor, options, ledger)
        if displaced is not None:
            return Anchor(anchor, option, tuple(displaced))
    return None


def _needed(
    displaced: list[Unit],
    option: Option,
    room: int,
    anchor: Unit,
    options: Mapping[str, Option],
    ledger: BudgetLedger,
) -> list[Unit] | None:
    """The displaced units the anchor's ``option`` needs out, or ``None`` when even all of them leave too little.

    ``room`` is the room once every unit of ``displaced`` (lowest utility first) has left. A unit displaced early
    may not be needed once a larger one after it has left: :func:`only_needed` puts each back, highest utility
    first, while the option still fits the room and the anchor's class cap without it.
    """
    cls = anchor.context_class

    def fits(room: int, out: list[Unit]) -> bool:
        freed = sum(options[u.id].tokens for u in out if u.context_class is cls)
        return option.tokens <= room and ledger.fits_cap(cls.value, option.tokens - freed)

    if not fits(room, displaced):
        return None
    return only_needed(displaced, room, options, fits)


def only_needed(
    displaced: Sequence[Unit],
    room: int,
    options: Mapping[str, Option],
    fits: Callable[[int, list[Unit]], bool],
) -> list[Unit]:
    """The units of ``displaced`` an anchor needs out: each unit whose leaving the anchor does not need is put back.

    Args:
        displaced: the units left out to make the anchor's room, in the order they left (the first is the one
            most readily given up); with all of them out the anchor fits.
        room: the room (tokens) once every unit of ``displaced`` has left.
        options: unit id → the chosen option (what each displaced unit costs back in the payload).
        fits: ``fits(room, out)``: whether the anchor fits ``room`` with the units ``out`` left out (its class cap,
            when one binds it). Putting a unit back only shrinks the room and the class tokens freed.

    Returns:
        The needed units, in the order they left: the last to leave is needed (the room was short before it
        left); each earlier one is put back, the last to leave first, while the anchor still fits without it.
        Putting any unit returned back leaves too little room or breaks the cap. Pure.
    """
    kept = list(displaced)
    for unit in reversed(displaced[:-1]):
        rest = [u for u in kept if u is not unit]
        if fits(room - options[unit.id].tokens, rest):
            kept, room = rest, room - options[unit.id].tokens
    return kept


def _utility(item: SelectionItem) -> float:
    return max(o.utility for o in item.options)
