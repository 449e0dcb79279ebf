"""Working set: an agent's call sees only the sources its contract names (seed 001 "Per-Agent Working Sets").

When the policy is bound to a :class:`~ctxledger.policy.contracts.WorkingSetContract` for the request's
``agent`` and ``call_type`` and the contract lists ``sources``, every live unit whose source categories
are all outside that list is omitted with ``out_of_contract``. A unit's categories: ``instructions``;
``conversation`` (and ``latest_user_turn`` for the newest user message); ``tool_results``; ``memory``
(and ``typed_request`` for memories tagged so); ``compaction``; ``checkpoint``; and ``tag:<name>`` for
each tag of its records. Unbound requests are not affected.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, ClassVar

from ctxledger.policy.decisions import PolicyDecision, ReasonCode, StageContext
from ctxledger.policy.stages._common import live_units, omit_unit, unit_tags
from ctxledger.records import Message, Role
from ctxledger.units import Unit, UnitKind

_KIND_SOURCE = {
    UnitKind.INSTRUCTION: "instructions",
    UnitKind.MESSAGE: "conversation",
    UnitKind.TOOL_EXCHANGE: "tool_results",
    UnitKind.MEMORY: "memory",
    UnitKind.COMPACTION: "compaction",
    UnitKind.CHECKPOINT: "checkpoint",
}


def unit_sources(unit: Unit, latest_user: str | None) -> set[str]:
    """The source categories of a unit (see the module docstring)."""
    found = unit_tags(unit)
    out = {_KIND_SOURCE[unit.kind], *(f"tag:{t}" for t in found)}
    if unit.id == latest_user:
        out.add("latest_user_turn")
    if unit.kind is UnitKind.MEMORY and "typed_request" in found:
        out.add("typed_request")
    return out


class WorkingSetStage:
    """Omit units outside the bound contract's sources (``out_of_contract``)."""

    name: ClassVar[str] = "working_set"
    version: ClassVar[str] = "1"

    def config(self) -> Mapping[str, Any]:
        """No settings of its own: the contract is part of the bound policy."""
        return {}

    def __call__(self, ctx: StageContext) -> Iterable[PolicyDecision]:
        """Apply the contract's source list."""
        contract = ctx.contract
        if contract is None or not contract.sources:
            return
        allowed = set(contract.sources)
        units = live_units(ctx)
        latest_user = next(
            (
                u.id
                for u in reversed(units)
                if u.kind is UnitKind.MESSAGE and isinstance(u.records[0], Message) and u.records[0].role is Role.USER
            ),
            None,
        )
        label = f"{contract.agent or '*'}/{contract.call_type or '*'}"
        for unit in units:
            sources = unit_sources(unit, latest_user)
            if not sources & allowed:
                detail = f"contract {label} allows {sorted(allowed)}; this is {sorted(sources)}"
                yield from omit_unit(self.name, unit, ReasonCode.OUT_OF_CONTRACT, detail)
