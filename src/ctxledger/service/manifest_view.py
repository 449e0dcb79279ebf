"""The one place the service and the inspector read a persisted manifest.

Manifests are stored as JSON documents (:meth:`ctxledger.Ledger.get_assembly`); this adapter turns one
into the few views the inspector and the MCP tools show, so a change of the manifest's shape is
absorbed here: the budget bar by context class, included items, omissions grouped by reason, the diff
between two assemblies of a conversation, and whether rehydrating a record obeys the policy.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any

from ctxledger.assemble.recall import SECRET_REASONS
from ctxledger.policy.rehydration import hard_omission

NOTABLE_PER_REASON = 5
"""Omitted records listed by name under each reason (the rest are counted)."""


def as_dict(manifest: Any) -> dict[str, Any]:
    """The manifest as a plain dict (a typed manifest is dumped with ``to_dict``/``model_dump`` if it has one)."""
    if isinstance(manifest, Mapping):
        return dict(manifest)
    for name in ("to_dict", "model_dump", "as_dict"):
        method = getattr(manifest, name, None)
        if callable(method):
            return dict(method())
    raise TypeError(f"not a manifest: {type(manifest).__name__}")


@dataclass(frozen=True, slots=True)
class ClassBar:
    """One context class on the budget bar: tokens used (of which required) and its cap (``None``: no cap)."""

    name: str
    used: int
    required: int
    cap: int | None


@dataclass(frozen=True, slots=True)
class Budget:
    """The budget terms in tokens (W, O, M, B_input, F, B_dynamic), the tokens used and the bar segments."""

    window: int
    output: int
    margin: int
    input: int
    fixed: int
    dynamic: int
    used: int
    classes: list[ClassBar]


def budget(manifest: Mapping[str, Any]) -> Budget:
    """The budget and the per-class ledger of an assembly."""
    b = manifest.get("budget", {})
    ledger = manifest.get("ledger", {})
    classes = [
        ClassBar(name, int(row.get("used") or 0), int(row.get("required") or 0), row.get("cap"))
        for name, row in (ledger.get("classes") or {}).items()
    ]
    return Budget(
        int(b.get("window", 0)),
        int(b.get("output", 0)),
        int(b.get("margin", 0)),
        int(b.get("input", 0)),
        int(b.get("fixed", 0)),
        int(b.get("dynamic", 0)),
        int(ledger.get("used_tokens") or 0),
        classes,
    )


def included(manifest: Mapping[str, Any]) -> list[dict[str, Any]]:
    """Included entries (ref, kind/role, stage, reason, utility, tokens, representation), in payload order."""
    return [dict(e) for e in manifest.get("included", [])]


@dataclass(frozen=True, slots=True)
class OmissionGroup:
    """Omitted records sharing one reason: how many, and the notable ones (highest utility first)."""

    reason: str
    stage: str
    count: int
    notable: list[dict[str, Any]] = field(default_factory=list)


def omissions(manifest: Mapping[str, Any], notable: int = NOTABLE_PER_REASON) -> list[OmissionGroup]:
    """Omitted records grouped by reason, largest group first; ``notable`` per group by utility then tokens."""
    groups: dict[str, list[Mapping[str, Any]]] = {}
    for entry in manifest.get("omitted", []):
        groups.setdefault(str(entry.get("reason")), []).append(entry)

    def weight(e: Mapping[str, Any]) -> tuple[float, int]:
        return (float(e.get("utility") or 0.0), int(e.get("tokens") or 0))

    out = []
    for reason, entries in groups.items():
        ranked = sorted(entries, key=weight, reverse=True)
        stage = str(entries[0].get("stage", ""))
        out.append(OmissionGroup(reason, stage, len(entries), [dict(e) for e in ranked[:notable]]))
    return sorted(out, key=lambda g: (-g.count, g.reason))


@dataclass(frozen=True, slots=True)
class Diff:
    """What changed from ``before`` to ``after``: refs that entered (with why) and left (with why)."""

    before_id: str
    after_id: str
    entered: list[dict[str, Any]]
    left: list[dict[str, Any]]
    kept: int


def diff(before: Mapping[str, Any], after: Mapping[str, Any]) -> Diff:
    """Records included in ``after`` but not ``before`` (and the reverse), each with its reason in ``after``."""
    was = {e["ref"] for e in before.get("included", [])}
    now = {e["ref"] for e in after.get("included", [])}
    why_out = {e["ref"]: e for e in after.get("omitted", [])}
    entered = [dict(e) for e in after.get("included", []) if e["ref"] not in was]
    left = []
    for entry in before.get("included", []):
        if entry["ref"] not in now:
            later = why_out.get(entry["ref"])
            reason = later.get("reason") if later else "not a candidate"
            left.append({"ref": entry["ref"], "reason": reason, "stage": later.get("stage") if later else None})
    return Diff(str(before.get("id")), str(after.get("id")), entered, left, len(was & now))


def previous(assemblies: Sequence[Mapping[str, Any]], assembly_id: str) -> Mapping[str, Any] | None:
    """The assembly of the same conversation made just before ``assembly_id`` (list in creation order)."""
    ids = [a.get("id") for a in assemblies]
    if assembly_id not in ids:
        return None
    i = ids.index(assembly_id)
    return assemblies[i - 1] if i > 0 else None


def entry(manifest: Mapping[str, Any], ref: str) -> tuple[str, dict[str, Any]] | None:
    """``("included" | "omitted", entry)`` for a candidate ref of the assembly, else ``None``."""
    for status in ("included", "omitted"):
        for e in manifest.get(status, []):
            if e.get("ref") == ref:
                return status, dict(e)
    return None


def _candidates(manifest: Mapping[str, Any]) -> set[str]:
    candidates = manifest.get("candidates")
    if candidates is not None:
        return set(candidates)
    return {e.get("ref") for s in ("included", "omitted") for e in manifest.get(s, [])}


def candidate_ref(manifest: Mapping[str, Any], ref: str) -> str:
    """``ref`` as a candidate's record id: itself when a candidate, else ``<conversation>/<ref>`` when that is one.

    Short ids (``call_a``, ``12``) are taken as ``explain`` takes them; a ref that is neither is returned as it
    is (and refused by :func:`rehydration_refusal`).
    """
    known = _candidates(manifest)
    if ref in known:
        return ref
    prefixed = f"{manifest.get('conversation_id')}/{ref}"
    return prefixed if prefixed in known else ref


def rehydration_refusal(manifest: Mapping[str, Any], ref: str) -> str | None:
    """Why the policy forbids reading ``ref``'s raw bytes back from this assembly, or ``None`` if it allows it.

    The same rule as the ``recall`` tool's (:mod:`ctxledger.assemble.recall`): refused when ``ref`` was no
    candidate of the assembly, when a hard filter omitted it (any reason outside
    :data:`~ctxledger.policy.rehydration.READABLE_OMISSIONS`, also when a later stage's decision omitted it
    after a readable reason: ``secret``, ``privacy_restricted``, ``not_in_lineage`` …), or when it carries a
    secret mark (``secret_redacted``/``secret_withheld``). Fails closed.
    """
    if ref not in _candidates(manifest):
        return "not a candidate of this assembly"
    omitted = {
        e["ref"]: (e.get("reason"), e.get("stage", ""), e.get("detail") or "") for e in manifest.get("omitted", [])
    }
    decisions = [
        SimpleNamespace(ref=d["ref"], outcome=d.get("outcome"), reason=d.get("reason"), stage=d.get("stage", ""),
                        detail=d.get("detail") or "")
        for d in manifest.get("decisions") or ()
        if isinstance(d, Mapping) and "ref" in d
    ]  # fmt: skip
    hard = hard_omission(omitted, decisions)(ref)
    if hard is not None:
        return f"omitted by a hard filter: {hard[0]}"
    marks = manifest.get("marks") or ()
    if any(m.get("ref") == ref and m.get("reason") in SECRET_REASONS for m in marks):
        return "holds a redacted secret"
    return None


def _first(*values: Any) -> Any:
    """The first value that is not ``None`` (``None`` if none is)."""
    return next((v for v in values if v is not None), None)


def tokens(manifest: Mapping[str, Any]) -> dict[str, Any]:
    """Estimated input, replay and (once recorded) observed tokens of the call.

    A manifest from ``Ledger.get_assembly`` carries the observed usage in ``tokens``; one listed from the store
    (``list_assemblies``) carries it beside them, as ``observed_usage``; both are read.
    """
    t = manifest.get("tokens", {})
    usage = manifest.get("observed_usage") or {}
    return {
        "estimated_input": t.get("estimated_input"),
        "replay": t.get("replay"),
        "observed_input": _first(t.get("observed_input"), usage.get("input_tokens")),
        "observed_output": _first(t.get("observed_output"), usage.get("output_tokens")),
    }
