"""Room for failure evidence: a local improvement of the knapsack once the ladder offers cheaper rungs.

Selection (:mod:`.select`) visits units by utility and gives each the best option that fits, so recent
bulk (a file listing, a long ``cat``) enters verbatim while an older tool output that reported an error
is left out, although an excerpt of the bulk would have left room for the error lines. Seed 000 ("Lo que
merece protección") asks the opposite: errors, tracebacks and the failing test are what an
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
from operator import attrgetter

from ctxledger.assemble.select import Option, SelectionItem, SelectionResult
from ctxledger.budget import BudgetLedger
from ctxledger.policy.base import ReasonCode


@dataclass(frozen=True, slots=True)
class _Move:
    item: SelectionItem
    option: Option
    freed: int
    loss: float


def error_lines(option: Option) -> tuple[int, int]:
    """``(error lines of the unit, error lines this option keeps)``; verbatim keeps them all."""
    detail = option.detail
    if not detail:
        return 0, 0
    total = int(detail.get("error_lines", 0) or 0)  # type: ignore[call-overload]
    kept = int(detail.get("error_lines_kept", total) or 0)  # type: ignore[call-overload]
    return total, kept


def _unit_errors(item: SelectionItem) -> int:
    return max((error_lines(o)[0] for o in item.options), default=0)


def _evidence_option(item: SelectionItem) -> Option:
    """The cheapest option keeping the most error lines (verbatim keeps all of them)."""
    total = _unit_errors(item)

    def kept(o: Option) -> int:
        return total if o.representation == "verbatim" else error_lines(o)[1]

    return min(item.options, key=lambda o: (-kept(o), o.tokens, -o.utility, o.representation))


def _keeps_errors(option: Option, total: int) -> bool:
    """Whether ``option`` keeps all ``total`` error lines of its unit."""
    return option.representation == "verbatim" or error_lines(option)[1] >= total


def _downgrade(item: SelectionItem | None, current: Option) -> _Move | None:
    """The cheaper option of a chosen optional unit that keeps every error line and loses least per token."""
    if item is None or item.required:
        return None
    cheaper = [o for o in item.options if o.tokens < current.tokens]
    if cheaper:
        total = _unit_errors(item)
        cheaper = [o for o in cheaper if _keeps_errors(o, total)]
    if not cheaper:
        return None
    best = min(
        cheaper,
        key=lambda o: ((current.utility - o.utility) / (current.tokens - o.tokens), o.tokens, o.representation),
    )
    return _Move(item, best, current.tokens - best.tokens, current.utility - best.utility)


def _move_order(move: _Move) -> tuple[float, int, str]:
    """Least utility lost per token freed first; a total order (newest, then unit id, breaks ties)."""
    return (move.loss / move.freed, -move.item.seq, move.item.unit_id)


def _downgrades(by_id: Mapping[str, SelectionItem], result: SelectionResult, admitting: str) -> list[_Move]:
    """For each chosen optional unit but ``admitting``, its :func:`_downgrade`, in :func:`_move_order`.

    Only chosen units can be downgraded, so only they are visited (``by_id``: unit id → item); the moves
    are sorted on a total key, so the order of the visit does not matter.
    """
    moves = [
        move
        for unit_id, current in result.chosen.items()
        if unit_id != admitting and (move := _downgrade(by_id.get(unit_id), current)) is not None
    ]
    return sorted(moves, key=_move_order)


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
    # each chosen unit's downgrade depends on its own option only: an admission changes the admitted unit's
    # and the downgraded ones', so only theirs are found again
    best = {m.item.unit_id: m for m in _downgrades(by_id, result, "")}
    moves: list[_Move] | None = None  # the downgrades in order (they change only on admission)
    used = sum(o.tokens for o in result.chosen.values())  # tokens chosen (it changes only on admission)
    for item in waiting:
        if moves is None:
            moves = sorted(best.values(), key=_move_order)
        changed = _admit(
            item, [m for m in moves if m.item.unit_id != item.unit_id], result, budget_tokens - used, ledger
        )
        if changed:
            admitted.append(item.unit_id)
            for unit_id in changed:
                move = _downgrade(by_id.get(unit_id), result.chosen[unit_id])
                if move is None:
                    best.pop(unit_id, None)
                else:
                    best[unit_id] = move
            moves = None
            used = result.used_tokens
    return admitted


def _admit(
    item: SelectionItem,
    moves: Sequence[_Move],
    result: SelectionResult,
    left: int,
    ledger: BudgetLedger,
) -> list[str]:
    """Admit ``item`` at its evidence option, downgrading the first ``moves`` as needed (``left``: tokens free).

    Returns:
        The ids of the units whose chosen option changed (the admitted one last); empty when nothing changed.
    """
    target = _evidence_option(item)
    remaining = left
    plan: list[_Move] = []
    for move in moves:
        if remaining >= target.tokens:
            break
        plan.append(move)
        remaining += move.freed
    loss = sum(m.loss for m in plan)
    if remaining < target.tokens or target.utility <= loss or not _caps_hold(item, target, plan, ledger):
        return []
    for move in plan:
        result.chosen[move.item.unit_id] = move.option
        ledger.charge(move.item.context_class, -move.freed)
    result.chosen[item.unit_id] = target
    result.omitted.pop(item.unit_id, None)
    ledger.charge(item.context_class, target.tokens)
    result.used_tokens = sum(o.tokens for o in result.chosen.values())
    return [*(m.item.unit_id for m in plan), item.unit_id]


def _caps_hold(item: SelectionItem, target: Option, plan: Sequence[_Move], ledger: BudgetLedger) -> bool:
    freed_in_class = sum(m.freed for m in plan if m.item.context_class == item.context_class)
    return ledger.fits_cap(item.context_class, target.tokens - freed_in_class)


ANCHOR_SHARE = 0.25
"""A user turn is admitted only when role order would otherwise drop at least this share of ``B_dynamic``."""


def anchor_user_turn(
    items: Sequence[SelectionItem],
    result: SelectionResult,
    budget_tokens: int,
    ledger: BudgetLedger,
    roles: Mapping[str, str],
) -> str | None:
    """Open the history with a user turn by admitting one, when that is worth more than the role-order drop.

    The assembler drops chosen units from the oldest until the first is a user turn or required (provider
    role order, case B04). With the ladder, old exchanges enter through cheap rungs where their user turns
    did not, so that run can be most of the context. Here the newest left-out user unit older than every
    chosen unit is admitted instead, the room coming first from downgrades that keep every error line,
    then from leaving out the oldest chosen units (``budget``). The change is made only when that run holds
    at least :data:`ANCHOR_SHARE` of the budget (trimming a few leading turns is role order's business,
    case B06) and the chosen utility after it (the run kept, the user turn added) beats the utility left
    once role order drops the run; otherwise nothing changes.

    Args:
        items: the selection items.
        result: the selection, updated in place.
        budget_tokens: ``B_dynamic`` (tokens).
        ledger: the budget ledger, charged with every change.
        roles: unit id → role of its first turn.

    Returns:
        The id of the user unit admitted, or ``None``.
    """
    by_id = {i.unit_id: i for i in items}
    chosen = sorted((by_id[u] for u in result.chosen if u in by_id), key=_SEQ_AND_ID)
    run = _leading_run(chosen, roles)
    if sum(result.chosen[i.unit_id].tokens for i in run) < ANCHOR_SHARE * budget_tokens:
        return None  # role order trims a few leading turns: recency-first selection stands (case B06)
    users = [i for i in items if roles.get(i.unit_id) == "user" and i.unit_id not in result.chosen]
    users = [i for i in users if run and i.seq < run[0].seq]
    if not users:
        return None
    anchor = max(users, key=lambda i: (i.seq, i.unit_id))
    need = min(o.tokens for o in anchor.options)
    remaining = budget_tokens - sum(o.tokens for o in result.chosen.values())
    moves: list[_Move] = []
    for move in _downgrades(by_id, result, anchor.unit_id):
        if remaining >= need:
            break
        moves.append(move)
        remaining += move.freed
    drops: list[SelectionItem] = []
    for item in chosen:
        if remaining >= need or item.required:
            break
        drops.append(item)
        remaining += result.chosen[item.unit_id].tokens - _moved(moves, item)
    fits = [o for o in anchor.options if o.tokens <= remaining]
    if not fits:
        return None
    option = max(fits, key=lambda o: (o.utility, -o.tokens, o.representation))
    before = sum(o.utility for u, o in result.chosen.items() if u not in {i.unit_id for i in run})
    after_moves = {**result.chosen, **{m.item.unit_id: m.option for m in moves}}
    after = sum(o.utility for u, o in after_moves.items() if u not in {i.unit_id for i in drops}) + option.utility
    if after <= before:
        return None
    for move in moves:
        result.chosen[move.item.unit_id] = move.option
        ledger.charge(move.item.context_class, -move.freed)
    for item in drops:
        dropped = result.chosen.pop(item.unit_id)
        result.omitted[item.unit_id] = ReasonCode.BUDGET
        ledger.charge(item.context_class, -dropped.tokens)
    result.chosen[anchor.unit_id] = option
    result.omitted.pop(anchor.unit_id, None)
    ledger.charge(anchor.context_class, option.tokens)
    result.used_tokens = sum(o.tokens for o in result.chosen.values())
    return anchor.unit_id


_SEQ_AND_ID = attrgetter("seq", "unit_id")
"""``(seq, unit id)`` of a selection item: the order of the chosen units."""


def _leading_run(chosen: Sequence[SelectionItem], roles: Mapping[str, str]) -> list[SelectionItem]:
    """The chosen units role order would drop: those before the first user turn or required unit."""
    run = []
    for item in chosen:
        if roles.get(item.unit_id) == "user" or item.required:
            break
        run.append(item)
    return run


def _moved(moves: Sequence[_Move], item: SelectionItem) -> int:
    """Tokens already freed from ``item`` by a downgrade in ``moves``."""
    return sum(m.freed for m in moves if m.item.unit_id == item.unit_id)
