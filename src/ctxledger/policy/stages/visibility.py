"""Visibility, ownership and subagent promotion (seed 004 §4.9, §4.13, §4.14).

* ``audit_only`` records never reach a model (``audit_only``);
* ``participant_private`` records reach only their owner; ``shared`` ones only their owner and the
  participants in ``shared_with`` (``private_to_participant``): a participant's scratch state never
  reaches a sibling participant of a multi-model run;
* a subagent's private state is withheld from its parent (and the parent's ancestors) with
  ``not_promoted`` until it is **promoted**: a checkpoint the child writes at a terminal state, visible
  to the parent (``shared_with`` the parent, or branch/conversation-visible), promotes itself (the final
  report, generated-file references, a failed or timed-out status) and every record id listed in its
  ``state["promote"]``. Promotion reaches the **audience** of the checkpoint only: the owner's parent
  (``Participant.parent_participant_id``) and the participants in the checkpoint's ``shared_with``, never a
  sibling subagent or an unrelated participant. Listing one record of an atomic unit (the artifact, the
  call or the assistant message of a tool exchange) promotes the whole unit; only records the checkpoint's
  owner owns are promoted, and audit-only records never are. Ids that name no candidate, or a record of
  another owner, are recorded in the manifest's ``warnings``;
* a **derived** record (a memory, a compaction; :mod:`ctxledger.policy.derivation`) is seen only by who may
  see every source it was derived from, transitively (by visibility or promotion): a memory of another
  participant's private tool result is ``private_to_participant`` (``not_promoted`` for the owner's
  ancestors), one of an audit-only result is ``audit_only``, with the detail naming the source
  (``derived from c/art-notes (participant_private, owned by …)``). A record tagged ``safe_summary`` keeps
  only its own visibility.

A request without a participant sees no private or shared state at all (fail closed).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, ClassVar

from ctxledger.policy.decisions import PolicyDecision, ReasonCode, StageContext
from ctxledger.policy.derivation import restricting_sources
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
    version: ClassVar[str] = "4"

    def config(self) -> Mapping[str, Any]:
        """No settings."""
        return {}

    def __call__(self, ctx: StageContext) -> Iterable[PolicyDecision]:
        """Apply the visibility rules to every candidate not yet omitted."""
        who = ctx.request.participant_id
        people = participants(ctx)
        promoted = promoted_records(ctx, who)
        # a verdict depends on the record, its sources (earlier, immutable records), who asks, what is promoted
        # to them and the participants' parent chains: all of them are in the memo key
        chains = tuple(sorted((p.id, p.parent_participant_id or "") for p in people.values()))
        key = (self.name, self.version, who, tuple(sorted(promoted.items())), chains, ctx.find_record is not None)

        def decide(rec: Record) -> PolicyDecision | None:
            return self._decide(ctx, rec, who, promoted, people)

        for rec, decision in ctx.scan(key, ctx.records, decide, slot=f"{self.name} {who}"):
            if rec.id not in ctx.omitted:
                yield decision

    def _decide(
        self,
        ctx: StageContext,
        rec: Record,
        who: str | None,
        promoted: Mapping[str, str],
        people: Mapping[str, Participant],
    ) -> PolicyDecision | None:
        if isinstance(rec, Participant):
            return None
        if rec.visibility is Visibility.AUDIT_ONLY:  # promotion never publishes audit-only records
            return omit(self.name, rec.id, ReasonCode.AUDIT_ONLY, "kept for audit; never sent to a model")
        if not sees(rec, who, promoted):
            return self._private(rec, who, people)
        for src in restricting_sources(ctx, rec):
            if not sees(src, who, promoted):
                return self._derived(rec, src, who, people)
        return None

    def _private(self, rec: Record, who: str | None, people: Mapping[str, Participant]) -> PolicyDecision:
        owner = rec.owner_participant_id
        if who is not None and owner is not None and who in ancestors(owner, people):
            return omit(self.name, rec.id, ReasonCode.NOT_PROMOTED, f"state of subagent {owner}, not promoted to {who}")
        return omit(self.name, rec.id, ReasonCode.PRIVATE_TO_PARTICIPANT, f"owned by {owner or 'nobody'}, {_not(who)}")

    def _derived(self, rec: Record, src: Record, who: str | None, people: Mapping[str, Participant]) -> PolicyDecision:
        """Omit ``rec`` because ``who`` may not see ``src``, one of the records it was derived from."""
        owner = src.owner_participant_id
        why = f"derived from {src.id} ({src.visibility.value}"
        if src.visibility is Visibility.AUDIT_ONLY:
            return omit(self.name, rec.id, ReasonCode.AUDIT_ONLY, why + ")")
        why += f", owned by {owner or 'nobody'}, {_not(who)})"
        if who is not None and owner is not None and who in ancestors(owner, people):
            return omit(self.name, rec.id, ReasonCode.NOT_PROMOTED, why)
        return omit(self.name, rec.id, ReasonCode.PRIVATE_TO_PARTICIPANT, why)


def sees(rec: Record, who: str | None, promoted: Mapping[str, str]) -> bool:
    """Whether ``who`` may see ``rec``: by its visibility, or promoted to ``who`` by its own owner (never audit-only).

    ``promoted`` is :func:`promoted_records` for ``who``; phase-two rehydration asks the same question before it
    reads a private artifact back.
    """
    if rec.visibility is Visibility.AUDIT_ONLY:
        return False
    if rec.id in promoted and promoted[rec.id] == (rec.owner_participant_id or ""):
        return True
    return visible_to(rec, who)


def audience(checkpoint: Checkpoint, people: Mapping[str, Participant]) -> frozenset[str]:
    """Who a checkpoint's promotion reaches: its owner's parent and the participants in its ``shared_with``."""
    out = set(checkpoint.shared_with)
    owner = people.get(checkpoint.owner_participant_id or "")
    if owner is not None and owner.parent_participant_id:
        out.add(owner.parent_participant_id)
    return frozenset(out)


def promoted_records(ctx: StageContext, who: str | None) -> dict[str, str]:
    """Record id → promoting owner, for the ids promoted to ``who`` by the checkpoints whose audience ``who`` is in.

    A checkpoint promotes to its :func:`audience` only (the owner's parent, its ``shared_with``), whatever the
    checkpoint's own visibility (a checkpoint shared with a sibling still promotes to the parent); an audit-only
    or omitted checkpoint promotes nothing, and with ``who`` ``None`` nothing is promoted. Only a record's own
    owner can promote it (a checkpoint cannot publish another participant's state). Listing any record of an
    atomic unit (the assistant message, a tool call or its artifact) promotes the whole unit, since a unit enters
    whole or not at all. An id that is no candidate of the call is recorded as a warning
    (``unknown_promoted_record``), as is a listed record owned by someone else (``promotion_not_owned``); neither
    promotes anything.
    """
    out: dict[str, str] = {}
    if who is None:
        return out
    people = participants(ctx)
    for rec in ctx.records:
        if not isinstance(rec, Checkpoint) or rec.id in ctx.omitted or rec.visibility is Visibility.AUDIT_ONLY:
            continue
        listed = rec.state.get("promote", ())
        if not isinstance(listed, list | tuple) or who not in audience(rec, people):
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


def _not(who: str | None) -> str:
    """``not <participant>``, or what a call that names no participant is (the orchestrator's view)."""
    return f"not {who}" if who is not None else "and the call names no participant"
