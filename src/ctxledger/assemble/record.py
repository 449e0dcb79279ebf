"""The manifest phase: the typed :class:`~ctxledger.manifest.Manifest` record of one assembly, and its trace.

It receives the earlier phases' results (the policy plan, the chosen units with their options, the budget
ledger, the serialized payload) and writes what the manifest keeps (:mod:`ctxledger.manifest`): every
included item, the omissions summarised by (reason, stage), a bounded list of notable omissions, and the
decisions and marks about included records. The complete lists — every omitted candidate, decision and
mark — are built only when read (:class:`~ctxledger.manifest.ManifestView`) or when the caller asks for
``trace="full"``, so a long history costs a summary line per reason, not an entry per record.

Every free-text value copied from records or inputs is redacted with the policy's secret scanner (the
``secrets`` stage's, else the default) when its entry is built; omitted entries, decisions and marks are
built once per distinct value and cached on the snapshot (:class:`~ctxledger.hashing.EncodedList`).
"""

from __future__ import annotations

import copy
import heapq
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from collections.abc import Set as AbstractSet
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from ctxledger.assemble.costing import Coster
from ctxledger.assemble.reach import BEYOND_REACH, REACH_STAGE, Reach, beyond_count
from ctxledger.assemble.relevance import relevance_name
from ctxledger.assemble.represent import record_locators, record_promotion
from ctxledger.assemble.select import Option
from ctxledger.assemble.snapshot import Snapshot
from ctxledger.assemble.version import ASSEMBLER_VERSION
from ctxledger.budget import Budget, BudgetLedger
from ctxledger.hashing import EncodedList, canonical_json
from ctxledger.manifest import (
    MAX_NOTABLE,
    MAX_RANGES,
    Manifest,
    ManifestView,
    OmissionGroup,
    check_trace,
    summarize_omissions,
)
from ctxledger.policy.base import Policy, PolicyDecision, ReasonCode
from ctxledger.policy.secrets import SecretScanner, default_scanner, redact_json, redact_text
from ctxledger.records import Kind
from ctxledger.serialize.undeclared_tools import defined_tool_names, minimal_definition
from ctxledger.units import Unit

_STRUCTURAL = frozenset({Kind.CONVERSATION, Kind.BRANCH, Kind.PARTICIPANT, Kind.MODEL_RUN, Kind.SKILL_STATE})

NOTABLE_BUDGET = 8
"""Highest-utility units left out for budget that the summary names (within :data:`MAX_NOTABLE`)."""


@dataclass(frozen=True, slots=True)
class ManifestInputs:
    """What the earlier phases hand to the manifest phase.

    Attributes:
        assembly_id, payload, payload_hash, input_tokens, turn_refs: the serialize phase's result.
        request: the effective request (clock set, participant resolved).
        requested: the budget as the caller asked (``W``, ``O``, ``M``), before a contract's cap.
        budget: the effective budget.
        snap, policy, coster: the assembly's snapshot, bound policy and coster.
        plan: the policy plan (decisions, omissions, requirements, marks, rehydrations, tools, warnings).
        reach: the units the assembly visited (:class:`~ctxledger.assemble.reach.Reach`); ``None``: all.
        records: the visited candidate records (with other branches'), in ``seq`` order.
        fixed: the instruction units; chosen: ``(unit, option)`` of every included unit, in ``seq`` order.
        ledger: the budget ledger after rehydration.
        budget_options: unit id → the option the selection weighed for each unit left out for budget (its first,
            most faithful one): its ``tokens`` and ``utility`` go to the unit's omitted entries.
        fill: why ``B_dynamic`` is not used up although something was left out for budget, or ``None``.
        framing_credit: tokens charged beyond ``B_dynamic`` for message framing the provider format merges away.
        timings: milliseconds per phase.
        trace: ``summary`` or ``full``.
    """

    assembly_id: str
    payload: dict[str, Any]
    payload_hash: str
    input_tokens: int
    turn_refs: list[str]
    request: Any
    requested: Budget
    budget: Budget
    snap: Snapshot
    policy: Policy
    coster: Coster
    plan: Any
    fixed: Sequence[Unit]
    chosen: Sequence[tuple[Unit, Option]]
    ledger: BudgetLedger
    budget_options: Mapping[str, Option]
    fill: str | None
    timings: Mapping[str, float]
    framing_credit: int = 0
    trace: str = "summary"
    reach: Reach | None = None
    records: Sequence[Any] = ()


def build_manifest(inp: ManifestInputs) -> ManifestView:
    """The manifest of one assembly: the typed record, viewed with its trace (see :mod:`ctxledger.manifest`)."""
    trace = check_trace(inp.trace)
    snap, plan, policy, coster, request = inp.snap, inp.plan, inp.policy, inp.coster, inp.request
    scanner = policy_scanner(policy)
    costs = snap.costs[coster.counter_id]
    position = snap.reach_index.unit_of
    replay = _replay_tokens(snap, costs)
    replay += coster.base_tokens() + coster.tools_tokens(_replay_tools(snap, request, coster))
    included: list[dict[str, Any]] = []
    for u in inp.fixed:
        known = costs[position[u.id]] if u.id in position else None
        included += _entry(u, None, "fixed", "instruction", known, coster, scanner)
    entries = snap.memo.setdefault("manifest entries", {})
    for unit, option in inp.chosen:
        required = plan.required.get(unit.id)
        stage, reason = ("protection", required) if required else ("selection", "selected")
        included += _chosen_entry(entries, unit, option, stage, reason, coster, scanner)
    included_refs = {e["ref"] for e in included}
    rch = inp.reach
    partial = rch is not None and not rch.complete
    records = [r for r in inp.records if r.kind not in _STRUCTURAL] if partial else _candidates(snap, plan)
    ids = [r.id for r in records]
    candidate_ids = set(ids)
    about = included_refs | {u.id for u, _ in inp.chosen} | {u.id for u in inp.fixed}
    omitted = _omitted(records, ids, candidate_ids, plan.omitted, included_refs)
    seqs = sorted([r.seq for r in records])
    beyond: list[OmissionGroup] = []
    unvisited = 0
    if partial:
        assert rch is not None
        runs = [(snap.units[a].seq, snap.units[b].last_seq) for a, b in rch.beyond_runs()]
        seqs = sorted([*seqs, *(a for a, _ in runs)])  # a run of omissions does not span unvisited units
        unvisited = beyond_count(snap.reach_index, rch)
        listed = tuple(runs[:MAX_RANGES])
        more = max(0, len(runs) - MAX_RANGES)
        beyond = [OmissionGroup(BEYOND_REACH, REACH_STAGE, unvisited, runs[0][0], runs[-1][1], listed, more)]
    groups = summarize_omissions([(w[0], w[1], r.seq) for r, w in omitted], seqs)
    by_reason: Counter[str] = Counter()
    by_stage: Counter[str] = Counter()
    for g in groups:  # a group counts every omitted candidate of its (reason, stage)
        by_reason[g.reason] += g.count
        by_stage[g.stage] += g.count
    groups = sorted([*groups, *beyond], key=lambda g: (g.reason, g.stage))
    if unvisited:  # left out for budget, by the reach: counted with the other budget omissions
        by_reason[str(ReasonCode.BUDGET)] += unvisited
        by_stage[REACH_STAGE] += unvisited
    all_marks = [d for ds in plan.marks.values() for d in ds]
    # a summary keeps the decisions about an included record or unit, and those about no record (a tool schema)
    kept_decisions = [d for d in plan.decisions if d.ref in about or d.ref not in candidate_ids]
    kept_marks = [d for d in all_marks if d.ref in about or d.ref not in candidate_ids]
    b, requested, ledger = inp.budget, inp.requested, inp.ledger

    def full_trace() -> dict[str, Any]:
        cache = snap.memo.setdefault("manifest_omitted", {})
        every = [*omitted, *_unvisited(snap, rch)] if partial else omitted
        unit_of = _units_of_records(snap)
        entries = [
            _weighed(_omitted_entry(cache, r, w, scanner, unit_of.get(r.id)), inp.budget_options)
            for r, w in sorted(every, key=lambda e: e[0].seq)
        ]
        everyone = (
            sorted([*records, *(r for r, _ in _unvisited(snap, rch))], key=lambda r: r.seq) if partial else records
        )
        return {
            "omitted": EncodedList((e for e, _ in entries), [t for _, t in entries]),
            "candidates": [r.id for r in everyone],
            "decisions": _encoded(snap, "manifest_decisions", plan.decisions, _decision_entry, scanner),
            "marks": _encoded(snap, "manifest_marks", all_marks, _mark_entry, scanner),
        }

    record = Manifest(
        id=inp.assembly_id,
        tenant_id=request.tenant_id,
        conversation_id=request.conversation_id,
        branch_id=snap.branch_id,
        snapshot_seq=snap.seq,
        created_at=datetime.now(UTC).isoformat(),
        trace=trace,
        policy=_policy_block(policy, relevance_name(snap.vectors, policy.selection, snap.facets)),
        assembler_version=ASSEMBLER_VERSION,
        counter={"id": coster.counter_id, "is_estimate": coster.is_estimate},
        model=redact_text(request.model, scanner),
        api=request.api,
        participant_id=redact_text(request.participant_id, scanner),
        request=_request_facts(request, scanner),
        budget={
            "requested": {
                "window": requested.window_tokens,
                "output": requested.output_tokens,
                "margin": requested.margin_tokens,
                "input": requested.input_tokens,
            },
            "contract_cap": policy.contract.max_input_tokens if policy.contract is not None else None,
            "window": b.window_tokens,
            "output": b.output_tokens,
            "margin": b.margin_tokens,
            "input": b.input_tokens,
            "fixed": b.input_tokens - ledger.dynamic_tokens,
            "dynamic": ledger.dynamic_tokens,
            "fill": inp.fill,
            "framing_credit": inp.framing_credit,
        },
        ledger=ledger.as_dict(),
        candidate_count=len(records) + unvisited,
        included=included,
        omissions=groups,
        omitted_by_reason=dict(sorted(by_reason.items())),
        omitted_by_stage=dict(sorted(by_stage.items())),
        notable_omissions=_notable(omitted, request, plan, inp.budget_options, snap, scanner),
        decisions=_entries(snap, "manifest decision entries", kept_decisions, _decision_entry, scanner),
        marks=_entries(snap, "manifest mark entries", kept_marks, _mark_entry, scanner),
        rehydrations=[_redacted(r, _REHYDRATION_TEXT, scanner) for r in plan.rehydrations],
        tools=_redacted_names(plan.tools, scanner),
        lineage=[{"branch_id": h.branch_id, "max_seq": h.max_seq} for h in snap.lineage],
        contract=policy.contract.as_dict() if policy.contract is not None else None,
        warnings=[_redacted(w, _WARNING_TEXT, scanner) for w in plan.ctx.warnings] if plan.ctx is not None else [],
        tokens={
            "estimated_input": inp.input_tokens,
            "replay": replay,
            "saved": replay - inp.input_tokens,
            "observed_input": None,
            "observed_output": None,
            "error": None,
        },
        timings=dict(inp.timings),
        turn_refs=list(inp.turn_refs),
        payload_hash=inp.payload_hash,
        payload=inp.payload if trace == "full" else None,
    )
    view = ManifestView(record, full_trace)
    if trace != "full":
        dict.__setitem__(view, "payload", inp.payload)  # at hand in process; the stored summary keeps None
    return view


def _omitted(
    records: Sequence[Any],
    ids: Sequence[str],
    candidate_ids: AbstractSet[str],
    omitted: Mapping[str, tuple[str, str, str]],
    included: AbstractSet[str],
) -> list[tuple[Any, tuple[str, str, str]]]:
    """``(record, why)`` of each of ``records`` the plan omits and the payload does not include, in their order.

    ``ids`` are the records' ids and ``candidate_ids`` the same as a set: which records are meant is found by set
    operations, then they are listed in order.
    """
    hit = candidate_ids & omitted.keys()
    hit -= included
    return [(rec, omitted[i]) for rec, i in zip(records, ids, strict=True) if i in hit]


def _replay_tokens(snap: Snapshot, costs: Sequence[Sequence[int]]) -> int:
    """Tokens of every unit of the snapshot verbatim (the running sums' last entry, when they are complete)."""
    for sums in snap.token_sums.values():
        if len(sums) == len(costs) + 1 and sums is snap.token_sums.get(_counter_of(snap, costs)):
            return sums[-1]
    return sum(sum(c) for c in costs)


def _replay_tools(snap: Snapshot, request: Any, coster: Coster) -> list[Mapping[str, Any]]:
    """The tool schemas a verbatim replay sends: the request's or the snapshot's, and the minimal ones it needs.

    For a serializer that must define every tool called (Anthropic), each tool the history calls without a schema
    gets a minimal definition. The names called are gathered once per unit and kept on the snapshot's memo
    (units are only appended).
    """
    tools = list(request.tools if request.tools is not None else snap.tool_schemas)
    if not getattr(getattr(coster, "serializer", None), "defines_called_tools", False):
        return tools
    seen, called = snap.memo.get("called tool names", (0, frozenset()))
    if seen < len(snap.units):
        called = called | {n for u in snap.units[seen:] for n in u.tool_names}
        snap.memo["called tool names"] = (len(snap.units), called)
    defined = defined_tool_names(tools)
    return tools + [minimal_definition(n) for n in sorted(called - defined)]


def _counter_of(snap: Snapshot, costs: Sequence[Sequence[int]]) -> str | None:
    return next((cid for cid, c in snap.costs.items() if c is costs), None)


def _unvisited(snap: Snapshot, rch: Reach | None) -> list[tuple[Any, tuple[str, str, str]]]:
    """Every record of the units the reach did not visit, with the beyond-reach omission (full trace only)."""
    if rch is None:
        return []
    out = []
    for a, b in rch.beyond_runs():
        detail = (
            f"beyond the budget's reach: older than the newest units worth {rch.budgets:g} × B_input tokens, "
            "and neither pinned nor among the best lexical matches; never visited"
        )
        for unit in snap.units[a : b + 1]:
            out += [(rec, (BEYOND_REACH, REACH_STAGE, detail)) for rec in unit.records]
    return out


def _candidates(snap: Snapshot, plan: Any) -> list[Any]:
    """Candidate records: the snapshot's non-structural records, then other branches' (in ``seq`` order)."""
    own = _candidate_records(snap)
    extra = [r for r in plan.extra_records if r.kind not in _STRUCTURAL]
    return sorted([*own, *extra], key=lambda r: r.seq) if extra else own


def _notable(
    omitted: Sequence[tuple[Any, tuple[str, str, str]]],
    request: Any,
    plan: Any,
    options: Mapping[str, Option],
    snap: Snapshot,
    scanner: SecretScanner,
) -> list[dict[str, Any]]:
    """At most :data:`MAX_NOTABLE` omitted entries: asked for, on the exact-evidence path, best left out for budget."""
    asked = set(request.exact_evidence) if not isinstance(request.exact_evidence, bool) else set()
    path = {r.get("artifact") for r in plan.rehydrations} | {r.get("repaired_from") for r in plan.rehydrations}
    cache = snap.memo.setdefault("manifest_omitted", {})
    first: list[tuple[int, float, str, Any, tuple[str, str, str]]] = []
    if asked or path:
        for rec, why in omitted:
            if rec.id in asked or (rec.external_id and rec.external_id in asked):
                first.append((0, 0.0, "requested", rec, why))
            elif rec.id in path:
                first.append((1, 0.0, "exact_evidence_path", rec, why))
    named = {v[3].id for v in first}
    budget = heapq.nsmallest(  # omitted holds each record once, and seq breaks every tie
        NOTABLE_BUDGET,
        (
            (2, -options[rec.id].utility, "budget", rec, why)
            for rec, why in omitted
            if why[0] == "budget" and rec.id in options and rec.id not in named
        ),
        key=lambda v: (v[1], v[3].seq),
    )
    first.sort(key=lambda v: (v[0], v[3].seq))
    unit_of = _units_of_records(snap)
    out = []
    for _rank, _score, why_notable, rec, why in [*first, *budget][:MAX_NOTABLE]:
        entry, _ = _weighed(_omitted_entry(cache, rec, why, scanner, unit_of.get(rec.id)), options)
        entry["why_notable"] = why_notable
        out.append(entry)
    return out


def policy_scanner(policy: Policy) -> SecretScanner:
    """The scanner of the policy's ``secrets`` stage, else the process-wide default one."""
    found = getattr(policy.stage("secrets"), "scanner", None)
    return found if isinstance(found, SecretScanner) else default_scanner()


_WARNING_TEXT = ("value", "detail")
_REHYDRATION_TEXT = ("reason", "revalidation_tool")


def _redacted(entry: Mapping[str, Any], keys: Sequence[str], scanner: SecretScanner) -> dict[str, Any]:
    """A copy of ``entry`` whose string values under ``keys`` have the lines holding a secret replaced."""
    return {k: redact_text(v, scanner) if k in keys else v for k, v in entry.items()}


def _redacted_names(value: Any, scanner: SecretScanner) -> Any:
    """A copy of the ``tools`` block (names; ``renamed``: original → sent) with every string, keys too, redacted."""
    if isinstance(value, str):
        return redact_text(value, scanner)
    if isinstance(value, Mapping):
        return {redact_text(k, scanner): _redacted_names(v, scanner) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_redacted_names(v, scanner) for v in value]
    return value


def _request_facts(request: Any, scanner: SecretScanner | None = None) -> dict[str, Any]:
    """What else the call asked for, so the assembly can be reproduced (clock, provider, contract, evidence).

    Free-text values (provider, query, agent, call type, phase, checks, evidence ids, scope, source
    versions and the tool schemas the caller passed) are redacted with ``scanner`` (default: the default
    scanner): the manifest is stored, and a secret never is.
    """
    evidence = request.exact_evidence
    return {
        "now": request.now.isoformat() if request.now is not None else None,
        "provider": redact_text(request.provider, scanner),
        "query": redact_text(request.query, scanner),
        "agent": redact_text(request.agent, scanner),
        "call_type": redact_text(request.call_type, scanner),
        "phase": redact_text(request.phase, scanner),
        "checks_passed": [redact_text(c, scanner) for c in request.checks_passed],
        "exact_evidence": evidence if isinstance(evidence, bool) else [redact_text(e, scanner) for e in evidence],
        "scope": {redact_text(k, scanner): redact_text(v, scanner) for k, v in request.scope.items()},
        "source_versions": {
            redact_text(k, scanner): redact_text(v, scanner) for k, v in request.source_versions.items()
        },
        "tools": [redact_json(t, scanner or default_scanner()) for t in request.tools] if request.tools else None,
    }


def _decision_entry(d: PolicyDecision, scanner: SecretScanner) -> dict[str, Any]:
    detail = redact_text(d.detail, scanner)
    return {"ref": d.ref, "stage": d.stage, "outcome": d.outcome.value, "reason": str(d.reason), "detail": detail}


def _mark_entry(d: PolicyDecision, scanner: SecretScanner) -> dict[str, Any]:
    return {"ref": d.ref, "stage": d.stage, "reason": d.reason, "detail": redact_text(d.detail, scanner)}


def _entries(
    snap: Snapshot,
    name: str,
    decisions: Sequence[PolicyDecision],
    entry: Callable[[PolicyDecision, SecretScanner], dict[str, Any]],
    scanner: SecretScanner,
) -> list[dict[str, Any]]:
    """A copy of each decision's manifest entry, built (and redacted) once per decision object.

    Most decisions are the very objects of the previous call (stages keep their verdicts per unit); the cache on
    the snapshot keeps only the entries of the latest call, so it never outgrows one manifest. Entries redacted
    with another scanner are built afresh.
    """
    cached = snap.memo.get(name, {})
    old: dict[int, tuple[PolicyDecision, dict[str, Any]]] = (
        cached.get("", {}) if cached.get("scanner") is scanner else {}
    )
    new: dict[int, tuple[PolicyDecision, dict[str, Any]]] = {}
    out = []
    for d in decisions:
        hit = old.get(id(d))
        if hit is None or hit[0] is not d:
            hit = (d, entry(d, scanner))
        new[id(d)] = hit
        out.append(dict(hit[1]))
    snap.memo[name] = {"": new, "scanner": scanner}
    return out


def _encoded(
    snap: Snapshot,
    name: str,
    decisions: Sequence[PolicyDecision],
    entry: Callable[[PolicyDecision, SecretScanner], dict[str, Any]],
    scanner: SecretScanner,
) -> EncodedList:
    """Manifest entries of decisions with their canonical JSON, built (and redacted) once per distinct decision.

    Most decisions repeat from one call to the next (every tool result is marked ``delimit``); the cache on
    the snapshot keeps only the decisions of the latest call, so it never outgrows one manifest. Entries
    redacted with another scanner are built afresh.
    """
    cached = snap.memo.get(name, {})
    old: dict[PolicyDecision, tuple[dict[str, Any], str]] = (
        cached.get("", {}) if cached.get("scanner") is scanner else {}
    )
    new: dict[PolicyDecision, tuple[dict[str, Any], str]] = {}
    entries, texts = [], []
    for d in decisions:
        hit = new.get(d) or old.get(d)
        if hit is None:
            value = entry(d, scanner)
            hit = (value, canonical_json(value))
        new[d] = hit
        entries.append(dict(hit[0]))
        texts.append(hit[1])
    snap.memo[name] = {"": new, "scanner": scanner}
    return EncodedList(entries, texts)


def _candidate_records(snap: Snapshot) -> list[Any]:
    """The snapshot's non-structural records, extended as the (append-only) snapshot grows."""
    count, found = snap.memo.get("manifest_candidates", {}).get("", (0, []))
    if count > len(snap.records):
        count, found = 0, []
    found = found + [r for r in snap.records[count:] if r.kind not in _STRUCTURAL]
    snap.memo.setdefault("manifest_candidates", {})[""] = (len(snap.records), found)
    return found


def _chosen_entry(
    cache: dict[str, tuple[Any, Any]],
    unit: Unit,
    option: Option,
    stage: str,
    reason: str,
    coster: Coster,
    scanner: SecretScanner | None,
) -> list[dict[str, Any]]:
    """:func:`_entry` of a chosen unit, built once per (unit, option, stage, reason) and copied for each manifest.

    A long history sends mostly the same units in the same form from one call to the next; the entries depend on
    the unit, the option's fields and the scanner only, so they are cached on the snapshot (all but the utility,
    which changes as the unit ages and is set on each copy).
    """
    key = (
        stage,
        reason,
        option.representation,
        option.tokens,
        option.transform,
        option.turn_tokens,
    )
    hit = cache.get(unit.id)
    if hit is not None:
        owner, (old_key, turns, detail, old_scanner, entries) = hit
        if (
            owner is unit
            and old_key == key
            and turns is option.turns
            and (detail is option.detail or (not detail and not option.detail))
            and old_scanner is scanner
        ):
            return [_copied(e, nested, option.utility) for e, nested in entries]
    built = _entry(unit, option, stage, reason, option.turn_tokens or None, coster, scanner)
    entries = [(e, _nested(e)) for e in built]
    cache[unit.id] = (unit, (key, option.turns, option.detail, scanner, entries))
    return [_copied(e, nested, option.utility) for e, nested in entries]


def _nested(entry: Mapping[str, Any]) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """``(empty lists, other lists and dicts)``: the names of an entry's fields :func:`_copied` copies."""
    empty = tuple(k for k, v in entry.items() if type(v) is list and not v)
    other = tuple(k for k, v in entry.items() if isinstance(v, list | dict) and k not in empty)
    return empty, other


def _copied(entry: dict[str, Any], nested: tuple[Sequence[str], Sequence[str]], utility: float) -> dict[str, Any]:
    """A copy of a manifest entry with this call's ``utility`` (it changes with the unit's age).

    Its lists and dicts (the fields ``nested`` names, :func:`_nested`) are copies too: a manifest may be edited by
    its reader.
    """
    out = dict(entry, utility=utility)
    empty, other = nested
    for name in empty:
        out[name] = []
    for name in other:
        value = entry[name]
        if isinstance(value, list):
            out[name] = [dict(v) if isinstance(v, dict) else v for v in value]
        else:
            out[name] = copy.deepcopy(value)
    return out


def _entry(
    unit: Unit,
    option: Option | None,
    stage: str,
    reason: str,
    known: Sequence[int] | None,
    coster: Coster | None = None,
    scanner: SecretScanner | None = None,
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
                "role": getattr(rec, "role", None) and str(rec.role),
                "external_id": redact_text(rec.external_id, scanner),
                "representation": representation,
                "tokens": turn_tokens.get(rec.id, 0),
                "stage": stage,
                "reason": reason,
                "utility": option.utility if option is not None else None,
                "transform": (option.transform if option is not None else None) or unit.transforms.get(rec.id),
                "source_version": redact_text(getattr(rec, "source_version", None), scanner),
                "locators": record_locators(option, rec.id),
                **_promotion(option, rec.id),
                **_note(option, scanner),
                **_facts(rec),
            }
        )
    return out


def _note(option: Option | None, scanner: SecretScanner | None = None) -> dict[str, Any]:
    note = option.detail.get("note") if option is not None else None
    return {"note": redact_text(str(note), scanner)} if note else {}


def _promotion(option: Option | None, record_id: str) -> dict[str, Any]:
    decision = record_promotion(option, record_id)
    return {"promotion": decision} if decision else {}


def _policy_block(policy: Policy, relevance: str) -> dict[str, Any]:
    """The manifest's ``policy`` block; ``unsafe_without`` only when the policy opts out of a safety stage."""
    block: dict[str, Any] = {"name": policy.name, "version": policy.version, "hash": policy.hash}
    if policy.unsafe_without:
        block["unsafe_without"] = sorted(policy.unsafe_without)
    block["relevance"] = relevance
    return block


def _omitted_entry(
    cache: dict[str, tuple[Any, Any]], rec: Any, why: tuple[str, str, str], scanner: SecretScanner, unit: str | None
) -> tuple[dict[str, Any], str]:
    """The ``omitted`` entry of a record and its canonical JSON, built once per (record, reason, stage, detail, unit).

    ``unit`` is the id of the record's unit (``None`` for a record of no unit of the snapshot, such as another
    branch's). Its ``external_id`` and ``detail`` are redacted with ``scanner`` when the entry is built.

    Records are immutable and most omissions repeat from one call to the next (a long history mostly
    leaves out the same old turns for ``budget``), so the entry and its text are cached on the snapshot;
    each manifest gets its own copy of the entry, and the text lets the manifest be persisted without
    encoding every entry again (:class:`~ctxledger.hashing.EncodedList`).
    """
    hit = cache.get(rec.id)
    if hit is None or hit[0] is not rec or hit[1][0] != why or hit[1][3] is not scanner or hit[1][4] != unit:
        reason, stage, detail = why
        entry = {
            "ref": rec.id,
            "unit": unit,
            "external_id": redact_text(rec.external_id, scanner),
            "reason": reason,
            "stage": stage,
            "detail": redact_text(detail, scanner),
        }
        entry |= _facts(rec)
        hit = cache[rec.id] = (rec, (why, entry, canonical_json(entry), scanner, unit))
    out = dict(hit[1][1])
    if out["sources"]:
        out["sources"] = list(out["sources"])
    return out, hit[1][2]


def _weighed(built: tuple[dict[str, Any], str], options: Mapping[str, Option]) -> tuple[dict[str, Any], str]:
    """An omitted entry with its unit's ``tokens`` and ``utility`` when the unit was left out for budget.

    Both are this call's: the tokens and utility of the option the selection weighed for the whole unit (the
    utility changes with the unit's age, so they are added to each manifest's copy, not cached).
    """
    entry = built[0]
    option = options.get(entry["unit"]) if entry["unit"] is not None else None
    if option is None or entry["reason"] != "budget":
        return built
    entry["tokens"] = option.tokens
    entry["utility"] = option.utility
    return entry, canonical_json(entry)


def _units_of_records(snap: Snapshot) -> dict[str, str]:
    """Record id → id of its unit, for every unit of the snapshot, kept on its memo and extended with new units.

    A late tool result rebuilds the units from the one it joins (:mod:`.snapshot`): when the last unit mapped
    is no longer the snapshot's unit at that position, the map is built again.
    """
    seen, last, unit_of = snap.memo.get("unit of record", (0, None, {}))
    units = snap.units
    if seen and (seen > len(units) or units[seen - 1] is not last):
        seen, unit_of = 0, {}
    if seen < len(units):
        for unit in units[seen:]:
            unit_of.update(dict.fromkeys((r.id for r in unit.records), unit.id))
        snap.memo["unit of record"] = (len(units), units[-1], unit_of)
    return unit_of


def _facts(rec: Any) -> dict[str, Any]:
    """Where a record lives and who may see it (for explanations)."""
    return {
        "kind": rec.kind.value,
        "branch_id": rec.branch_id,
        "seq": rec.seq,
        "visibility": rec.visibility.value,
        "owner": rec.owner_participant_id,
        "trust": rec.trust.value,
        "sources": list(getattr(rec, "source_artifact_ids", ()) or getattr(rec, "source_ids", ()) or ()),
    }
