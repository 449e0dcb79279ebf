"""The built-in policy stages of the default policy (DESIGN §3 steps 2–3).

Hard filters (scope, visibility) omit candidates with a reason code before anything is ranked;
protection marks what must be kept verbatim. Each stage is a small class: configuration in
``__init__``, work in ``__call__`` (the structlog processor shape).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, ClassVar

from ctxledger.assemble.units import UnitKind
from ctxledger.policy.base import Outcome, PolicyDecision, ReasonCode, StageContext
from ctxledger.records import Message, Role, ToolStatus, Visibility


class ScopeStage:
    """Omit anything outside the request's tenant and conversation (``out_of_scope``).

    The store already scopes its reads; this stage makes the guarantee part of the policy and the
    manifest, so an out-of-scope record can never be selected whatever its score (seed 002
    "Primero restricciones").
    """

    name: ClassVar[str] = "scope"
    version: ClassVar[str] = "1"

    def config(self) -> Mapping[str, Any]:
        """No settings."""
        return {}

    def __call__(self, ctx: StageContext) -> Iterable[PolicyDecision]:
        """Omit records of another tenant or conversation."""
        req = ctx.request
        for rec in ctx.records:
            if rec.tenant_id != req.tenant_id or rec.conversation_id != req.conversation_id:
                yield PolicyDecision(rec.id, self.name, Outcome.OMIT, ReasonCode.OUT_OF_SCOPE)


class VisibilityStage:
    """Omit what the calling participant may not see (seed 004 §4.9, §4.10).

    * ``audit_only`` records never reach a model (``audit_only``);
    * ``participant_private`` records reach only their owner, ``shared`` ones only the participants in
      ``shared_with`` (``private_to_participant``);
    * ``branch``-visible records outside the active lineage (``not_in_lineage``).
    """

    name: ClassVar[str] = "visibility"
    version: ClassVar[str] = "1"

    def config(self) -> Mapping[str, Any]:
        """No settings."""
        return {}

    def __call__(self, ctx: StageContext) -> Iterable[PolicyDecision]:
        """Apply the visibility rules to every candidate."""
        who = ctx.request.participant_id
        for rec in ctx.records:
            reason = _visibility_reason(rec.visibility, rec.owner_participant_id, rec.shared_with, who)
            if reason is None and rec.visibility is Visibility.BRANCH and rec.branch_id not in ctx.lineage_branches:
                reason = ReasonCode.NOT_IN_LINEAGE
            if reason is not None:
                yield PolicyDecision(rec.id, self.name, Outcome.OMIT, reason)


def _visibility_reason(
    visibility: Visibility, owner: str | None, shared_with: tuple[str, ...], who: str | None
) -> ReasonCode | None:
    if visibility is Visibility.AUDIT_ONLY:
        return ReasonCode.AUDIT_ONLY
    if visibility is Visibility.PARTICIPANT_PRIVATE and (who is None or owner != who):
        return ReasonCode.PRIVATE_TO_PARTICIPANT
    if visibility is Visibility.SHARED and (who is None or (who not in shared_with and owner != who)):
        return ReasonCode.PRIVATE_TO_PARTICIPANT
    return None


class ProtectionStage:
    """Require what must never be dropped or summarised (DESIGN §3 step 3; seed 000 "Lo que merece
    protección"; case B10).

    Required: system and developer instructions; the latest user turn; the newest unit when it comes
    after that turn (the step the model is continuing from, e.g. the tool results it just received —
    case B02); tool exchanges with a pending or deferred call; failed tool exchanges not yet followed by a
    successful call of the same tool. Older steps of a long tool loop are not required: in an agent
    trajectory the only user turn is often the task itself, and everything after it would otherwise be
    pinned.
    """

    name: ClassVar[str] = "protection"
    version: ClassVar[str] = "1"

    def config(self) -> Mapping[str, Any]:
        """No settings."""
        return {}

    def __call__(self, ctx: StageContext) -> Iterable[PolicyDecision]:
        """Emit ``require`` decisions for protected units (decided on the unit's first record)."""
        units = [u for u in ctx.units if u.id not in ctx.omitted]
        last_user = _latest_user_index(units)
        succeeded_after: set[str] = set()
        for i in range(len(units) - 1, -1, -1):
            unit = units[i]
            reason = _protect_reason(unit, i, last_user, succeeded_after, len(units) - 1)
            if unit.kind is UnitKind.TOOL_EXCHANGE and unit.status is ToolStatus.SUCCEEDED:
                succeeded_after.update(unit.tool_names)
            if reason:
                yield PolicyDecision(unit.id, self.name, Outcome.REQUIRE, reason)


def _latest_user_index(units: list[Any]) -> int | None:
    for i in range(len(units) - 1, -1, -1):
        rec = units[i].records[0]
        if isinstance(rec, Message) and rec.role is Role.USER and units[i].kind is UnitKind.MESSAGE:
            return i
    return None


def _protect_reason(
    unit: Any, index: int, last_user: int | None, succeeded_after: set[str], newest: int
) -> str | None:
    if unit.kind is UnitKind.INSTRUCTION:
        return "instruction"
    if last_user is not None and index == last_user:
        return "latest_user_turn"
    if last_user is not None and index == newest > last_user:
        return "latest_step"
    if unit.kind is UnitKind.TOOL_EXCHANGE:
        if unit.status in (ToolStatus.PENDING, ToolStatus.DEFERRED):
            return "unresolved_tool_call"
        if unit.status is ToolStatus.FAILED and not set(unit.tool_names) & succeeded_after:
            return "unresolved_tool_error"
    return None
