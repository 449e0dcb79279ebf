"""The summary an assembly manifest is reduced to once its whole form has expired (seed 004 §4.15).

A whole manifest carries the provider payload and every free-text detail; its summary keeps what an audit
of the call needs and no content: identity, snapshot, policy (name, version, hash), budget and token
figures, the payload's hash, and for every included and omitted record its ref, kind, stage, reason,
representation and tokens. :func:`ctxledger.manifest.explain` still answers on a summary (why a record was
in or out, under which policy), without the payload, decisions or rehydration details.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ctxledger.retention.state import Retained

FORM_KEY = "form"
"""Manifest key naming its form: absent for a whole manifest, ``"summary"`` for a summary."""

_KEPT = (
    "id",
    "tenant_id",
    "conversation_id",
    "branch_id",
    "snapshot_seq",
    "created_at",
    "policy",
    "assembler_version",
    "counter",
    "model",
    "api",
    "participant_id",
    "budget",
    "tokens",
    "payload_hash",
    "omitted_by_reason",
    "omitted_by_stage",
    "lineage",
)
_ENTRY_KEPT = ("ref", "external_id", "kind", "seq", "branch_id", "stage", "reason", "representation", "tokens", "unit")


def is_summary(manifest: Mapping[str, Any]) -> bool:
    """Whether the manifest was already reduced to its summary."""
    return manifest.get(FORM_KEY) == "summary"


def summarize(manifest: Mapping[str, Any], retained: Retained) -> dict[str, Any]:
    """The summary of a whole manifest, saying which rule reduced it and when (``manifest["retention"]``)."""
    out: dict[str, Any] = {k: manifest[k] for k in _KEPT if k in manifest}
    for status in ("included", "omitted"):
        if status not in manifest:  # a compact manifest lists no omitted record; its summary does not invent a list
            continue
        out[status] = [{k: e[k] for k in _ENTRY_KEPT if k in e} for e in manifest.get(status, [])]
    out[FORM_KEY] = "summary"
    out["retention"] = retained.as_dict() | {"detail": f"manifest reduced to its summary: {retained.sentence}"}
    return out
