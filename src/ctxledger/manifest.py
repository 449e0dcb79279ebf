"""The manifest of one assembly, and the answers operators ask of it (DESIGN §5; seed 000 "Registrar qué
vio el modelo"; seed 004 §4.4).

A manifest is a JSON-able dict persisted for every assembly. Its top-level keys:

* ``id``, ``tenant_id``, ``conversation_id``, ``branch_id``, ``snapshot_seq``, ``created_at``;
* ``policy`` ``{name, version, hash}``, ``assembler_version``, ``counter`` ``{id, is_estimate}``,
  ``model``, ``api``;
* ``budget`` ``{window, output, margin, input, fixed, dynamic}`` (tokens) and ``ledger`` (per class
  ``{cap, used, required}``);
* ``candidates``: every candidate record id; ``included``: ``{ref, unit, kind, role, external_id,
  representation, tokens, stage, reason, utility, transform}``; ``omitted``: ``{ref, unit, external_id,
  reason, stage, detail}``; every candidate is in exactly one of the two;
* ``decisions``: every policy decision ``{ref, stage, outcome, reason}``;
* ``rehydrations``: raw artifacts read back after selection;
* ``tokens`` ``{estimated_input, replay, saved, observed_input, observed_output, error}``;
* ``timings`` (milliseconds), ``turn_refs`` (record id of each turn in payload order),
  ``payload_hash`` and ``payload``.

The same policy on the same snapshot selects the same items and yields the same ``payload_hash``; ids,
``created_at`` and timings differ between runs and are not part of that promise.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from ctxledger.errors import RecordNotFound

if TYPE_CHECKING:
    from ctxledger.assemble.assembler import Assembly, AssemblyRequest, _Plan
    from ctxledger.assemble.costing import Coster
    from ctxledger.assemble.select import Option
    from ctxledger.assemble.snapshot import Snapshot
    from ctxledger.assemble.units import Unit
    from ctxledger.budget import Budget, BudgetLedger
    from ctxledger.policy.base import Policy

_STRUCTURAL = {"conversation", "branch", "participant", "model_run", "checkpoint"}


def build_manifest(
    asm: Assembly,
    *,
    request: AssemblyRequest,
    snap: Snapshot,
    policy: Policy,
    coster: Coster,
    plan: _Plan,
    fixed: Sequence[Unit],
    chosen: Sequence[tuple[Unit, Option]],
    units: Sequence[Unit],
    ledger: BudgetLedger,
    budget: Budget,
    timings: Mapping[str, float],
) -> dict[str, Any]:
    """Assemble the manifest dict of one assembly (see the module docstring for its keys)."""
    costs = snap.costs[coster.counter_id]
    position = {u.id: i for i, u in enumerate(snap.units)}
    replay = sum(sum(c) for c in costs)
    tools = request.tools if request.tools is not None else snap.tool_schemas
    replay += coster.base_tokens() + coster.tools_tokens(tools)
    included = [_entry(u, None, "fixed", "instruction", costs[position[u.id]]) for u in fixed]
    for unit, option in chosen:
        required = plan.required.get(unit.id)
        stage, reason = ("protection", required) if required else ("selection", "selected")
        included.extend(_entry(unit, option, stage, reason, option.turn_tokens or None, coster))
    included = [e for group in included for e in (group if isinstance(group, list) else [group])]
    included_refs = {e["ref"] for e in included}
    candidates = [r.id for r in snap.records if r.kind.value not in _STRUCTURAL]
    external = {r.id: r.external_id for r in snap.records}
    cand_pos = {ref: i for i, ref in enumerate(candidates)}
    omitted = [
        {
            "ref": ref,
            "external_id": external.get(ref),
            "reason": reason,
            "stage": stage,
            "detail": detail,
        }
        for ref, (reason, stage, detail) in plan.omitted.items()
        if ref not in included_refs and ref in cand_pos
    ]
    return {
        "id": asm.id,
        "tenant_id": request.tenant_id,
        "conversation_id": request.conversation_id,
        "branch_id": snap.branch_id,
        "snapshot_seq": snap.seq,
        "created_at": datetime.now(UTC).isoformat(),
        "policy": {"name": policy.name, "version": policy.version, "hash": policy.hash},
        "assembler_version": _assembler_version(),
        "counter": {"id": coster.counter_id, "is_estimate": coster.is_estimate},
        "model": request.model,
        "api": request.api,
        "participant_id": request.participant_id,
        "budget": {
            "window": budget.window_tokens,
            "output": budget.output_tokens,
            "margin": budget.margin_tokens,
            "input": budget.input_tokens,
            "fixed": budget.input_tokens - ledger.dynamic_tokens,
            "dynamic": ledger.dynamic_tokens,
        },
        "ledger": ledger.as_dict(),
        "candidates": candidates,
        "included": included,
        "omitted": sorted(omitted, key=lambda e: cand_pos[e["ref"]]),
        "decisions": [
            {"ref": d.ref, "stage": d.stage, "outcome": d.outcome.value, "reason": str(d.reason)}
            for d in plan.decisions
        ],
        "rehydrations": [],
        "tokens": {
            "estimated_input": asm.input_tokens,
            "replay": replay,
            "saved": replay - asm.input_tokens,
            "observed_input": None,
            "observed_output": None,
            "error": None,
        },
        "timings": dict(timings),
        "turn_refs": asm.turn_refs,
        "payload_hash": asm.payload_hash,
        "payload": asm.payload,
    }


def _assembler_version() -> str:
    from ctxledger.assemble.assembler import ASSEMBLER_VERSION

    return ASSEMBLER_VERSION


def _entry(
    unit: Unit,
    option: Option | None,
    stage: str,
    reason: str,
    known: Sequence[int] | None,
    coster: Coster | None = None,
) -> list[dict[str, Any]]:
    turns = option.turns if option is not None else unit.turns
    if known is None and coster is not None:
        known = [coster.turn_tokens(t) for t in turns]
    turn_tokens = dict(zip((t.ref for t in turns), known or (), strict=False))
    representation = option.representation if option is not None else "verbatim"
    out = []
    for rec in unit.records:
        out.append(
            {
                "ref": rec.id,
                "unit": unit.id,
                "kind": rec.kind.value,
                "role": getattr(rec, "role", None) and str(rec.role),
                "external_id": rec.external_id,
                "representation": representation,
                "tokens": turn_tokens.get(rec.id, 0),
                "stage": stage,
                "reason": reason,
                "utility": option.utility if option is not None else None,
                "transform": (option.transform if option is not None else None) or unit.transforms.get(rec.id),
                "source_version": getattr(rec, "source_version", None),
                "branch_id": rec.branch_id,
            }
        )
    return out


def find_entry(manifest: Mapping[str, Any], ref: str) -> tuple[str, dict[str, Any]]:
    """Find a record in a manifest by record id or external id.

    Returns:
        ``("included" | "omitted", entry)``.

    Raises:
        RecordNotFound: ``ref`` was not a candidate of this assembly.
    """
    for status in ("included", "omitted"):
        for entry in manifest[status]:
            if ref in (entry["ref"], entry.get("external_id")):
                return status, dict(entry)
    raise RecordNotFound(manifest["tenant_id"], ref, what=f"candidate of assembly {manifest['id']}")


def explain(manifest: Mapping[str, Any], ref: str) -> dict[str, Any]:
    """Answer "why did the model see this?" or "why did it not see that?" for one record.

    Returns:
        ``{ref, status, stage, reason, unit, representation, tokens, utility, branch_id, policy,
        decisions}``: for an included record the stage that admitted it (``fixed``, ``protection`` or
        ``selection``) with its utility and tokens; for an omitted one the reason code and the stage.

    Raises:
        RecordNotFound: ``ref`` was not a candidate of this assembly.
    """
    status, entry = find_entry(manifest, ref)
    rid = entry["ref"]
    decisions = [d for d in manifest.get("decisions", []) if d["ref"] in (rid, entry.get("unit"))]
    policy = manifest["policy"]
    return {
        "ref": rid,
        "external_id": entry.get("external_id"),
        "status": status,
        "stage": entry["stage"],
        "reason": entry["reason"],
        "unit": entry.get("unit"),
        "representation": entry.get("representation"),
        "tokens": entry.get("tokens"),
        "utility": entry.get("utility"),
        "transform": entry.get("transform"),
        "branch_id": entry.get("branch_id", manifest["branch_id"]),
        "policy": f"{policy['name']}@{policy['version']} ({policy['hash'][:19]})",
        "decisions": decisions,
        "detail": entry.get("detail", ""),
    }
