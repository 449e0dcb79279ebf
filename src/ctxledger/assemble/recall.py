"""The ``recall`` tool: the model reads back what a reference or an excerpt points at (seed 000).

A reference or an excerpt tells the model how to get more («una referencia con rango, versión y modo de
obtener más»). When the policy enables it (``[rehydration] recall_tool = true``), every assembly exposes one
tool, ``recall`` (:func:`recall_schema`: a record id, an optional byte or line range), whose schema is part
of the fixed part ``F`` of the budget like every tool schema, and every excerpt, extraction and reference
names a call of it (:mod:`ctxledger.fetch_hints`). Ranges follow the locators' convention: bytes 0-based with
the end exclusive, lines 1-based and inclusive, as excerpts number them. An integration answers a call with
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
from ctxledger.fetch_hints import RECALL_TOOL
from ctxledger.policy.base import Policy
from ctxledger.policy.rehydration import hard_omission
from ctxledger.records import Record
from ctxledger.represent._lines import LineIndex

__all__ = ["RECALL_TOOL", "SECRET_REASONS", "answer_recall", "recall_schema", "recalls_in", "with_recall_tool"]

SECRET_REASONS = frozenset({"secret_redacted", "secret_withheld"})
"""Marks that keep a record's raw bytes from being read back: they hold a secret."""


def recall_schema() -> dict[str, Any]:
    """The ``recall`` tool in OpenAI ``tools`` form."""
    return {
        "type": "function",
        "function": {
            "name": RECALL_TOOL,
            "description": (
                "Read back the exact content behind a reference or an excerpt you were shown: give the record "
                "id it names, and a range to read only part of it."
            ),
            "parameters": {
                "type": "object",
                "properties": {
                    "ref": {"type": "string", "description": "The record id the reference or excerpt names."},
                    "start": {"type": "integer", "description": "First byte (from 0), or first line (from 1)."},
                    "end": {"type": "integer", "description": "End byte (exclusive), or last line (inclusive)."},
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


def answer_recall(
    ledger: Any, manifest: Mapping[str, Any], arguments: Mapping[str, Any], *, tenant_id: str = "default"
) -> tuple[str, dict[str, Any]]:
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
        data = ledger.rehydrate(ref, tenant_id=tenant_id)  # whole and hash-checked; the range is cut below
    except CtxledgerError as exc:
        decision["reason"] = f"{type(exc).__name__}: {exc}"
        return f"[recall failed: {exc}]", decision
    data = _cut(data, start, end, unit)
    text = data.decode("utf-8", errors="replace")
    cut = len(text.encode("utf-8")) > limit
    if cut:
        text = text.encode("utf-8")[:limit].decode("utf-8", errors="ignore")
    decision.update(
        decision="answered", reason="truncated_to_limit" if cut else "read_back", bytes=len(text.encode("utf-8"))
    )
    return text, decision


def _cut(data: bytes, start: Any, end: Any, unit: str) -> bytes:
    """The asked range of ``data``, clamped to it: bytes ``[start, end)`` from 0, or lines ``start..end`` from 1."""
    first = start if isinstance(start, int) and not isinstance(start, bool) else None
    last = end if isinstance(end, int) and not isinstance(end, bool) else None
    if unit == "bytes":
        return data[max(first or 0, 0) : None if last is None else max(last, 0)]
    index = LineIndex(data)
    lo = max(first or 1, 1)
    hi = index.line_count if last is None else min(last, index.line_count)
    return data[slice(*index.line_span(lo, hi))] if lo <= hi else b""


def _refusal(manifest: Mapping[str, Any], ref: str) -> str | None:
    """Why ``ref`` may not be read back under this assembly, or ``None``."""
    if ref not in set(manifest.get("candidates") or ()):
        return "not_a_candidate: the record is not in this conversation's context"
    omitted = {
        e["ref"]: (e["reason"], e.get("stage", ""), e.get("detail") or "") for e in manifest.get("omitted") or ()
    }
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
        {"artifact": r.id, **found}
        for r in records
        if "recall" in r.meta and isinstance(found := r.meta["recall"], Mapping)  # None is no Mapping either
    ]
