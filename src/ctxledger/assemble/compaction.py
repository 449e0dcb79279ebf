"""Compaction at stable boundaries: where a compaction may end and which records it stands for.

Seed 001 "Límites de Compactación": compaction happens at stable boundaries (after a plan
is accepted, after a checkpoint, before a handoff), never in the middle of a step. Here a ``seq`` is a
*stable boundary* when no atomic unit straddles it: an assistant message, its tool calls and all their
results lie wholly at or before it, or wholly after it. A compaction itself stands at one point, the end of the
history it replaces (its ``through_seq``), so no boundary splits it. The default boundary is the end of the last
unit before the latest user turn, so the turn in progress is never compacted; when an existing compaction already
reaches that far (``compact()`` twice in a row), there is nothing new to compact and that is an ``InputError``
saying so, rather than a second compaction of the same history. An explicit ``through_seq`` may compact again.

The sources of a compaction are the messages, tool calls, tool results, memories, checkpoints, model
runs and earlier compactions of the branch lineage up to the boundary, except instructions (never
summarised; they stay fixed blocks) and records not visible to the whole conversation (private,
audit-only or shared with named participants: a summary must not carry them to readers who may not see
them). Validity is judged as the assemblies judge it, at the compaction's clock (``now``): the policy's
stages run through ``validity`` (:func:`~ctxledger.assemble.phases.filter.run_policy`) over the snapshot, and

* a unit with a record the validity stage omits as ``superseded`` or ``stale`` (and the raw sources of such
  memories) is left out of the compaction altogether: it is not summarised and not among ``source_ids``,
  so it stays in the history, where each later assembly judges it afresh (``explain`` says ``superseded``
  or ``stale``, not ``summarized``). The superseding record is summarised when it lies in the range;
* a record the stage keeps but marks ``stale`` (the policy's ``stale_actions`` say ``mark``) is summarised
  with the flag: a copy of it carrying ``meta["stale"]`` (the stage's detail, with the revalidation tool)
  goes to the compactor, which keeps it as a verbatim ``stale`` invariant.

A failed tool result goes to the compactor as a copy carrying ``meta["error_line"]``: the line of its raw
output that says why it failed (:func:`~ctxledger.represent.extract.logs.primary_error`, read from the
snapshot's rendering of the result), which the compaction keeps verbatim and its fidelity check requires
(seed 001: tool errors are never compressed away).

A tool exchange with an unresolved call (pending or deferred) is left out too (reason ``unresolved``): it stays
in the history, protected as ``unresolved_tool_call``, and when its result arrives later the call and its
result are sent together, as they were before the compaction. (A compaction made otherwise, e.g. imported,
still never covers a unit holding a record written after it: see
:mod:`ctxledger.policy.stages.compaction`.) So the protected state of the next assembly is the same as
before the compaction.

``meta["validity"]`` records the clock and what was left out (``{"now", "left_out": [{"ref", "reason",
"detail"}]}``). The compactor and its fidelity check are :func:`ctxledger.represent.compact_checked`'s; a
refused compaction raises and nothing is written (that is the caller's contract:
:meth:`ctxledger.ledger.Ledger.compact`).
"""

from __future__ import annotations

import dataclasses
import uuid
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

from ctxledger.assemble.snapshot import Snapshot
from ctxledger.errors import InputError
from ctxledger.policy.base import Outcome, Policy, ReasonCode
from ctxledger.policy.secrets import redact_text
from ctxledger.records import (
    Checkpoint,
    Compaction,
    Message,
    ModelRun,
    Record,
    Role,
    ToolArtifact,
    ToolCall,
    ToolMemory,
    ToolStatus,
    Visibility,
    utcnow,
)
from ctxledger.represent.compaction import Compactor, compact_checked
from ctxledger.represent.extract.logs import primary_error
from ctxledger.units import Unit, UnitKind

_SOURCE_TYPES = (Message, ToolCall, ToolArtifact, ToolMemory, Checkpoint, ModelRun, Compaction)
_VISIBLE = (Visibility.CONVERSATION, Visibility.BRANCH)


def _end(unit: Unit) -> int:
    """Where a unit ends for boundaries: a compaction stands at the end of the history it replaces."""
    return unit.seq if unit.kind is UnitKind.COMPACTION else unit.last_seq


def default_boundary(units: Sequence[Unit]) -> int:
    """The end ``seq`` of the last unit before the latest user turn (0 when there is none)."""
    latest_user = max((u.seq for u in units if u.kind is UnitKind.MESSAGE and u.role == "user"), default=None)
    ends = [_end(u) for u in units if latest_user is None or _end(u) < latest_user]
    return max(ends, default=0)


def covered_through(records: Sequence[Record]) -> tuple[int, str | None]:
    """``(through_seq, id)`` of the compaction among ``records`` that reaches furthest (``(0, None)``: none)."""
    done = [(r.through_seq or 0, r.id) for r in records if isinstance(r, Compaction)]
    return max(done, default=(0, None))


def check_boundary(units: Sequence[Unit], through_seq: int, *, source: str = "<api>") -> None:
    """Refuse a ``through_seq`` that splits a unit (a tool call on one side, its result on the other).

    Raises:
        InputError: ``through_seq`` lies inside a unit (``field="through_seq"``; names the unit).
    """
    for unit in units:
        if unit.kind is UnitKind.COMPACTION:  # it stands at one point, the end of what it replaces
            continue
        if unit.seq <= through_seq < unit.last_seq:
            raise InputError(
                f"through_seq {through_seq} splits unit {unit.id} (seq {unit.seq}..{unit.last_seq}); "
                f"a compaction must end at a stable boundary, e.g. {unit.seq - 1} or {unit.last_seq}",
                source=source,
                field="through_seq",
            )


def compaction_sources(records: Sequence[Record], through_seq: int) -> list[Record]:
    """The records a compaction through ``through_seq`` (inclusive) stands for (module docstring)."""
    return [
        r
        for r in records
        if r.seq <= through_seq
        and isinstance(r, _SOURCE_TYPES)
        and r.visibility in _VISIBLE
        and not (isinstance(r, Message) and r.role in (Role.SYSTEM, Role.DEVELOPER))
    ]


_DEAD = (ReasonCode.STALE, ReasonCode.SUPERSEDED)
"""Validity omissions that keep a record out of a compaction (its content is no longer current truth)."""


def judge_validity(
    snap: Snapshot,
    policy: Policy,
    now: datetime,
    *,
    find_artifacts: Any = None,
    find_record: Any = None,
) -> tuple[dict[str, tuple[str, str]], dict[str, str]]:
    """What the policy's validity stage says about a snapshot's records at ``now``.

    Runs the policy's stages through ``validity`` for an anonymous caller of the snapshot's conversation
    and branch (:func:`~ctxledger.assemble.phases.filter.run_policy`), so supersession, staleness by time or by
    source version, and broken provenance are decided by that stage and nowhere else.

    Returns:
        ``(dead, stale)``: record id → ``(reason, detail)`` for the records omitted as ``superseded`` or
        ``stale`` (reasons of :data:`_DEAD`), and record id → detail for those kept but marked ``stale``.
    """
    from ctxledger.assemble.phases.filter import run_policy
    from ctxledger.assemble.request import AssemblyRequest

    request = AssemblyRequest(snap.tenant_id, snap.conversation_id, branch_id=snap.branch_id, now=now)
    plan = run_policy(policy, request, snap, find_artifacts=find_artifacts, find_record=find_record, until="validity")
    dead: dict[str, tuple[str, str]] = {}
    stale: dict[str, str] = {}
    for d in plan.decisions:
        if d.stage != "validity":
            continue
        if d.outcome is Outcome.OMIT and d.reason in _DEAD:
            dead.setdefault(d.ref, (str(d.reason), d.detail))
        elif d.outcome is Outcome.MARK and d.reason == "stale":
            stale.setdefault(d.ref, d.detail)
    return dead, stale


UNRESOLVED = "unresolved"
"""Reason a compaction leaves out a tool exchange whose call has no result yet."""


def unresolved_calls(units: Sequence[Unit], through_seq: int) -> dict[str, tuple[str, str]]:
    """Unit id → ``(UNRESOLVED, detail)`` for each tool exchange ending by ``through_seq`` with an open call.

    Open means pending or deferred: no result recorded yet, or a result that says it is deferred.
    """
    out: dict[str, tuple[str, str]] = {}
    for unit in units:
        if unit.kind is not UnitKind.TOOL_EXCHANGE or unit.last_seq > through_seq:
            continue
        if unit.status in (ToolStatus.PENDING, ToolStatus.DEFERRED):
            calls = ", ".join(f"{r.id} ({r.name})" for r in unit.records if isinstance(r, ToolCall))
            detail = f"unit {unit.id} is {unit.status}: call {calls} stays in the history until its result arrives"
            out[unit.id] = (UNRESOLVED, detail)
    return out


def _valid_sources(
    sources: Sequence[Record], units: Sequence[Unit], dead: Mapping[str, tuple[str, str]], stale: Mapping[str, str]
) -> tuple[list[Record], list[dict[str, str]]]:
    """The sources a compaction may summarise (stale-marked ones flagged) and those it leaves out.

    A unit with a dead record leaves as a whole, as it does from an assembly (a tool call without its
    result would read as pending).
    """
    out_ids: dict[str, tuple[str, str]] = {}
    for unit in units:
        first = next((dead[r] for r in unit.record_ids if r in dead), None)
        if first is not None:
            for rid in unit.record_ids:
                out_ids.setdefault(rid, dead.get(rid, (first[0], f"unit {unit.id} left out as a whole")))
    for rid, why in dead.items():
        out_ids.setdefault(rid, why)
    kept: list[Record] = []
    left_out: list[dict[str, str]] = []
    for rec in sources:
        if rec.id in out_ids:
            reason, detail = out_ids[rec.id]
            left_out.append({"ref": rec.id, "reason": reason, "detail": detail})
        elif rec.id in stale:
            kept.append(dataclasses.replace(rec, meta={**rec.meta, "stale": stale[rec.id]}))
        else:
            kept.append(rec)
    return kept, left_out


def with_error_lines(sources: Sequence[Record], units: Sequence[Unit]) -> list[Record]:
    """``sources`` with each failed tool result replaced by a copy carrying ``meta["error_line"]``.

    The text is the result's turn in its unit (its raw bytes as the snapshot read them); a result whose
    bytes were unavailable, or whose output is empty, is passed unchanged. A secret on the error line is
    withheld (:func:`~ctxledger.policy.secrets.redact_text`), as everywhere else a summary copies text.
    """
    texts = {
        t.ref: str(t.content)
        for u in units
        if u.kind is UnitKind.TOOL_EXCHANGE
        for t in u.turns
        if t.role == "tool" and t.ref not in u.transforms and isinstance(t.content, str)
    }
    out: list[Record] = []
    for rec in sources:
        error = None
        if isinstance(rec, ToolArtifact) and rec.status is ToolStatus.FAILED and rec.id in texts:
            error = primary_error(texts[rec.id])
        if error:
            error["text"] = redact_text(error["text"])
        out.append(dataclasses.replace(rec, meta={**rec.meta, "error_line": error}) if error else rec)
    return out


def build_compaction(
    snap: Snapshot,
    *,
    policy: Policy,
    through_seq: int | None = None,
    compactor: Compactor | None = None,
    now: datetime | None = None,
    find_artifacts: Any = None,
    find_record: Any = None,
) -> Compaction:
    """Compact a snapshot's history up to a stable boundary, checked for fidelity (not yet written).

    Args:
        snap: the branch lineage's snapshot (its head is where the compaction is made).
        policy: the policy asking for it; its version is the compaction's lineage (``policy_version``),
            its name and hash go to ``meta``.
        through_seq: last ``seq`` covered, inclusive; default :func:`default_boundary` (the boundary
            must then lie after the furthest existing compaction's ``through_seq``).
        compactor: the compactor (default: the deterministic, offline
            :func:`~ctxledger.represent.compact`; e.g. an :class:`~ctxledger.represent.LLMCompactor`).
        now: the clock validity is judged at (aware UTC; default: the current time).
        find_artifacts: bare sha256 → the tenant's artifacts with those bytes; the validity stage repairs
            broken provenance with it (as in :func:`~ctxledger.assemble.assembler.assemble`).
        find_record: record id → the tenant's record, or ``None``; stages before validity read derived
            records' sources with it (as in :func:`~ctxledger.assemble.assembler.assemble`).

    Returns:
        The :class:`Compaction` (``seq`` 0: the store assigns it on append), on the snapshot's branch,
        whose ``body["fidelity"]`` records the passing check.

    Raises:
        InputError: ``through_seq`` splits a unit, lies beyond the head, or covers nothing (nothing still
            valid, too); or, with the default boundary, nothing was recorded before the latest user turn
            since the last compaction ("nothing new to compact", naming it); or ``now`` is naive.
        CompactionRefused: the compaction lost an invariant or the compactor failed; nothing to write.
    """
    boundary = default_boundary(snap.units) if through_seq is None else through_seq
    covered, latest = covered_through(snap.records)
    if through_seq is None and latest is not None and boundary <= covered:
        raise InputError(
            f"nothing new to compact: {latest} already covers the history through seq {covered}, and the "
            f"default boundary (the end of the last unit before the latest user turn) is seq {boundary}; "
            "record more turns first, or pass through_seq= to compact again",
            field="through_seq",
        )
    if boundary > snap.seq:
        raise InputError(f"through_seq {boundary} is beyond the head seq {snap.seq}", field="through_seq")
    check_boundary(snap.units, boundary)
    if now is None:
        now = utcnow()
    elif now.tzinfo is None:
        raise InputError(f"now {now.isoformat()} is naive; give an aware datetime (tzinfo=UTC)", field="now")
    dead, stale = judge_validity(snap, policy, now, find_artifacts=find_artifacts, find_record=find_record)
    dead = {**unresolved_calls(snap.units, boundary), **dead}
    sources, left_out = _valid_sources(compaction_sources(snap.records, boundary), snap.units, dead, stale)
    sources = with_error_lines(sources, snap.units)
    if not sources:
        why = f" ({len(left_out)} superseded, stale or unresolved records left out)" if left_out else ""
        raise InputError(f"nothing to compact at or before seq {boundary}{why}", field="through_seq")
    compaction_id = f"{snap.conversation_id}/compaction/{uuid.uuid4().hex[:12]}"
    rec = compact_checked(
        sources, compaction_id=compaction_id, policy_version=policy.version, through_seq=boundary, compactor=compactor
    )
    meta = {
        **rec.meta,
        "policy": policy.name,
        "policy_hash": policy.hash,
        "stable_boundary": boundary,
        "validity": {"now": now.isoformat(), "left_out": left_out},
    }
    return dataclasses.replace(rec, branch_id=snap.branch_id, meta=meta)
