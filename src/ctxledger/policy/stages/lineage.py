"""Lineage: the active branch's own history first; sibling branches never leak in (seed 004 §4.10).

Candidates come from the active branch lineage (the branch, its parent up to the fork ``seq``, and so on).
Records of other branches reach this stage too, so that exclusions by branch are recorded (and counted
apart from budget omissions): a record written on a sibling branch, or on an ancestor after the fork,
is omitted with ``not_in_lineage``. Records explicitly shared, or visible to the whole conversation, may
still fill the room the lineage leaves (they get no relevance boost).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, ClassVar

from ctxledger.policy.checks import flag
from ctxledger.policy.decisions import PolicyDecision, ReasonCode, StageContext
from ctxledger.policy.stages._common import omit, stage_key
from ctxledger.records import Branch, Conversation, Participant, Record, Visibility

_STRUCTURAL = (Conversation, Branch, Participant)


class LineageStage:
    """Omit records outside the active lineage unless conversation-visible or explicitly shared.

    Args:
        fill_from_other_branches: let ``conversation``/``shared`` records of other branches stay candidates.

    Raises:
        InvalidSetting: the setting is not a boolean.
    """

    name: ClassVar[str] = "lineage"
    version: ClassVar[str] = "1"

    def __init__(self, fill_from_other_branches: bool = True) -> None:
        self.fill_from_other_branches = flag(fill_from_other_branches, self.name, "fill_from_other_branches")

    def config(self) -> Mapping[str, Any]:
        """Whether other branches' conversation-visible records may fill remaining room."""
        return {"fill_from_other_branches": self.fill_from_other_branches}

    def __call__(self, ctx: StageContext) -> Iterable[PolicyDecision]:
        """Omit off-lineage records with ``not_in_lineage`` and say where they live."""
        hops = tuple((h.branch_id, h.max_seq) for h in ctx.lineage)
        key = stage_key(self, hops, tuple(sorted(ctx.lineage_branches)))
        for rec, decision in ctx.scan(key, ctx.records, lambda r: self._decide(r, ctx)):
            if rec.id not in ctx.omitted:
                yield decision

    def _decide(self, rec: Record, ctx: StageContext) -> PolicyDecision | None:
        if isinstance(rec, _STRUCTURAL) or ctx.in_lineage(rec):
            return None
        if self.fill_from_other_branches and rec.visibility in (Visibility.CONVERSATION, Visibility.SHARED):
            return None
        return omit(self.name, rec.id, ReasonCode.NOT_IN_LINEAGE, _where(rec, ctx))


def _where(rec: Record, ctx: StageContext) -> str:
    for hop in ctx.lineage:
        if hop.branch_id == rec.branch_id:
            return f"on branch {rec.branch_id} after its fork point (seq {rec.seq} > {hop.max_seq})"
    return f"on branch {rec.branch_id}, not an ancestor of the active branch"
