"""The retention routes under ``/v1``: ``retain``, ``forget`` and the audit trail, scoped to the key's tenant."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from fastapi import APIRouter, Request
from pydantic import BaseModel, ConfigDict, Field

from ctxledger.errors import InputError, InvalidSetting
from ctxledger.service.api import Tenant, _service

router = APIRouter(prefix="/v1")


class RetainRequest(BaseModel):
    """Apply retention rules to the key's tenant.

    ``retention`` is a policy file's ``[retention]`` table as JSON (``rules``, ``assemblies``); without it the
    service policy's own rules apply.
    """

    model_config = ConfigDict(extra="forbid")
    retention: dict[str, Any] | None = None
    dry_run: bool = False
    now: datetime | None = Field(default=None, description="The clock ages are measured at (ISO 8601, with zone).")
    batch_size: int = Field(default=200, ge=1)


class ForgetRequest(BaseModel):
    """Forget one conversation or one participant's data of the key's tenant."""

    model_config = ConfigDict(extra="forbid")
    conversation_id: str | None = None
    participant_id: str | None = None
    dry_run: bool = False


def _rules(table: dict[str, Any] | None, ledger: Any) -> Any:
    from ctxledger.retention.rules import rules_from_table

    if table is None:
        return ledger.policy.retention
    try:
        return rules_from_table(**table)
    except InvalidSetting as exc:
        raise InputError(exc.problem, source="<api>", field=f"retention.{exc.setting}") from exc


@router.post("/retain", summary="Apply retention rules to the tenant")
def retain(request: Request, tenant: Tenant, body: RetainRequest) -> dict[str, Any]:
    """Redact, reduce to a hash or delete the tenant's old records by rule, in resumable batches (or plan it)."""

    def run(ledger: Any) -> dict[str, Any]:
        rules = _rules(body.retention, ledger)
        if rules.empty:
            raise InputError(
                "no retention rules: send a [retention] table or serve a policy with one",
                source="<api>",
                field="retention",
            )
        report = ledger.retain(
            rules=rules, now=body.now, tenant_id=tenant, dry_run=body.dry_run, batch_size=body.batch_size
        )
        return report.as_dict()

    return _service(request).call(run)


@router.post("/forget", summary="Forget a conversation or a participant's data")
def forget(request: Request, tenant: Tenant, body: ForgetRequest) -> dict[str, Any]:
    """Remove the records, derived memories, assemblies and unreferenced blobs; the audit trail stays."""

    def run(ledger: Any) -> dict[str, Any]:
        report = ledger.forget(
            conversation_id=body.conversation_id,
            participant_id=body.participant_id,
            tenant_id=tenant,
            dry_run=body.dry_run,
        )
        return report.as_dict()

    return _service(request).call(run)


@router.get("/retention/audit", summary="The tenant's retention audit trail")
def audit(request: Request, tenant: Tenant, ref: str | None = None) -> list[dict[str, Any]]:
    """Every retention action on the tenant's records and assemblies (optionally one ``ref``), oldest first."""
    rows = _service(request).call(lambda ledger: ledger.retention_audit(tenant_id=tenant, ref=ref))
    keys = ("conversation_id", "target", "ref", "kind", "rule", "action", "before_sha256", "after_sha256", "detail")
    return [{"at": r.at.isoformat(), **{k: getattr(r, k) for k in keys}} for r in rows]
