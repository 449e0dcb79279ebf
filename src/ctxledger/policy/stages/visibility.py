"""Visibility, ownership and subagent promotion (seed 004 §4.9, §4.13, §4.14; DESIGN §1 Visibility).

* ``audit_only`` records never reach a model (``audit_only``);
* ``participant_private`` records reach only their owner; ``shared`` ones only their owner and the
  participants in ``shared_with`` (``private_to_participant``): a participant's scratch state never
  reaches a sibling participant of a multi-model run;
* a subagent's private state is withheld from its parent (and the parent's ancestors) with
  ``not_promoted`` until it is **promoted**: a checkpoint the child writes at a terminal state, visible
  to the parent (``shared_with`` the parent, or branch/conversation-visible), promotes itself (the final
  report, generated-file references, a failed or timed-out status) and every record id listed in its
  ``state["promote"]``. Listing one record of an atomic unit (the artifact, the call or the assistant
  message of a tool exchange) promotes the whole unit; only records the checkpoint's owner owns are
  promoted, and audit-only records never are. Ids that name no candidate, or a record of another
  owner, are recorded in the manifest's ``warnings``.

A request without a participant sees no private or shared state at all (fail closed).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, ClassVar

from ctxledger.policy.base import PolicyDecision, ReasonCode, StageContext
from ctxledger.policy.stages._common import ancestors, omit, participants
from ctxledger.records import Checkpoint, Participant, Record, Visibility


def visible_to(rec: Record, who: str | None) -> bool:
    """Whether ``who`` may see ``rec`` by its visibility alone (no promotion)."""
    if rec.visibility is Visibility.AUDIT_ONLY:
        return False
    if rec.visibility is Visibility.PARTICIPANT_PRIVATE:
        return who is not None and rec.owner_participant_id == who
    if rec.visibility is Visibility.SHARED:
        return who is not None and (who in rec.shared_with or rec.owner_participant_id == who)
    return True


class VisibilityStage:
    """Omit what the calling participant may not see; let promoted subagent state through."""

    name: ClassVar[str] = "visibility"
    version: ClassVar[str] = "3"

    def config(self) -> Mapping[str, Any]:
        """No settings."""
        return {}

    def __call__(self, ctx: StageContext) -> Iterable[PolicyDecision]:
        """Apply the visibility rules to every candidate not yet omitted."""
        who = ctx.request.participant_id
        people = participants(ctx)
        promoted = _promoted(ctx, who)
        for rec in ctx.records:
            if rec.id in ctx.omitted or isinstance(rec, Participant):
                continue
            if rec.visibility is Visibility.AUDIT_ONLY:  # promotion never publishes audit-only records
                yield omit(self.name, rec.id, ReasonCode.AUDIT_ONLY, "kept for audit; never sent to a model")
            elif rec.id in promoted and promoted[rec.id] == (rec.owner_participant_id or ""):
                continue  # promoted by its own owner
            elif not visible_to(rec, who):
                yield self._private(rec, who, people)

    def _private(self, rec: Record, who: str | None, people: Mapping[str, Participant]) -> PolicyDecision:
        owner = rec.owner_participant_id
        if who is not None and owner is not None and who in ancestors(owner, people):
            return omit(self.name, rec.id, ReasonCode.NOT_PROMOTED, f"state of subagent {owner}, not promoted to {who}")
        return omit(self.name, rec.id, ReasonCode.PRIVATE_TO_PARTICIPANT, f"owned by {owner or 'nobody'}, not {who}")


def _promoted(ctx: StageContext, who: str | None) -> dict[str, str]:
    """Record id → promoting owner, for the ids listed by checkpoints ``who`` can see.

    Only a record's own owner can promote it (a checkpoint cannot publish another participant's state).
    Listing any record of an atomic unit (the assistant message, a tool call or its artifact) promotes
    the whole unit, since a unit enters whole or not at all. An id that is no candidate of the call is
    recorded as a warning (``unknown_promoted_record``), as is a listed record owned by someone else
    (``promotion_not_owned``); neither promotes anything.
    """
    out: dict[str, str] = {}
    if who is None:
        return out
    for rec in ctx.records:
        if not isinstance(rec, Checkpoint) or rec.id in ctx.omitted or not visible_to(rec, who):
            continue
        listed = rec.state.get("promote", ())
        if not isinstance(listed, list | tuple):
            continue
        owner = rec.owner_participant_id or ""
        for rid in (str(i) for i in listed):
            target = ctx.record(rid)
            if target is None:
                ctx.warn(
                    "unknown_promoted_record",
                    f"checkpoint {rec.id} state.promote",
                    rid,
                    f"checkpoint {rec.id} promotes {rid!r}, which is no candidate record of this call",
                )
                continue
            if (target.owner_participant_id or "") != owner:
                ctx.warn(
                    "promotion_not_owned",
                    f"checkpoint {rec.id} state.promote",
                    rid,
                    f"checkpoint {rec.id} (owner {owner or 'nobody'}) cannot promote {rid}, "
                    f"owned by {target.owner_participant_id or 'nobody'}",
                )
                continue
            unit = ctx.unit_of(rid)
            for member in unit.record_ids if unit is not None else (rid,):
                out.setdefault(member, owner)
    return out
