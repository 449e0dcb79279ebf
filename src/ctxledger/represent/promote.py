"""Promotion: turning an artifact into a memory is a policy decision, recorded as such.

"Tool execution creates artifacts first; memory is a policy decision on top of them
(promotion)." :func:`promote` runs the extractors and then decides, returning the decision in the same
shape as every policy stage's decisions so the assembler can put it in the manifest. Reasons:

* ``extracted``: promoted; an extractor produced a memory with enough confidence;
* ``audit_only``: the artifact's visibility is ``audit_only``; it never reaches a model, so neither does
  a memory of it;
* ``no_result``: the call was deferred; there is nothing to extract yet;
* ``no_extractor``: empty or binary output, or nothing recognised it;
* ``low_confidence``: the extraction's confidence is below the policy's ``min_confidence``.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from ctxledger.records import ToolArtifact, ToolMemory, ToolStatus, Visibility
from ctxledger.represent.extract import make_source, run
from ctxledger.represent.extract._base import to_memory

STAGE = "promotion"


def _decision(artifact: ToolArtifact, outcome: str, reason: str, **extra: Any) -> dict[str, Any]:
    return {"stage": STAGE, "ref": artifact.id, "outcome": outcome, "reason": reason, **extra}


def promote(
    artifact: ToolArtifact,
    data: bytes,
    *,
    query: str = "",
    memory_id: str,
    observed_at: datetime,
    min_confidence: float = 0.5,
) -> tuple[ToolMemory | None, dict[str, Any]]:
    """Decide whether an artifact becomes a ToolMemory, and build it if so.

    Args:
        artifact: the ToolArtifact.
        data: its exact bytes (checked against ``artifact.sha256``).
        query: the current goal's text; steers which records the extractors keep.
        memory_id: id of the memory, if one is made.
        observed_at: when the output was observed (aware UTC).
        min_confidence: the policy's threshold on the extraction's confidence (0..1).

    Returns:
        ``(memory or None, decision)`` where ``decision`` is ``{"stage": "promotion", "ref": artifact id,
        "outcome": "promoted" | "not_promoted", "reason": <see module docstring>, "memory_id": …,
        "extractor": …, "confidence": …, "min_confidence": …}``.

    Raises:
        InputError: naive ``observed_at`` or an artifact without sha256.
        IntegrityError: ``data`` does not match ``artifact.sha256``.
    """
    policy = {"min_confidence": min_confidence}
    if artifact.visibility == Visibility.AUDIT_ONLY:
        return None, _decision(artifact, "not_promoted", "audit_only", **policy)
    if artifact.status == ToolStatus.DEFERRED:
        return None, _decision(artifact, "not_promoted", "no_result", **policy)
    source = make_source(artifact, data, query=query, observed_at=observed_at)
    found = run(source)
    if found is None:
        return None, _decision(artifact, "not_promoted", "no_extractor", **policy)
    facts = {"extractor": found.kind, "confidence": found.confidence, **policy}
    if found.confidence < min_confidence:
        return None, _decision(artifact, "not_promoted", "low_confidence", **facts)
    memory = to_memory(source, found, memory_id=memory_id, observed_at=observed_at)
    return memory, _decision(artifact, "promoted", "extracted", memory_id=memory_id, **facts)
