"""Memory first: a raw tool exchange whose results a compact memory carries stays out (rehydration phase 1).

Seed 004 §3 ("la ejecución de herramientas crea primero artefactos; la memoria es una decisión de
política que se aplica sobre ellos"), §4.11 and §9.1 (old successful tool rounds leave the replay path as
compact memories linked to their provenance, the raw evidence staying recoverable outside the prompt).

A live tool exchange is omitted with ``covered_by_memory`` when every one of its artifacts is a source of
some live :class:`~ctxledger.records.ToolMemory`, unless the exchange is protected (unresolved, failed
and retry-critical tool state stays raw). Phase two — reading the raw artifact back when exact evidence
is requested — happens after selection (:mod:`ctxledger.policy.rehydration`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, ClassVar

from ctxledger.policy.decisions import PolicyDecision, ReasonCode, StageContext
from ctxledger.policy.stages._common import live_units, omit_unit
from ctxledger.records import ToolArtifact, ToolMemory
from ctxledger.units import Unit, UnitKind


class MemoryFirstStage:
    """Leave out raw tool exchanges fully carried by live memories (``covered_by_memory``)."""

    name: ClassVar[str] = "memory_first"
    version: ClassVar[str] = "1"

    def config(self) -> Mapping[str, Any]:
        """No settings."""
        return {}

    def __call__(self, ctx: StageContext) -> Iterable[PolicyDecision]:
        """Omit covered, unprotected tool exchanges, naming the memories that carry them."""
        carried: dict[str, str] = {}
        for unit, _ in ctx.scan((self.name, "memories"), ctx.units, _is_memory):
            if not any(r in ctx.omitted for r in unit.record_ids):
                for aid in unit.records[0].source_artifact_ids:
                    carried.setdefault(aid, unit.records[0].id)
        if not carried:
            return  # nothing is carried by a live memory: no exchange can be covered
        units = live_units(ctx)
        for unit in units:
            if unit.kind is not UnitKind.TOOL_EXCHANGE or unit.id in ctx.required:
                continue
            artifacts = [r.id for r in unit.records if isinstance(r, ToolArtifact)]
            if artifacts and all(a in carried for a in artifacts):
                memories = sorted({carried[a] for a in artifacts})
                detail = f"results carried by {', '.join(memories)}; raw {', '.join(artifacts)} kept for rehydration"
                yield from omit_unit(self.name, unit, ReasonCode.COVERED_BY_MEMORY, detail)


def _is_memory(unit: Unit) -> bool:
    return unit.kind is UnitKind.MEMORY and isinstance(unit.records[0], ToolMemory)
