"""Room for failure evidence: a local improvement of the knapsack once the ladder offers cheaper rungs.

Selection (:mod:`.select`) visits units by utility and gives each the best option that fits, so recent
bulk (a file listing, a long ``cat``) enters verbatim while an older tool output that reported an error
is left out, although an excerpt of the bulk would have left room for the error lines. Seed 000 ("Lo que
merece protección") and issue 4 ask the opposite: errors, tracebacks and the failing test are what an
agent needs to recover.

:func:`make_room_for_errors` runs after selection, only when the ladder is on. For each left-out unit
whose options report error lines (``detail["error_lines"]``, set by :mod:`.represent`), newest and most
useful first, it takes the cheapest option that keeps the most error lines and looks for the room by
downgrading chosen *optional* units to cheaper rungs that still keep every error line they show (bulk
without errors shrinks freely; an error output only to an excerpt that keeps its errors), those losing
the least utility per token freed first. The move is made only when the utility gained is larger than the utility
lost, and class caps still hold; otherwise nothing changes. Required units are never touched, units
never get dropped, and the result is deterministic (every sort has a total order).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from ctxledger.assemble.select import Option, SelectionItem, SelectionResult
from ctxledger.budget import BudgetLedger


@dataclass(frozen=True, slots=True)
class _Move:
    item: SelectionItem
    option: Option
    freed: int
    loss: float


def error_lines(option: Option) -> tuple[int, int]:
    """``(error lines of the unit, error lines this option keeps)``; verbatim keeps them all."""
    total = int(option.detail.get("error_lines", 0) or 0)  # type: ignore[call-overload]
    kept = int(option.detail.get("error_lines_kept", total) or 0)  # type: ignore[call-overload]
    return total, kept


def _unit_errors(item: SelectionItem) -> int:
    return max((error_lines(o)[0] for o in item.options), default=0)


def _evidence_option(item: SelectionItem) -> Option:
    """The cheapest option keeping the most error lines (verbatim keeps all of them)."""
    total = _unit_errors(item)

    def kept(o: Option) -> int:
        return total if o.representation == "verbatim" else error_lines(o)[1]

    return min(item.options, key=lambda o: (-kept(o), o.tokens, -o.utility, o.representation))


def _keeps_errors(item: SelectionItem, option: Option) -> bool:
    total = _unit_errors(item)
    return option.representation == "verbatim" or error_lines(option)[1] >= total


def _downgrades(items: Sequence[SelectionItem], result: SelectionResult, admitting: str) -> list[_Move]:
    """For each chosen optional unit, its cheaper option that keeps every error line and loses least per token."""
    moves = []
    for item in items:
        current = result.chosen.get(item.unit_id)
        if item.required or current is None or item.unit_id == admitting:
            continue
        cheaper = [o for o in item.options if o.tokens < current.tokens and _keeps_errors(item, o)]
        if not cheaper:
            continue
        best = min(
            cheaper,
            key=lambda o: ((current.utility - o.utility) / (current.tokens - o.tokens), o.tokens, o.representation),
        )
        moves.append(_Move(item, best, current.tokens - best.tokens, current.utility - best.utility))
    return sorted(moves, key=lambda m: (m.loss / m.freed, -m.item.seq, m.item.unit_id))


def make_room_for_errors(
    items: Sequence[SelectionItem], result: SelectionResult, budget_tokens: int, ledger: BudgetLedger
) -> list[str]:
    """Admit left-out units that report errors by shrinking chosen bulk, when utility gains (module docstring).

    Args:
        items: the selection items (options from the ladder carry ``error_lines`` in their detail).
        result: the selection, updated in place (``chosen``, ``omitted``, ``used_tokens``).
        budget_tokens: ``B_dynamic`` (tokens).
        ledger: the budget ledger, charged with every change.

    Returns:
        Ids of the units admitted.
    """
    by_id: Mapping[str, SelectionItem] = {i.unit_id: i for i in items}
    waiting = [by_id[u] for u in result.omitted if u in by_id and _unit_errors(by_id[u]) > 0]
    waiting.sort(key=lambda i: (-max(o.utility for o in i.options), -i.seq, i.unit_id))
    admitted = []
    for item in waiting:
        if _admit(item, items, result, budget_tokens, ledger):
            admitted.append(item.unit_id)
    return admitted


def _admit(
    item: SelectionItem,
    items: Sequence[SelectionItem],
    result: SelectionResult,
    budget_tokens: int,
    ledger: BudgetLedger,
) -> bool:
    target = _evidence_option(item)
    remaining = budget_tokens - sum(o.tokens for o in result.chosen.values())
    plan: list[_Move] = []
    for move in _downgrades(items, result, item.unit_id):
        if remaining >= target.tokens:
            break
        plan.append(move)
        remaining += move.freed
    loss = sum(m.loss for m in plan)
    if remaining < target.tokens or target.utility <= loss or not _caps_hold(item, target, plan, ledger):
        return False
    for move in plan:
        result.chosen[move.item.unit_id] = move.option
        ledger.charge(move.item.context_class, -move.freed)
    result.chosen[item.unit_id] = target
    result.omitted.pop(item.unit_id, None)
    ledger.charge(item.context_class, target.tokens)
    result.used_tokens = sum(o.tokens for o in result.chosen.values())
    return True


def _caps_hold(item: SelectionItem, target: Option, plan: Sequence[_Move], ledger: BudgetLedger) -> bool:
    freed_in_class = sum(m.freed for m in plan if m.item.context_class == item.context_class)
    return ledger.fits_cap(item.context_class, target.tokens - freed_in_class)
