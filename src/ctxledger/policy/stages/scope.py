"""Scope: nothing outside the request's tenant, conversation and scope labels is ever selected.

seed 002 "Primero restricciones, después relevancia" (step 1: exclude what does not
belong to the tenant or scope); case B12 (a memory search filtered by session only returned another
user's facts).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, ClassVar

from ctxledger.policy.checks import strings
from ctxledger.policy.decisions import PolicyDecision, ReasonCode, StageContext
from ctxledger.policy.stages._common import omit, request_attr, stage_key
from ctxledger.records import Record


class ScopeStage:
    """Omit records of another tenant or conversation, or whose scope labels differ from the request's.

    Records and requests carry a ``scope`` mapping (``{"app": …, "user_id": …, "session_id": …}``). For
    each key in ``keys`` that a record carries, the request must carry the same value; a request that
    lacks the key fails closed (``out_of_scope``). Keys not listed (by default ``session_id``) are
    provenance, not a boundary: a user's memory from an earlier session stays in scope, as in ADK's
    memory service, whose memories belong to an app and a user across sessions.

    Args:
        keys: scope keys that must match (default ``("app", "user_id")``).

    Raises:
        InvalidSetting: ``keys`` is not a list of non-empty strings (a lone string is refused).
    """

    name: ClassVar[str] = "scope"
    version: ClassVar[str] = "2"

    def __init__(self, keys: Iterable[str] = ("app", "user_id")) -> None:
        self.keys = strings(keys, self.name, "keys")

    def config(self) -> Mapping[str, Any]:
        """The keys that must match."""
        return {"keys": list(self.keys)}

    def __call__(self, ctx: StageContext) -> Iterable[PolicyDecision]:
        """Omit out-of-scope records with ``out_of_scope`` and the mismatching key in the detail."""
        req = ctx.request
        scope: Mapping[str, str] = request_attr(ctx, "scope", None) or {}
        labels = tuple(sorted((str(k), repr(v)) for k, v in scope.items()))
        key = stage_key(self, req.tenant_id, req.conversation_id, labels)
        for _, decision in ctx.scan(key, ctx.records, lambda r: self._decide(r, req, scope)):
            yield decision

    def _decide(self, rec: Record, req: Any, scope: Mapping[str, str]) -> PolicyDecision | None:
        if rec.tenant_id != req.tenant_id or rec.conversation_id != req.conversation_id:
            return omit(self.name, rec.id, ReasonCode.OUT_OF_SCOPE, "another tenant or conversation")
        detail = self._mismatch(rec.scope, scope)
        return omit(self.name, rec.id, ReasonCode.OUT_OF_SCOPE, detail) if detail else None

    def _mismatch(self, have: Mapping[str, str], want: Mapping[str, str]) -> str:
        return scope_mismatch(have, want, self.keys)


def scope_mismatch(have: Mapping[str, str], want: Mapping[str, str], keys: Iterable[str]) -> str:
    """Why a record's scope labels ``have`` fall outside the request's ``want`` for ``keys`` ("" = in scope).

    A key the record carries must be carried by the request with the same value (fail closed).
    """
    for key in keys:
        if key not in have:
            continue
        if key not in want:
            return f"record is scoped by {key!r}; the request names no {key!r}"
        if str(have[key]) != str(want[key]):
            return f"{key} {have[key]!r} is not the request's {want[key]!r}"
    return ""
