"""Rehydration, phase two: reading a selected memory's raw artifact back, only when allowed.

Seed 004 §4.11 ("usa el CSV exacto de antes": a summary is not enough, but raw data comes back only
*after* policy selection, bounded) and §8 R12 (rehydration must not become a hidden path for large or
sensitive data). Phase one (:mod:`ctxledger.policy.stages.memory_first`) put the compact memory in place
of the raw exchange. Here, after selection, for each selected memory the request asks exact evidence of
(``exact_evidence``: ``True`` for the most relevant selected memory, or ids / external ids of memories or
artifacts), every source artifact is checked, in order (a source whose provenance the validity stage
repaired is replaced by the artifact that repaired it, which may lie in another conversation of the
tenant; it holds the same bytes, so the memory's located ranges still apply; its manifest entry says
``repaired_from``):

1. no hard filter of this assembly omitted it (else a reference with that filter's reason): rehydration
   reads back only what the policy would have let in, so an artifact left out ``not_in_lineage`` (a
   sibling branch), ``out_of_contract`` (the agent's working set), ``secret``, ``superseded`` … stays
   out, whatever memory points at it. Omissions that only choose a representation or spend the budget —
   :data:`READABLE_OMISSIONS` (``covered_by_memory``, ``summarized``, ``budget``, ``class_cap``,
   ``redundant``, ``role_order``, ``byte_budget``) — do not block it; every other reason does (fail closed).
   ``stale`` and ``conflict_suppressed`` block: the validity stage omits an artifact only when the
   policy's stale action for its freshness class is ``omit`` (or its only memories are omitted), or it lost
   a conflict; an artifact merely *marked* stale is not omitted and comes back with the memory's marks;
2. it exists among the candidates and its bytes still hash to its sha256 (else ``missing``);
3. the privacy stage lets it go to the request's provider (else ``privacy_restricted`` /
   ``provider_restricted``), and it is not ``audit_only`` for this participant;
4. it fits the policy's byte budget: ``max_artifact_bytes`` each, ``max_bytes`` for the assembly
   (else ``byte_budget``). When the memory's locators give byte ranges of the artifact and the policy's
   ``located_ranges`` is on (the default), only those ranges are read back and counted — the exact
   evidence the memory stands on, cut from bytes whose sha256 was just checked;
5. secrets in it are redacted line by line (an artifact the secrets stage omitted never gets here; one
   it marked ``secret_redacted`` does);
6. the memory plus the raw block fits the tokens selection left (else ``budget``).

When all pass, the memory is rendered with the exact raw content appended (representation
``rehydrated``); otherwise with a reference (artifact id, sha256, size) and the revalidation hint
(transform ``reference_hint``). Every decision is returned for the manifest's ``rehydrations``.
"""

from __future__ import annotations

import dataclasses
import json
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ctxledger.errors import BlobNotFound, InputError, IntegrityError
from ctxledger.hashing import sha256_hex
from ctxledger.policy.base import Policy, ReasonCode
from ctxledger.policy.secrets import default_scanner, redact
from ctxledger.policy.stages._common import request_provider
from ctxledger.policy.stages.visibility import visible_to
from ctxledger.records import Record, ToolArtifact, ToolMemory
from ctxledger.retention.state import source_retained
from ctxledger.units import Unit, UnitKind, render_data_block


@dataclass(slots=True)
class RehydrationPlan:
    """What phase two decided: new turns per memory unit id, and the manifest entries."""

    turns: dict[str, tuple[Any, ...]]
    entries: list[dict[str, Any]]
    representation: dict[str, str]


READABLE_OMISSIONS = frozenset(
    {
        ReasonCode.COVERED_BY_MEMORY,
        ReasonCode.SUMMARIZED,
        ReasonCode.BUDGET,
        ReasonCode.CLASS_CAP,
        ReasonCode.REDUNDANT,
        ReasonCode.ROLE_ORDER,
        ReasonCode.BYTE_BUDGET,
    }
)
"""Omission reasons that do not stop a raw artifact from being read back: they chose a cheaper
representation or spent the token budget, they did not judge the artifact unfit for this call."""

Omissions = Callable[[str], "tuple[str, str] | None"]
"""Record id → ``(reason, detail)`` of the hard filter that omitted it, or ``None`` (see :func:`hard_omission`)."""


def hard_omission(omitted: Mapping[str, tuple[str, ...]], decisions: Sequence[Any] = ()) -> Omissions:
    """A lookup of the hard-filter omission of a record, for :func:`rehydrate`'s ``filtered``.

    Args:
        omitted: record id → ``(reason, stage, detail)`` — the assembly's first omission reason per record.
        decisions: the assembly's :class:`~ctxledger.policy.base.PolicyDecision` s; a later stage's hard
            omission counts even when an earlier one recorded a readable reason first.

    Returns:
        A function: record id → ``(reason, detail)`` when a reason outside :data:`READABLE_OMISSIONS`
        omitted it, else ``None``.
    """
    hard: dict[str, tuple[str, str]] = {}
    for d in decisions:
        if getattr(d, "outcome", None) == "omit" and str(d.reason) not in READABLE_OMISSIONS:
            hard.setdefault(d.ref, (str(d.reason), f"omitted by stage {d.stage}: {d.detail}".rstrip(": ")))
    for rid, (reason, stage, *rest) in omitted.items():
        if str(reason) not in READABLE_OMISSIONS:
            detail = rest[0] if rest else ""
            hard[rid] = (str(reason), f"omitted by stage {stage}" + (f": {detail}" if detail else ""))

    def lookup(rid: str) -> tuple[str, str] | None:
        return hard.get(rid)

    return lookup


Repairs = Mapping[str, Mapping[str, ToolArtifact]]
"""Memory id → {broken source artifact id → the artifact that repaired it} (``StageContext.repairs``)."""


def sources(mem: ToolMemory, lookup: Callable[[str], Record | None], repairs: Repairs | None = None) -> list[Any]:
    """``(source id, artifact or None, repaired from)`` for each source of ``mem``, repairs applied.

    ``repaired from`` is the broken source id when a repair replaced it, else ``None``.
    """
    fixed = (repairs or {}).get(mem.id, {})
    return [(fixed[a].id, fixed[a], a) if a in fixed else (a, lookup(a), None) for a in mem.source_artifact_ids]


def wanted_memories(
    request: Any,
    chosen: Sequence[Unit],
    query: str,
    lookup: Callable[[str], Record | None],
    repairs: Repairs | None = None,
) -> list[Unit]:
    """The selected memory units whose raw evidence the request asks for (see the module docstring).

    With ``exact_evidence=True`` the memory is the one sharing the most words with the query (its
    summary, fields, source tool names and media types count, so "the exact CSV" finds a memory of a
    ``text/csv`` artifact); ties go to the newest; no shared word means no rehydration. Named ids match a
    memory, its sources, or the artifacts that repaired them.
    """
    asked = getattr(request, "exact_evidence", ())
    memories = [u for u in chosen if u.kind is UnitKind.MEMORY and isinstance(u.records[0], ToolMemory)]
    if asked is True:
        words = _words(query)
        scored = [(len(words & _memory_words(u.records[0], lookup, repairs)), u) for u in memories]
        scored = [(n, u) for n, u in scored if n > 0]
        scored.sort(key=lambda p: (-p[0], -p[1].seq, p[1].id))
        return [scored[0][1]] if scored else []
    names = set(asked or ())
    out = []
    for unit in memories:
        mem = unit.records[0]
        assert isinstance(mem, ToolMemory)
        keys = {mem.id, mem.external_id, *mem.source_artifact_ids, *(s[0] for s in sources(mem, lookup, repairs))}
        if names & {k for k in keys if k}:
            out.append(unit)
    return out


def _words(text: str) -> set[str]:
    return {w.rstrip("s") for w in re.findall(r"[a-z0-9]{3,}", text.lower())}


def _memory_words(mem: Any, lookup: Callable[[str], Record | None], repairs: Repairs | None) -> set[str]:
    parts = [mem.summary, json.dumps(dict(mem.fields), default=str)]
    for _, art, _ in sources(mem, lookup, repairs):
        if isinstance(art, ToolArtifact):
            parts += [art.name.replace(".", " ").replace("_", " "), art.media_type.replace("/", " ")]
    return _words(" ".join(parts))


def rehydrate(
    request: Any,
    policy: Policy,
    targets: Sequence[Unit],
    lookup: Callable[[str], Record | None],
    read_blob: Callable[[str], bytes] | None,
    turn_tokens: Callable[[Any], int],
    current_tokens: Mapping[str, int],
    remaining_tokens: int,
    repairs: Repairs | None = None,
    mark_attrs: Callable[[str], Mapping[str, str]] | None = None,
    hidden: Callable[[str], bool] | None = None,
    filtered: Omissions | None = None,
) -> RehydrationPlan:
    """Decide phase two for each target memory unit (see the module docstring).

    Args:
        request: the assembly request (provider, participant, exact evidence).
        policy: the bound policy (byte budget; its ``privacy`` stage decides routing).
        targets: selected memory units whose raw evidence is asked for.
        lookup: record id → candidate record (``None`` when not a candidate).
        read_blob: bare-hex sha256 → bytes from the blob store.
        turn_tokens: costs a turn in tokens (the assembler's coster).
        current_tokens: unit id → tokens of the option selection chose.
        remaining_tokens: tokens of ``B_dynamic`` selection left unused.
        repairs: provenance repairs of the validity stage (:data:`Repairs`); a repaired source is read
            from the artifact that repaired it.
        mark_attrs: record id → the data-block attributes of its policy marks (stale, conflict, repaired
            provenance …), kept on the re-rendered block.
        hidden: record id → whether the visibility rules withhold it from this participant, promotion
            included (:func:`~ctxledger.policy.stages.visibility.sees`). A private artifact they do not
            withhold was promoted to this participant (its owner's checkpoint lists it and this participant
            is the checkpoint's audience: the owner's parent or its ``shared_with``), so it may be read back;
            without ``hidden`` only visibility itself counts. Audit-only artifacts never come back.
        filtered: record id → ``(reason, detail)`` of the hard filter that omitted it, or ``None``
            (:func:`hard_omission`); such an artifact is never read back, it gets a reference with that
            reason. Without it no omission is checked (the caller vouches for the targets' sources).

    Returns:
        The new turns per unit id, their representation, and one manifest entry per artifact.
    """
    plan = RehydrationPlan({}, [], {})
    bytes_left = policy.rehydration.max_bytes
    for unit in targets:
        mem = unit.records[0]
        assert isinstance(mem, ToolMemory)
        raw_parts: list[_Raw] = []
        refs: list[tuple[ToolArtifact | None, str, str]] = []
        repaired_from: dict[str, str] = {}
        for aid, art, broken in sources(mem, lookup, repairs):
            if broken is not None:
                repaired_from[aid] = broken
            # a repaired source holds the same bytes as the broken one, so the locator's ranges still apply
            located = broken if broken is not None else aid
            ranges = located_ranges(mem, located) if policy.rehydration.located_ranges else ()
            blocked = filtered(aid) if filtered is not None and isinstance(art, ToolArtifact) else None
            gone = source_retained(mem, aid, art)
            if gone is not None:
                reason, detail, texts = f"retention_{gone.action}", gone.sentence, ()
            elif blocked is not None:
                reason, detail, texts = blocked[0], blocked[1], ()
            else:
                reason, detail, texts = _check(art, request, policy, read_blob, bytes_left, ranges, hidden)
            if reason is None and isinstance(art, ToolArtifact):
                raw = _Raw(art, ranges, texts)
                bytes_left -= raw.size
                raw_parts.append(raw)
            else:
                refs.append((art if isinstance(art, ToolArtifact) else None, aid, f"{reason}: {detail}"))
        marked = dict(mark_attrs(mem.id)) if mark_attrs is not None else {}
        turn = _render(unit, mem, raw_parts, refs, marked)
        extra = turn_tokens(turn) - current_tokens.get(unit.id, 0)
        if raw_parts and extra > remaining_tokens:
            refs += [
                (r.art, r.art.id, f"{ReasonCode.BUDGET}: {extra} more tokens than the {remaining_tokens} left")
                for r in raw_parts
            ]
            bytes_left += sum(r.size for r in raw_parts)
            raw_parts = []
            turn = _render(unit, mem, raw_parts, refs, marked)
            extra = turn_tokens(turn) - current_tokens.get(unit.id, 0)
        remaining_tokens -= max(extra, 0)
        plan.turns[unit.id] = (turn,)
        plan.representation[unit.id] = "rehydrated" if raw_parts else "memory"
        entries = _entries(mem, raw_parts, refs)
        for entry in entries:
            if entry["artifact"] in repaired_from:
                entry["repaired_from"] = repaired_from[entry["artifact"]]
        plan.entries += entries
    return plan


@dataclass(frozen=True, slots=True)
class _Raw:
    """Exact content read back: the whole artifact (``ranges == ()``) or its located byte ranges."""

    art: ToolArtifact
    ranges: tuple[tuple[int, int], ...]
    texts: tuple[str, ...]

    @property
    def size(self) -> int:
        """Bytes read back (what the byte budget counts)."""
        return sum(b - a for a, b in self.ranges) if self.ranges else self.art.size_bytes


def located_ranges(mem: ToolMemory, artifact_id: str) -> tuple[tuple[int, int], ...]:
    """Byte ranges ``[start, end)`` of ``artifact_id`` that the memory's locators name, merged and sorted.

    Only locators with integer ``byte_start`` ≤ ``byte_end`` count; none means the whole artifact.
    """
    spans = sorted(
        (loc["byte_start"], loc["byte_end"])
        for loc in mem.locators
        if str(loc.get("artifact_id", "")) == artifact_id
        and all(isinstance(loc.get(k), int) and not isinstance(loc.get(k), bool) for k in ("byte_start", "byte_end"))
        and 0 <= loc["byte_start"] <= loc["byte_end"]
    )
    merged: list[tuple[int, int]] = []
    for a, b in spans:
        if merged and a <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(merged[-1][1], b))
        else:
            merged.append((a, b))
    return tuple(merged)


def _check(
    art: Record | None,
    request: Any,
    policy: Policy,
    read_blob: Callable[[str], bytes] | None,
    bytes_left: int,
    ranges: tuple[tuple[int, int], ...] = (),
    hidden: Callable[[str], bool] | None = None,
) -> tuple[str | None, str, tuple[str, ...]]:
    if not isinstance(art, ToolArtifact):
        return "missing", "the source artifact is not a candidate of this assembly", ()
    promoted = hidden is not None and not hidden(art.id) and art.visibility.value != "audit_only"
    if not promoted and not visible_to(art, getattr(request, "participant_id", None)):
        return (
            str(ReasonCode.AUDIT_ONLY if art.visibility.value == "audit_only" else ReasonCode.PRIVATE_TO_PARTICIPANT),
            ("the raw artifact is not visible to this participant"),
            (),
        )
    privacy = policy.stage("privacy")
    if privacy is not None:
        reason, detail = privacy.allows(art, request_provider(request))  # type: ignore[attr-defined]
        if reason is not None:
            return str(reason), detail, ()
    if any(b > art.size_bytes for _, b in ranges):
        return "missing", f"a locator range ends past the artifact's {art.size_bytes} bytes", ()
    size = sum(b - a for a, b in ranges) if ranges else art.size_bytes
    limit = min(policy.rehydration.max_artifact_bytes, bytes_left)
    if size > limit:
        return str(ReasonCode.BYTE_BUDGET), f"{size} bytes > {limit} bytes left in the byte budget", ()
    if read_blob is None:
        return "missing", "no blob store to read from", ()
    try:
        data = read_blob(art.sha256)
    except (BlobNotFound, InputError):
        return "missing", "raw bytes missing from the blob store", ()
    except IntegrityError:
        return "missing", "stored bytes no longer match the artifact's sha256", ()
    if sha256_hex(data) != art.sha256:
        return "missing", "stored bytes no longer match the artifact's sha256", ()
    pieces = [data[a:b] for a, b in ranges] if ranges else [data]
    texts = tuple(p.decode("utf-8", errors="replace") for p in pieces)
    return None, "", tuple(redact(t, default_scanner().scan(t)) for t in texts)


def _render(unit: Unit, mem: ToolMemory, raw: Sequence[_Raw], refs: Sequence[Any], marked: Mapping[str, str]) -> Any:
    body = redact(unit.text, default_scanner().scan(unit.text))
    for r in raw:
        art = r.art
        if not r.ranges:
            body += (
                f"\n--- exact raw content of {art.id} ({art.media_type}, {art.size_bytes} bytes, "
                f"sha256:{art.sha256}) ---\n" + r.texts[0]
            )
            continue
        for (a, b), text in zip(r.ranges, r.texts, strict=True):
            body += f"\n--- exact bytes {a}:{b} of {art.id} ({art.media_type}, sha256:{art.sha256}) ---\n" + text
    attrs: dict[str, str] = dict(marked)
    if refs:
        attrs["raw"] = ", ".join(
            f"{aid} (sha256:{a.sha256[:16]}…, {a.size_bytes} bytes)" if a is not None else aid for a, aid, _ in refs
        )
        attrs["raw_withheld"] = "; ".join(why for _, _, why in refs)
        if mem.revalidation_tool:
            attrs["revalidate_with"] = mem.revalidation_tool
    base = unit.turns[0]
    return dataclasses.replace(base, content=render_data_block(mem, body, attrs))


def _entries(mem: ToolMemory, raw: Sequence[_Raw], refs: Sequence[Any]) -> list[dict[str, Any]]:
    out = [
        {
            "memory": mem.id,
            "artifact": r.art.id,
            "sha256": r.art.sha256,
            "bytes": r.size,
            "ranges": [list(span) for span in r.ranges] or None,
            "decision": "rehydrated",
            "reason": None,
            "revalidation_tool": mem.revalidation_tool,
        }
        for r in raw
    ]
    for art, aid, why in refs:
        out.append(
            {
                "memory": mem.id,
                "artifact": aid,
                "sha256": art.sha256 if art is not None else None,
                "bytes": art.size_bytes if art is not None else None,
                "decision": "reference",
                "reason": why.split(":", 1)[0],
                "detail": why.split(":", 1)[1].strip(),
                "revalidation_tool": mem.revalidation_tool,
            }
        )
    return out
