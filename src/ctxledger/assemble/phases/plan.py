"""The policy plan every phase after the filter reads and amends: decisions, omissions, requirements, marks."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ctxledger.policy.base import PolicyDecision, ReasonCode, StageContext
from ctxledger.records import Record
from ctxledger.units import Unit


@dataclass(slots=True)
class Plan:
    """What the policy's stages decided for one assembly, amended by every later phase.

    Attributes:
        decisions: every decision in the order made.
        omitted: record id → ``(reason, stage, detail)``; the first omission of a record wins.
        required: unit id → protection reason.
        marks: record id → its mark decisions.
        ctx: the stages' context (warnings, repairs, record lookup), ``None`` when no stage ran.
        extra_records: candidates from other branches.
        rehydrations: the rehydrate phase's entries.
        tools: tool exposure: ``{"exposed": [...], "withheld": [...]}``, ``renamed`` when names changed,
            ``undeclared`` (name → why) when tools called without a schema got minimal definitions.
    """

    decisions: list[PolicyDecision]
    omitted: dict[str, tuple[str, str, str]]  # record id -> (reason, stage, detail)
    required: dict[str, str]  # unit id -> protection reason
    marks: dict[str, list[PolicyDecision]] = field(default_factory=dict)  # record id -> mark decisions
    ctx: StageContext | None = None
    extra_records: list[Record] = field(default_factory=list)  # candidates from other branches
    rehydrations: list[dict[str, Any]] = field(default_factory=list)
    tools: dict[str, Any] = field(default_factory=dict)  # {"exposed": [...], "withheld": [...]}


def omit_unit(plan: Plan, unit: Unit, reason: ReasonCode, stage: str) -> None:
    """Omit every record of ``unit`` not omitted yet, with ``reason`` and ``stage``; no errors.

    The unit's first record gets no detail, the others name the unit: a unit leaves whole (seed 000: a tool call
    and its results are one protocol unit).
    """
    for rid in unit.record_ids:
        plan.omitted.setdefault(rid, (str(reason), stage, "" if rid == unit.id else f"unit {unit.id}"))
