"""The ``recall`` tool: the model reads back what a reference or an excerpt points at (seed 000).

A reference or an excerpt tells the model how to get more («una referencia con rango, versión y modo de
obtener más»). When the policy enables it (``[rehydration] recall_tool = true``), every assembly exposes one
tool, ``recall`` (:func:`recall_schema`: a record id, an optional byte or line range), whose schema is part
of the fixed part ``F`` of the budget like every tool schema. An integration answers a call with
:func:`answer_recall`: through :meth:`~ctxledger.Ledger.rehydrate`, under the hard filters of the assembly
the call was made with (a record that assembly left out for its branch, participant, privacy, provider or
a secret is refused with that reason; so is one that was not a candidate at all), at most
``max_artifact_bytes`` bytes. The answer's decision is stored on the recorded result (``meta["recall"]``),
and the next assembly's manifest lists them (``recalls``: :func:`recalls_in`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ctxledger.errors import CtxledgerError
from ctxledger.policy.base import Policy
from ctxledger.policy.rehydration import hard_omission
from ctxledger.records import Record

RECALL_TOOL = "recall"
"""The tool's name."""

SECRET_REASONS = frozenset({"secret_redacted", "secret_withheld"})
"""Marks that keep a record's raw bytes from being read back: they hold a secret."""


def recall_schema() -> dict[str, Any]:
    """The ``recall`` tool in OpenAI ``tools`` form."""
    return {
        "type": "function",
        "function": {
            "name": RECALL_TOOL,
            "description": (
                "Read back the exact content behind a reference or an excerpt you were shown: give its record "
                "id, and a range to read only part of it."
            ),
            "parameters": {
                "type": "object",
                "properties": {
                    "ref": {"type": "string", "description": "The record id the reference or excerpt names."},
                    "start": {"type": "integer", "description": "First byte or line (0-based)."},
                    "end": {"type": "integer", "description": "End byte or line (exclusive)."},
                    "unit": {"type": "string", "enum": ["bytes", "lines"], "description": "Unit of start/end."},
                },
                "required": ["ref"],
            },
        },
    }


def with_recall_tool(tools: Sequence[Mapping[str, Any]], policy: Policy) -> tuple[Mapping[str, Any], ...]:
    """``tools`` plus the ``recall`` schema when the policy enables it and no tool of that name is there."""
    if not policy.rehydration.recall_tool:
        return tuple(tools)
    if any((t.get("function") or {}).get("name") == RECALL_TOOL for t in tools if isinstance(t, Mapping)):
        return tuple(tools)
    return (*tools, recall_schema())


def answer_recall(ledger: Any, manifest: Mapping[str, Any], arguments: Mapping[str, Any], *, tenant_id: str = "default") -> tuple[str, dict[str, Any]]:
    """Answer a ``recall`` call made with the assembly ``manifest``; return the text and the decision.

    Returns:
        ``(text, decision)``: the text the model gets (the bytes as UTF-8, or why nothing was read back), and
        ``{"ref", "range", "unit", "decision": "answered" | "refused", "reason", "bytes"}`` for ``meta["recall"]``.
    """
    ref = str(arguments.get("ref") or "")
    unit = "lines" if arguments.get("unit") == "lines" else "bytes"
    start, end = arguments.get("start"), arguments.get("end")
    decision: dict[str, Any] = {"ref": ref, "unit": unit, "range": [start, end], "decision": "refused", "bytes": 0}
    refusal = _refusal(manifest, ref)
    if refusal is not None:
        decision["reason"] = refusal
        return f"[recall refused: {ref!r}: {refusal}]", decision
    limit = _limit(ledger)
    try:
        if unit == "bytes" and isinstance(start, int):
            data = ledger.rehydrate(ref, (start, end if isinstance(end, int) else start + limit), tenant_id=tenant_id)
        else:
            data = ledger.rehydrate(ref, tenant_id=tenant_id)
    except CtxledgerError as exc:
        decision["reason"] = f"{type(exc).__name__}: {exc}"
        return f"[recall failed: {exc}]", decision
    text = data.decode("utf-8", errors="replace")
    if unit == "lines":
        lines = text.splitlines(keepends=True)
        text = "".join(lines[start if isinstance(start, int) else 0 : end if isinstance(end, int) else None])
    cut = len(text.encode("utf-8")) > limit
    if cut:
        text = text.encode("utf-8")[:limit].decode("utf-8", errors="ignore")
    decision.update(decision="answered", reason="truncated_to_limit" if cut else "read_back", bytes=len(text.encode("utf-8")))
    return text, decision


def _refusal(manifest: Mapping[str, Any], ref: str) -> str | None:
    """Why ``ref`` may not be read back under this assembly, or ``None``."""
    if ref not in set(manifest.get("candidates") or ()):
        return "not_a_candidate: the record is not in this conversation's context"
    omitted = {e["ref"]: (e["reason"], e.get("stage", ""), e.get("detail") or "") for e in manifest.get("omitted") or ()}
    hard = hard_omission(omitted)(ref)
    if hard is not None:
        return f"{hard[0]} ({hard[1]})"
    if any(m.get("ref") == ref and m.get("reason") in SECRET_REASONS for m in manifest.get("marks") or ()):
        return "secret_redacted: its raw content holds a secret"
    return None


def _limit(ledger: Any) -> int:
    return int(ledger.policy.rehydration.max_artifact_bytes)


def recalls_in(records: Sequence[Record]) -> list[dict[str, Any]]:
    """The recall answers recorded among ``records`` (``meta["recall"]`` of tool results), in order."""
    return [
        {"artifact": r.id, **r.meta["recall"]}
        for r in records
        if isinstance(r.meta.get("recall"), Mapping)
    ]
