"""Fill the budget: left-out units enter at a cheaper rung while ``B_dynamic`` is far from spent.

Selection gives each unit the best option that fits, but rungs (excerpts, extractions, memories,
references) are built only for the units within the ladder's reach (:func:`~ctxledger.assemble.represent.reach`):
an older unit is offered verbatim only, and when none of those fits, room is left over. Once selection is
done, :func:`fill_budget` visits the units left out for ``budget``, highest utility first (at most
:data:`FILL_VISITS` of them), while less than :data:`~ctxledger.assemble.assembler.FILL_TARGET` of
``B_dynamic`` is used, asks the ladder for their rungs, and admits each at its most useful rung that fits
the room and its class cap. Units enter whole, never with a split tool exchange, and chosen units are
never downgraded. When the target is still not met the manifest's ``budget.fill`` says why.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

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
    admitted = []
    for item in left[:FILL_VISITS]:
        room = dynamic - used
        if used >= target * dynamic or room <= 0:
            break
        fits = [o for o in rungs_for(item) if o.tokens <= room and ledger.fits_cap(item.context_class, o.tokens)]
        fits += [o for o in item.options if o.tokens <= room and ledger.fits_cap(item.context_class, o.tokens)]
        if not fits:
            continue
        best = max(fits, key=lambda o: (o.utility, -o.tokens, o.representation))
        result.chosen[item.unit_id] = best
        del result.omitted[item.unit_id]
        ledger.charge(item.context_class, best.tokens)
        used += best.tokens
        admitted.append(item.unit_id)
    result.used_tokens = used
    return admitted
