"""Trust: untrusted non-evidence leaves; tool and retrieved content is delimited as data.

Seed 001 "Confianza en la Fuente" and "Resultados de Tools"; seed 000 "Instrucciones y evidencia no
tienen la misma autoridad"; DESIGN §1 (trust order) and §3 step 7.

* ``untrusted`` records that are not evidence are omitted (``untrusted_non_evidence``). Evidence is a
  tool exchange, a memory, or anything tagged ``evidence``.
* ``untrusted`` evidence and ``retrieved`` content are kept but marked ``delimit``: the serialized turn
  wraps the content in a data block with its metadata (source, trust, observed_at), and text in it that
  claims to be an instruction stays data.
* A system or developer message whose trust is below ``developer`` (e.g. imported from a tool) is marked
  ``demote``: it is rendered as delimited data in a user turn, never with instruction authority. Lower
  trust never overrides higher.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, ClassVar

from ctxledger.assemble.units import UnitKind
from ctxledger.policy.base import PolicyDecision, ReasonCode, StageContext
from ctxledger.policy.stages._common import live_units, mark, omit_unit, unit_tags
from ctxledger.records import Trust

_DELIMITED = (Trust.RETRIEVED, Trust.UNTRUSTED)


class TrustStage:
    """Omit untrusted non-evidence; mark low-trust content for delimiting or demotion.

    Args:
        evidence_tags: tags that make a record evidence.
    """

    name: ClassVar[str] = "trust"
    version: ClassVar[str] = "1"

    def __init__(self, evidence_tags: Iterable[str] = ("evidence",)) -> None:
        self.evidence_tags = tuple(evidence_tags)

    def config(self) -> Mapping[str, Any]:
        """The evidence tags."""
        return {"evidence_tags": list(self.evidence_tags)}

    def __call__(self, ctx: StageContext) -> Iterable[PolicyDecision]:
        """Decide per unit, on the lowest trust among its records."""
        for unit in live_units(ctx):
            lowest = max(unit.records, key=lambda r: r.trust.rank)
            evidence = unit.kind in (UnitKind.TOOL_EXCHANGE, UnitKind.MEMORY) or bool(
                unit_tags(unit) & set(self.evidence_tags)
            )
            if lowest.trust is Trust.UNTRUSTED and not evidence:
                yield from omit_unit(self.name, unit, ReasonCode.UNTRUSTED_NON_EVIDENCE, f"{lowest.id} is untrusted")
                continue
            if unit.kind is UnitKind.INSTRUCTION and lowest.trust.rank > Trust.DEVELOPER.rank:
                yield mark(self.name, unit.id, "demote", f"instruction-role text with trust {lowest.trust.value}")
                continue
            for rec in unit.records:
                if rec.trust in _DELIMITED and unit.kind in (UnitKind.TOOL_EXCHANGE, UnitKind.MESSAGE):
                    yield mark(self.name, rec.id, "delimit", f"{rec.trust.value} content rendered as data")
