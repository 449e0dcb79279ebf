"""Selection under the dynamic budget: a multiple-choice knapsack solved greedily.

Every candidate unit offers one or more :class:`Option` s (verbatim first; excerpt, extraction, memory
or reference when a representation ladder is enabled) and may also be dropped. Required units are placed
first; then the optional units are visited in order of their utility, and each takes the highest-utility
option that still fits both the total budget and its class cap (a cheaper representation when verbatim
does not fit). Visiting by utility rather than by utility per token is deliberate: ordering by density
lets many small, old, barely relevant turns crowd out one large recent tool exchange (cases B01 and B06
show the recency-first behaviour users expect), and a large unit that does not fit verbatim can still
enter through a cheaper rung of the representation ladder. Every choice stays explainable: one utility,
one cost.

Ties break deterministically: higher utility, then newer ``seq``, then unit id. Selection does not
decide order: the serializer emits the chosen units in ``seq`` order (seed 000).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from operator import attrgetter

from ctxledger.budget import BudgetLedger
from ctxledger.policy.base import ReasonCode
from ctxledger.serialize.base import Turn
from ctxledger.units import Unit


@dataclass(frozen=True, slots=True)
class Option:
    """One way a unit can enter the context.

    Attributes:
        representation: ``verbatim``, ``excerpt``, ``extraction``, ``memory``, ``reference`` …
        tokens: exact cost of its turns in the target format (tokens).
        utility: its utility in [0, 1] (a lossy representation scores lower than verbatim).
        turns: the turns it renders to.
        transform: name of the transform that produced it (``None`` for verbatim).
        detail: JSON-able extra facts for the manifest (locators, source version …).
    """

    representation: str
    tokens: int
    utility: float
    turns: tuple[Turn, ...]
    transform: str | None = None
    detail: dict[str, object] = field(default_factory=dict)
    turn_tokens: tuple[int, ...] = ()
    """Tokens of each turn (aligned with ``turns``) when known; they sum to ``tokens``."""

    @property
    def density(self) -> float:
        """Utility per token (utility when free)."""
        return self.utility / self.tokens if self.tokens > 0 else self.utility


_SLOTS = ("representation", "tokens", "utility", "turns", "transform", "detail", "turn_tokens")
(_SET_REPRESENTATION, _SET_TOKENS, _SET_UTILITY, _SET_TURNS, _SET_TRANSFORM, _SET_DETAIL, _SET_TURN_TOKENS) = (
    getattr(Option, name).__set__ for name in _SLOTS
)


def new_option(
    representation: str,
    tokens: int,
    utility: float,
    turns: tuple[Turn, ...],
    transform: str | None = None,
    detail: dict[str, object] | None = None,
    turn_tokens: tuple[int, ...] = (),
) -> Option:
    """The :class:`Option` of these fields (``detail`` ``None``: a new empty dict), equal to ``Option(...)``.

    Made without the frozen dataclass's ``__setattr__`` call per field (a third of the time): an assembly makes
    one per candidate unit and rung.
    """
    option = object.__new__(Option)
    _SET_REPRESENTATION(option, representation)
    _SET_TOKENS(option, tokens)
    _SET_UTILITY(option, utility)
    _SET_TURNS(option, turns)
    _SET_TRANSFORM(option, transform)
    _SET_DETAIL(option, {} if detail is None else detail)
    _SET_TURN_TOKENS(option, turn_tokens)
    return option


def payload_turns(fixed: Sequence[Unit], chosen: Sequence[Unit], options: Mapping[str, Option]) -> list[Turn]:
    """The turns a payload sends, in its order: the fixed units' turns, then each chosen unit's option's, by ``seq``.

    ``options`` maps each chosen unit's id to the option it enters as.
    """
    turns = [t for u in sorted(fixed, key=lambda u: u.seq) for t in u.turns]
    for unit in sorted(chosen, key=lambda u: u.seq):
        turns.extend(options[unit.id].turns)
    return turns


@dataclass(slots=True)
class SelectionItem:
    """A unit offered to selection: its id, seq, class, options and whether it is required."""

    unit_id: str
    seq: int
    context_class: str
    options: Sequence[Option]
    required: bool = False
    verbatim_only: bool = False
    """Required and protected: never represented by anything but verbatim (instructions, user constraints)."""


@dataclass(slots=True)
class SelectionResult:
    """Chosen option per unit id, and the omission reason per unit id."""

    chosen: dict[str, Option] = field(default_factory=dict)
    omitted: dict[str, ReasonCode] = field(default_factory=dict)
    used_tokens: int = 0


_utility = attrgetter("utility")


def select(items: Sequence[SelectionItem], budget_tokens: int, ledger: BudgetLedger) -> SelectionResult:
    """Choose at most one option per item under ``budget_tokens`` (tokens) and the ledger's class caps.

    Required items must already be known to fit at their cheapest option (the assembler checks that
    first and raises :class:`~ctxledger.errors.RequiredBlocksDoNotFit` otherwise); each starts at its
    cheapest option and is upgraded (newest first, protected ones first) to verbatim where room allows.

    Returns:
        A :class:`SelectionResult`; every optional item not chosen is omitted with ``budget`` or
        ``class_cap``.
    """
    result = SelectionResult()
    remaining = budget_tokens
    required = _required_order(items)
    for item in required:  # start every required item at its cheapest option …
        result.chosen[item.unit_id] = min(item.options, key=lambda o: (o.tokens, -o.utility))
        remaining -= result.chosen[item.unit_id].tokens
    for item in required:  # … then upgrade to the best option that still fits, newest first
        current = result.chosen[item.unit_id]
        better = [o for o in item.options if o.utility > current.utility and o.tokens - current.tokens <= remaining]
        if better:
            best = max(better, key=lambda o: (o.utility, -o.tokens))
            remaining -= best.tokens - current.tokens
            result.chosen[item.unit_id] = best
        ledger.charge(item.context_class, result.chosen[item.unit_id].tokens, required=True)
    optional = [i for i in items if not i.required]
    optional.sort(key=lambda i: (-max(map(_utility, i.options)), -i.seq, i.unit_id))
    for item in optional:
        option, reason = _best_fit(item, remaining, ledger)
        if option is None:
            result.omitted[item.unit_id] = reason
            continue
        result.chosen[item.unit_id] = option
        remaining -= option.tokens
        ledger.charge(item.context_class, option.tokens)
    result.used_tokens = budget_tokens - remaining
    return result


def _required_order(items: Sequence[SelectionItem]) -> list[SelectionItem]:
    # Protected verbatim-only items first, then newest first: older required items are squeezed first.
    req = [i for i in items if i.required]
    return sorted(req, key=lambda i: (not i.verbatim_only, -i.seq, i.unit_id))


def _best_fit(item: SelectionItem, remaining: int, ledger: BudgetLedger) -> tuple[Option | None, ReasonCode]:
    reason = ReasonCode.BUDGET
    options = item.options
    ranked = options if len(options) == 1 else sorted(options, key=lambda o: (-o.utility, o.tokens, o.representation))
    for option in ranked:
        if option.tokens > remaining:
            continue
        if not ledger.fits_cap(item.context_class, option.tokens):
            reason = ReasonCode.CLASS_CAP
            continue
        return option, reason
    return None, reason
