"""Fill the budget: left-out units enter at a cheaper rung while ``B_dynamic`` is far from spent.

Selection gives each unit the best option that fits, but rungs (excerpts, extractions, memories,
references) are built only for the units within the ladder's reach (:func:`~ctxledger.assemble.represent.reach`):
an older unit is offered verbatim only, and when none of those fits, room is left over. Once selection is
done, :func:`fill_budget` visits the units left out for ``budget``, highest utility first (at most
:data:`FILL_VISITS` of them), while less than :data:`~ctxledger.assemble.assembler.FILL_TARGET` of
``B_dynamic`` is used, asks the ladder for their rungs, and admits each at its most useful rung that fits
the room and its class cap. Units enter whole, never with a split tool exchange, and chosen units are
never downgraded. A unit of a question/answer pair whose other half is out enters only together with it
(:mod:`.pairs`): fill never leaves a question without its answer, or an answer without its question. When
the target is still not met the manifest's ``budget.fill`` says why.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

from ctxledger.assemble.select import Option, SelectionItem, SelectionResult
from ctxledger.budget import BudgetLedger
from ctxledger.policy.decisions import ReasonCode

FILL_VISITS = 64
"""Left-out units whose rungs are asked for at most, per assembly (bounds the ladder's work)."""


def fill_budget(
    items: Sequence[SelectionItem],
    result: SelectionResult,
    dynamic: int,
    ledger: BudgetLedger,
    rungs_for: Callable[[SelectionItem], Sequence[Option]],
    target: float,
    allowed: Callable[[SelectionItem], bool] = lambda item: True,
    partners: Mapping[str, str] | None = None,
) -> list[str]:
    """Admit left-out units at cheaper rungs until ``target`` × ``dynamic`` tokens are used; return their ids.

    Args:
        items: the selection items (their first option is verbatim).
        result: selection's result, updated in place (``chosen`` gains, ``omitted`` loses the admitted).
        dynamic: ``B_dynamic`` in tokens.
        ledger: the budget ledger, charged for what enters.
        rungs_for: an item → its options besides verbatim (the ladder, reach or not).
        target: the share of ``dynamic`` to reach.
        allowed: which left-out items may enter (the assembler keeps the payload's first turn a user turn).
        partners: unit id → the other half of its question/answer pair; a unit whose other half is not
            chosen enters only with it (both left out for budget, allowed, and fitting together).

    Returns:
        The admitted unit ids, in the order they entered.
    """
    used = sum(o.tokens for o in result.chosen.values())
    if used >= target * dynamic:
        return []
    left = [
        i
        for i in items
        if result.omitted.get(i.unit_id) is ReasonCode.BUDGET and i.unit_id not in result.chosen and allowed(i)
    ]
    left.sort(key=lambda i: (-i.options[0].utility, -i.seq, i.unit_id))
    candidates = {i.unit_id: i for i in left}
    partners = partners or {}
    admitted = []
    for item in left[:FILL_VISITS]:
        room = dynamic - used
        if used >= target * dynamic or room <= 0:
            break
        if item.unit_id in result.chosen:  # entered with the other half of its pair
            continue
        mate_id = partners.get(item.unit_id)
        mate = None
        if mate_id is not None and mate_id not in result.chosen:
            mate = candidates.get(mate_id)
            if mate is None:  # its other half may not enter: entering alone would split the pair
                continue
        entering = _admission(item, mate, room, ledger, rungs_for)
        for entrant, best in entering:
            result.chosen[entrant.unit_id] = best
            del result.omitted[entrant.unit_id]
            ledger.charge(entrant.context_class, best.tokens)
            used += best.tokens
            admitted.append(entrant.unit_id)
    result.used_tokens = used
    return admitted


def _best(options: Sequence[Option]) -> Option:
    return max(options, key=lambda o: (o.utility, -o.tokens, o.representation))


def _admission(
    item: SelectionItem,
    mate: SelectionItem | None,
    room: int,
    ledger: BudgetLedger,
    rungs_for: Callable[[SelectionItem], Sequence[Option]],
) -> list[tuple[SelectionItem, Option]]:
    """What enters for ``item``: its most useful rung that fits, with ``mate``'s (when given) fitting beside it.

    With a mate, ``item`` takes its most useful rung that leaves room (and class cap) for some rung of the
    mate, and the mate its most useful rung in what is left; ``[]`` when no such two fit.
    """

    def fitting(it: SelectionItem, room: int, taken: tuple[str, int] | None) -> list[Option]:
        extra = taken[1] if taken is not None and taken[0] == it.context_class else 0
        return [
            o
            for o in [*rungs_for(it), *it.options]
            if o.tokens <= room and ledger.fits_cap(it.context_class, o.tokens + extra)
        ]

    fits = fitting(item, room, None)
    if not fits:
        return []
    if mate is None:
        return [(item, _best(fits))]
    for option in sorted(fits, key=lambda o: (o.utility, -o.tokens, o.representation), reverse=True):
        beside = fitting(mate, room - option.tokens, (item.context_class, option.tokens))
        if beside:
            return [(item, option), (mate, _best(beside))]
    return []
