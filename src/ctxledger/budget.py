"""The token budget and the budget ledger.

Seed 000 "Tokens y presupuesto antes de seleccionar"; seed 001 "Context Budget Ledger".

``B_input = W − O − M`` is what the request may carry: the model's context window ``W`` less the output
reserve ``O`` and the safety margin ``M``. ``B_dynamic = B_input − F`` is what is left for history after
the fixed blocks ``F`` (instructions, tool schemas, pinned policy). All quantities are tokens of the
model's tokenizer on the serialized request. When ``F`` plus the other required blocks do not fit,
:class:`~ctxledger.errors.RequiredBlocksDoNotFit` lists every block; nothing is dropped silently.

The ledger splits ``B_dynamic`` into per-class caps (fractions); a class that uses less than its cap
leaves the rest to the others, because selection only enforces a class cap while the total budget holds.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ctxledger.errors import BudgetItem, BudgetOutOfBounds, NoRoomForInput, RequiredBlocksDoNotFit

MAX_TOKENS = 10_000_000
"""The largest ``W``, ``O`` or ``M`` a request may name, in tokens."""

TOKEN_BOUNDS: Mapping[str, tuple[int, int]] = {
    "window_tokens": (1, MAX_TOKENS),
    "output_tokens": (0, MAX_TOKENS),
    "margin_tokens": (0, MAX_TOKENS),
}
"""Inclusive ``(least, most)`` of each budget field. The one rule for every front end: :class:`Budget` enforces it
(the library and the CLI), and the HTTP service's request schema states the same bounds."""


@dataclass(frozen=True, slots=True)
class Budget:
    """Window arithmetic in tokens.

    Attributes:
        window_tokens: ``W``, the model's context window.
        output_tokens: ``O``, tokens reserved for the reply.
        margin_tokens: ``M``, safety margin (must cover the counter's error when it is an estimate).

    Raises:
        BudgetOutOfBounds: a value outside :data:`TOKEN_BOUNDS` (``W`` ≥ 1, ``O`` and ``M`` ≥ 0, each at most
            :data:`MAX_TOKENS`; a :class:`~ctxledger.errors.ConfigurationError` too; names the field).
        NoRoomForInput: ``B_input <= 0`` (a :class:`~ctxledger.errors.ConfigurationError` too; names the fields).
    """

    window_tokens: int
    output_tokens: int = 0
    margin_tokens: int = 0

    def __post_init__(self) -> None:
        """Validate the arithmetic."""
        for name, (least, most) in TOKEN_BOUNDS.items():
            value = getattr(self, name)
            if not least <= value <= most:
                raise BudgetOutOfBounds(name, value, least, most)
        if self.input_tokens <= 0:
            raise NoRoomForInput(self.window_tokens, self.output_tokens, self.margin_tokens)

    @property
    def input_tokens(self) -> int:
        """``B_input = W − O − M``."""
        return self.window_tokens - self.output_tokens - self.margin_tokens

    def check_required(self, blocks: Sequence[BudgetItem]) -> int:
        """Return the tokens left after the required blocks (``≥ 0``).

        Raises:
            RequiredBlocksDoNotFit: when the blocks' sum exceeds ``B_input`` (lists every block).
        """
        used = sum(b.tokens for b in blocks)
        if used > self.input_tokens:
            raise RequiredBlocksDoNotFit(blocks, self.input_tokens)
        return self.input_tokens - used


DEFAULT_BUDGET = Budget(128_000, 4_096, 512)
"""The budget of a request that names none (tokens): ``W`` 128,000, ``O`` 4,096, ``M`` 512, so ``B_input``
123,392; :class:`~ctxledger.assemble.assembler.AssemblyRequest`'s default."""


def contract_budget(requested: Budget, cap: int | None) -> Budget:
    """The effective budget: ``requested`` with ``B_input`` capped at ``cap`` tokens (a working-set contract's).

    ``O`` and ``M`` stay as asked; ``W`` shrinks so that ``W − O − M = cap``. ``cap`` ``None`` or at least
    ``B_input`` leaves the budget as asked. The manifest records both (``budget.requested`` and the rest).
    """
    if cap is None or cap >= requested.input_tokens:
        return requested
    return Budget(
        cap + requested.output_tokens + requested.margin_tokens, requested.output_tokens, requested.margin_tokens
    )


@dataclass(slots=True)
class BudgetLedger:
    """Allocation versus use of ``B_dynamic`` per context class, in tokens.

    Attributes:
        dynamic_tokens: ``B_dynamic``.
        caps: class → fraction of ``B_dynamic`` (classes absent have no cap).
        used: class → tokens used by selected units.
        required: class → tokens used by required units (counted in ``used`` too).
        saved: transform name → tokens saved against verbatim (filled by representation choices).
    """

    dynamic_tokens: int
    caps: Mapping[str, float] = field(default_factory=dict)
    used: dict[str, int] = field(default_factory=dict)
    required: dict[str, int] = field(default_factory=dict)
    saved: dict[str, int] = field(default_factory=dict)

    def cap_tokens(self, cls: str) -> int | None:
        """The cap of a class in tokens, or ``None`` when uncapped."""
        frac = self.caps.get(cls)
        return None if frac is None else int(frac * self.dynamic_tokens)

    def fits_cap(self, cls: str, tokens: int) -> bool:
        """Whether adding ``tokens`` to ``cls`` stays within its cap."""
        cap = self.cap_tokens(cls)
        return cap is None or self.used.get(cls, 0) + tokens <= cap

    def charge(self, cls: str, tokens: int, *, required: bool = False) -> None:
        """Record ``tokens`` used by class ``cls``."""
        self.used[cls] = self.used.get(cls, 0) + tokens
        if required:
            self.required[cls] = self.required.get(cls, 0) + tokens

    def as_dict(self) -> dict[str, Any]:
        """JSON-able view for the manifest: per class ``{cap, used, required}`` plus totals."""
        classes = sorted(set(self.used) | set(self.caps))
        return {
            "dynamic_tokens": self.dynamic_tokens,
            "used_tokens": sum(self.used.values()),
            "classes": {
                c: {"cap": self.cap_tokens(c), "used": self.used.get(c, 0), "required": self.required.get(c, 0)}
                for c in classes
            },
            "saved_by_transform": dict(sorted(self.saved.items())),
        }
