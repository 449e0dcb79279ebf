"""The filter phase: the policy's stages over the visited candidates, and the live units they leave."""

from __future__ import annotations

import operator
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ctxledger.assemble.inputs import resolve_participant, unknown_inputs
from ctxledger.assemble.phases.plan import Plan
from ctxledger.assemble.reach import (
    Reach,
    visited_records,
    visited_units,
)
from ctxledger.assemble.recall import with_recall_tool
from ctxledger.assemble.represent import Pointer, omit_redundant
from ctxledger.assemble.request import AssemblyRequest
from ctxledger.assemble.snapshot import Snapshot
from ctxledger.assemble.speakers import attribute_speakers
from ctxledger.policy.annotate import annotate
from ctxledger.policy.base import Outcome, Policy, PolicyDecision, ReasonCode, StageContext
from ctxledger.policy.contracts import expose_tools, tool_name, tool_ref
from ctxledger.policy.safety import run_stage
from ctxledger.policy.secrets import SPEAKER_WITHHELD, default_scanner, redact_json
from ctxledger.records import Record, ToolArtifact, Visibility, utcnow
from ctxledger.retention.state import META_KEY, SOURCES_KEY, retained, retained_sources
from ctxledger.serialize.base import Serializer
from ctxledger.serialize.undeclared_tools import undeclared_tools
from ctxledger.units import UNAVAILABLE, Unit, build_units, drop_thinking


def run_policy(
    policy: Policy,
    request: AssemblyRequest,
    snap: Snapshot,
    *,
    records: Sequence[Record] | None = None,
    units: Sequence[Unit] | None = None,
    find_artifacts: Callable[[str], Sequence[ToolArtifact]] | None = None,
    tools: Sequence[Mapping[str, Any]] = (),
    find_record: Callable[[str], Record | None] | None = None,
    until: str | None = None,
) -> Plan:
    """Run every stage in order; return decisions, omissions (first reason wins), requirements and marks.

    ``records`` / ``units`` default to the snapshot's; the assembler passes them with the other branches'
    candidates added. ``find_artifacts`` (bare sha256 → the request tenant's artifacts with those bytes)
    lets the validity stage repair broken provenance from the whole tenant store. ``tools`` are the tool
    schemas the call exposes (the secrets stage scans them). ``find_record`` (record id → the request tenant's
    record, or ``None``) lets the privacy and visibility stages read the sources of derived records that are
    no candidates. ``until`` names the last stage to run (e.g. ``"validity"``: what a compaction needs to
    know about its sources, :func:`ctxledger.assemble.compaction.build_compaction`); the later stages are
    skipped (a policy without a stage of that name runs them all).

    Custom stages run under :func:`~ctxledger.policy.safety.run_stage`'s checks.

    Raises:
        PolicyError: a custom stage raised, or decided something it may not (an unknown reason code, an
            omission of the instructions, the latest user turn or a required unit); names the stage.
    """
    ctx = StageContext(
        request,
        snap.records if records is None else records,
        snap.units if units is None else units,
        snap.lineage_branches,
        lineage=snap.lineage,
        now=request.now or utcnow(),
        contract=policy.contract,
        find_artifacts=find_artifacts,
        find_record=find_record,
        snapshot_seq=snap.seq,
        tools=tuple(tools),
        facts=snap.facts,
        memo=snap.memo,
    )
    plan = Plan([], {}, {}, marks=ctx.marks, ctx=ctx)
    for stage in policy.stages:
        for d in run_stage(stage, ctx):
            plan.decisions.append(d)
            if d.outcome is Outcome.OMIT and d.ref not in plan.omitted:
                plan.omitted[d.ref] = (str(d.reason), d.stage, d.detail)
                ctx.omitted.add(d.ref)
            elif d.outcome is Outcome.REQUIRE:
                plan.required.setdefault(d.ref, str(d.reason))
                ctx.required.setdefault(d.ref, str(d.reason))
            elif d.outcome is Outcome.MARK:
                ctx.marks.setdefault(d.ref, []).append(d)
        if until is not None and stage.name == until:
            break
    return plan


def _redact_tools(tools: Sequence[Mapping[str, Any]], plan: Plan, policy: Policy) -> tuple[Mapping[str, Any], ...]:
    """The tool schemas with every string holding a secret redacted, for schemas marked ``secret_redacted``.

    The secrets stage marks a schema by its :func:`~ctxledger.policy.contracts.tool_ref`; its scanner (the
    policy's ``secrets`` stage, else the default one) finds the strings again here. The redacted schemas are
    what is costed, sent, and stored with the manifest's payload.
    """
    marked = {d.ref for ds in plan.marks.values() for d in ds if d.reason == "secret_redacted"}
    scanner = getattr(policy.stage("secrets"), "scanner", None) or default_scanner()
    if not any(tool_ref(i, t, scanner) in marked for i, t in enumerate(tools)):
        return tuple(tools)
    return tuple(redact_json(t, scanner) if tool_ref(i, t, scanner) in marked else t for i, t in enumerate(tools))


def _mark_retained(plan: Plan, units: Sequence[Unit]) -> None:
    """Mark (stage ``retention``) every record a retention rule changed, and memories whose sources it changed.

    The detail is the sentence explanations show: "redacted by retention rule R at T".
    """
    for unit in units:
        for rec in unit.records:
            if not _retention_noted(rec):
                continue
            for reason, detail in _retention_marks(rec):
                decision = PolicyDecision(rec.id, "retention", Outcome.MARK, reason, detail)
                plan.decisions.append(decision)
                plan.marks.setdefault(rec.id, []).append(decision)


def _retention_noted(rec: Record) -> bool:
    """Whether a retention rule left a note on ``rec`` (its own content, or a memory's sources): a key test."""
    meta = rec.meta
    if not meta:
        return False
    try:
        return META_KEY in meta or SOURCES_KEY in meta
    except TypeError:  # not a mapping
        return False


def _retention_marks(rec: Record) -> tuple[tuple[str, str], ...]:
    """``(reason, detail)`` of each retention mark of ``rec``: what a rule did to it, and to its sources."""
    own = [(f"retention_{state.action}", state.sentence)] if (state := retained(rec)) is not None else []
    sources = [
        ("source_retained", f"source artifact {aid} {src.sentence}")
        for aid, src in sorted(retained_sources(rec).items())
    ]
    return (*own, *sources)


def _mark_unavailable(plan: Plan, units: Sequence[Unit]) -> None:
    """Mark ``provenance_broken`` every tool result whose raw bytes could not be read back intact.

    Such a result renders as a reference (:func:`~ctxledger.units.unavailable_text`) instead of
    crashing the call; the mark (stage ``integrity``) names the record, its sha256 and what went wrong, so
    the manifest's ``marks`` and ``explain`` say why the model saw no output.
    """
    missing = []
    for unit in units:
        for rid, transform in unit.transforms.items():
            if transform not in UNAVAILABLE:
                continue
            art = next(r for r in unit.records if r.id == rid)
            sha = getattr(art, "sha256", "")
            detail = f"{UNAVAILABLE[transform]} (sha256 {sha}); shown as a reference to artifact {rid}"
            decision = PolicyDecision(rid, "integrity", Outcome.MARK, "provenance_broken", detail)
            plan.decisions.append(decision)
            plan.marks.setdefault(rid, []).append(decision)
            missing.append(rid)
    if missing and plan.ctx is not None:  # usually the wrong blob folder: say so once, loudly
        plan.ctx.warnings.append(
            {
                "code": "raw_outputs_unavailable",
                "input": "blob store",
                "value": f"{len(missing)} tool results",
                "detail": f"raw bytes of {len(missing)} tool result(s) could not be read (first: {missing[0]}); "
                "is the blob folder right? (ctxledger --blobs DIR / CTXLEDGER_BLOBS / Ledger.open(blobs_dir=…))",
            }
        )


def _candidates(
    snap: Snapshot, rch: Reach, extra: Sequence[Record], read_blob: Callable[[str], bytes] | None
) -> tuple[list[Record], list[Unit]]:
    """The visited records and units of the snapshot, plus other branches' records (and units for the visible ones)."""
    if rch.complete:
        own_records, own_units = snap.records, snap.units
    else:
        own_units, own_records = _visited(snap, rch)
    if not extra:
        return own_records, own_units
    records = sorted([*own_records, *extra], key=lambda r: r.seq)
    fill = [r for r in extra if r.visibility in (Visibility.CONVERSATION, Visibility.SHARED)]
    units = list(own_units)
    if fill and read_blob is not None:
        units = sorted([*units, *build_units(fill, read_blob)[0]], key=lambda u: u.seq)
    return records, units


def _visited(snap: Snapshot, rch: Reach) -> tuple[list[Unit], list[Record]]:
    """The visited units and records of ``snap``: the very lists of the previous call when they are unchanged.

    Returning the same list objects lets the stages' verdict caches (:meth:`StageContext.scan`) reuse a whole
    earlier pass instead of looking each candidate up again.
    """
    units = visited_units(snap.units, rch)
    loose = list(snap.reach_index.loose.values())
    table = snap.memo.setdefault("visited", {})
    hit = table.get("")
    if hit is not None:
        _, (old_units, old_loose, old_records) = hit
        if _same(units, old_units) and _same(loose, old_loose):
            return old_units, old_records
    records = visited_records(units, snap.reach_index.loose)
    table[""] = (None, (units, loose, records))
    return units, records


def _same(new: Sequence[Any], old: Sequence[Any]) -> bool:
    """Whether two sequences hold the very same objects in the same order."""
    return len(new) == len(old) and all(map(operator.is_, new, old))


EMPTY_TURN_NOTE = "renders to nothing a provider accepts (no non-blank text, image or tool call); not sent"
"""The manifest's detail for a message left out as ``empty`` (:func:`ctxledger.units.renders_nothing`)."""


def _without_empty(units: list[Unit]) -> tuple[list[Unit], list[Unit]]:
    """``(units that render to something, empty ones)``; empty units never reach the policy or the payload."""
    if not any(u.empty for u in units):
        return units, []
    return [u for u in units if not u.empty], [u for u in units if u.empty]


def _annotated(unit: Unit, marks: Mapping[str, Sequence[PolicyDecision]], table: dict[str, Any]) -> Unit:
    """:func:`~ctxledger.policy.annotate.annotate`, cached in ``table`` (the snapshot's) per (unit object, its marks).

    Rendering marks (every tool result is delimited as data) is pure in the unit and the decisions about
    its records, and those repeat from one call to the next; the same annotated unit object comes back,
    so its token costs are cached too (:func:`_turn_costs`).
    """
    if marks.keys().isdisjoint(unit.record_ids):
        return unit
    mine = tuple([(rid, tuple(marks[rid])) for rid in unit.record_ids if rid in marks])
    hit = table.get(unit.id)
    if hit is not None and hit[0] is unit and hit[1] == mine:
        return hit[2]  # type: ignore[no-any-return]
    out = annotate(unit, marks)
    table[unit.id] = (unit, mine, out)
    return out


@dataclass(slots=True)
class Filtered:
    """The filter phase's result.

    Attributes:
        request: the request with its participant resolved (:func:`resolve_participant`).
        records: the visited candidate records, other branches' included, in ``seq`` order.
        all_units: the visited units that render to something (empty ones are omitted as ``empty``).
        units: the live units: no record omitted, marks rendered, speakers attributed, thinking the serializer
            does not send dropped, redundant units left out.
        plan: the policy plan (decisions, omissions, requirements, marks, tool exposure, warnings).
        tools: the tool schemas the call exposes, secrets redacted, then for Anthropic a minimal definition of
            each tool a live unit calls without one (:func:`_with_undeclared_tools`); all part of ``F``.
        pointers: redundant unit id → the unit (or :class:`Pointer`) that stands for it.
    """

    request: AssemblyRequest
    records: list[Record]
    all_units: list[Unit]
    units: list[Unit]
    plan: Plan
    tools: tuple[Mapping[str, Any], ...]
    pointers: Mapping[str, str | Pointer]


def filter_candidates(
    request: AssemblyRequest,
    snap: Snapshot,
    rch: Reach,
    policy: Policy,
    serializer: Serializer,
    *,
    extra_records: Sequence[Record] = (),
    read_blob: Callable[[str], bytes] | None = None,
    redundancy: Callable[[Sequence[Unit], Mapping[str, str]], Mapping[str, str | Pointer]] | None = None,
    find_artifacts: Callable[[str], Sequence[ToolArtifact]] | None = None,
    find_record: Callable[[str], Record | None] | None = None,
    now_given: bool = True,
) -> Filtered:
    """Run the policy's stages over the units ``rch`` visits (and ``extra_records``); return the live units.

    An omitted record takes its whole unit out (the first omitted record, in unit order, gives its reason to the
    rest): a unit enters whole or not at all (seed 000: a tool call and its results are one protocol unit).
    ``redundancy`` (``None`` when the ladder is off) finds near-duplicates among the live units. ``now_given``
    says whether the caller set the request's clock (a clock earlier than the records is then warned about). The
    other arguments are :func:`ctxledger.assemble.assembler.assemble`'s.

    Returns:
        :class:`Filtered`.

    Raises:
        PolicyError: a custom stage failed (:func:`run_policy`).
        InputError: the request's participant is ambiguous (:func:`resolve_participant`).
    """
    records, all_units = _candidates(snap, rch, extra_records, read_blob)
    all_units, empty = _without_empty(all_units)
    request = resolve_participant(request, records)
    tools = tuple(request.tools) if request.tools is not None else snap.tool_schemas
    tools, withheld = expose_tools(policy.contract, tools, phase=request.phase, checks_passed=request.checks_passed)
    tools = with_recall_tool(tools, policy)  # the recall tool, when the policy enables it: part of F
    plan = run_policy(
        policy,
        request,
        snap,
        records=records,
        units=all_units,
        find_artifacts=find_artifacts,
        tools=tools,
        find_record=find_record,
    )
    plan.extra_records = list(extra_records)
    for unit in empty:
        plan.omitted.setdefault(unit.id, (str(ReasonCode.EMPTY), "empty_turn", EMPTY_TURN_NOTE))
    if plan.ctx is not None:
        plan.ctx.warnings[:0] = unknown_inputs(request, records, policy, now_given=now_given)
    plan.tools = {"exposed": [tool_name(t) for t in tools], "withheld": withheld}
    tools = _redact_tools(tools, plan, policy)
    flags = _unit_flags(all_units, snap.memo)
    _mark_unavailable(plan, [u for u, f in zip(all_units, flags, strict=True) if f & _UNAVAILABLE])
    _mark_retained(plan, [u for u, f in zip(all_units, flags, strict=True) if f & _RETAINED])
    units = _live(all_units, plan, snap.memo)
    withheld_names = {d.ref for ds in plan.marks.values() for d in ds if d.reason == SPEAKER_WITHHELD}
    units = attribute_speakers(units, records, request.participant_id, withheld_names)
    units = _without_unsent_thinking(units, policy, serializer, snap.memo)
    pointers = redundancy(units, plan.required) if redundancy is not None else {}
    units = omit_redundant(units, pointers, plan.omitted, plan.decisions)
    tools = _with_undeclared_tools(tools, units, plan, withheld, serializer)
    return Filtered(request, records, all_units, units, plan, tools, pointers)


def _with_undeclared_tools(
    tools: tuple[Mapping[str, Any], ...],
    units: Sequence[Unit],
    plan: Plan,
    withheld: Sequence[Mapping[str, str]],
    serializer: Serializer,
) -> tuple[Mapping[str, Any], ...]:
    """``tools`` plus a minimal definition of each undefined tool a live unit calls, for Anthropic Messages.

    Only a serializer whose API requires the definitions (``defines_called_tools``) gets them. The payload's
    calls come from the live units, so the definitions the serializer would add are all known here, before the
    budget: they are part of ``F`` and costed like every schema. Their names go to the manifest
    (``plan.tools["undeclared"]``: name → ``schema_not_recorded`` or ``withheld``).
    """
    if not getattr(serializer, "defines_called_tools", False):
        return tools
    turns = [t for u in units for t in u.turns]
    added, reasons = undeclared_tools(turns, tools, withheld={w["name"] for w in withheld})
    if not added:
        return tools
    plan.tools["undeclared"] = reasons
    return (*tools, *added)


def _live(all_units: Sequence[Unit], plan: Plan, memo: dict[Any, Any]) -> list[Unit]:
    """The units none of whose records the plan omits (annotated with their marks); the rest leave whole.

    The first omitted record of a unit (in unit order) gives its reason to the unit's other records.
    """
    units = []
    omitted_ids = plan.omitted.keys()
    touched = omitted_ids | plan.marks.keys()  # most units have no record omitted or marked: one test each
    table = memo.setdefault("annotated", {})
    for u in all_units:
        if touched.isdisjoint(u.record_ids):
            units.append(u)
            continue
        if omitted_ids.isdisjoint(u.record_ids):
            units.append(_annotated(u, plan.marks, table))
            continue
        cause = next(r for r in u.record_ids if r in plan.omitted)
        first = plan.omitted[cause]
        for rid in u.record_ids:
            if rid not in plan.omitted:
                plan.omitted[rid] = (first[0], first[1], f"unit {u.id} omitted as a whole with {cause} ({first[0]})")
                touched.add(rid)
    return units


def _without_unsent_thinking(
    units: list[Unit], policy: Policy, serializer: Serializer, memo: dict[Any, Any] | None = None
) -> list[Unit]:
    """The units with the reasoning blocks ``serializer`` does not send dropped (:func:`drop_thinking`).

    ``memo`` (the snapshot's) keeps per unit object whether any of its turns carries reasoning.
    """
    scanner = getattr(policy.stage("secrets"), "scanner", None) or default_scanner()
    keep_thinking = getattr(serializer, "thinking_types", None) or bool(getattr(serializer, "sends_thinking", False))
    table = {} if memo is None else memo.setdefault("unit thinks", {})
    out = []
    for u in units:
        hit = table.get(u.id)
        if hit is None or hit[0] is not u:
            hit = table[u.id] = (u, any(t.thinking for t in u.turns))
        out.append(
            drop_thinking(u, keep_thinking, lambda text, scanner=scanner: bool(scanner.scan(text))) if hit[1] else u
        )
    return out


_UNAVAILABLE = 1
"""Flag of a unit with a tool result whose raw bytes could not be read back (:func:`_mark_unavailable`)."""
_RETAINED = 2
"""Flag of a unit with a record a retention rule left a note on (:func:`_mark_retained`)."""


def _unit_flags(units: Sequence[Unit], memo: dict[Any, Any]) -> list[int]:
    """:data:`_UNAVAILABLE` | :data:`_RETAINED` of each unit, kept in ``memo`` per unit object (pure in the unit)."""
    table = memo.setdefault("unit flags", {})
    out = []
    for u in units:
        hit = table.get(u.id)
        if hit is None or hit[0] is not u:
            unavailable = any(t in UNAVAILABLE for t in u.transforms.values())
            retained = any(_retention_noted(r) for r in u.records)
            hit = table[u.id] = (u, (_UNAVAILABLE if unavailable else 0) | (_RETAINED if retained else 0))
        out.append(hit[1])
    return out
