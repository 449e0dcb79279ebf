"""The assembler: one model call's context from the graph, under a budget and a policy.

Pipeline, constraints first and relevance second (seed 002 "Primero restricciones, después relevancia"):

1. **Candidates**: the snapshot of the active branch lineage up to ``as_of_seq`` (:mod:`.snapshot`), of which
   only the units within the budget's reach are visited (:mod:`.reach`); the rest is counted, never visited.
2. **Hard filters and protection**: the policy's stages write :class:`PolicyDecision` s; an omitted
   record takes its whole unit out (a unit enters whole or not at all). In multi-participant
   conversations assistant turns are then attributed to their speakers, and other participants'
   messages relayed as labelled user turns (:mod:`.speakers`).
3. **Budget**: ``B_input = W − O − M``; the fixed blocks (instructions, tool schemas, reply priming)
   and every other required unit must fit, else :class:`RequiredBlocksDoNotFit` lists them all. A
   required tool output whose verbatim form takes more than :data:`REQUIRED_VERBATIM_SHARE` of
   ``B_dynamic`` (a failed call's 40,000-line log) enters as an exact excerpt with locators instead (see
   :func:`oversized_required`), so one huge output cannot block every later call.
4. **Utility and selection** (:mod:`.select`): ``utility = w_rel·relevance + w_rec·recency + w_kind·prior``
   per unit (relevance: stemmed BM25, mixed with semantic similarity when an embedding model is installed
   (:mod:`.semantic`), raised for units written on a date the query names (:mod:`.dates`), spread to
   neighbouring units; relevance-dominant weights when the query is a question outside a tool loop,
   :class:`~ctxledger.policy.base.SelectionParams`), a multiple-choice knapsack under ``B_dynamic`` with
   deterministic ties; with ``stable_prefix`` the previous call's selection is grown instead (:mod:`.stability`).
5. **Role order**: turns recorded before the first user turn are kept (:mod:`.preamble`: as they are for
   OpenAI, as delimited data inside a user turn for Anthropic); other leading optional non-user units (a
   user turn before them left out for budget, case B04) are dropped with ``role_order``.
6. **Serialization**: instructions first (stable prefix for provider caches), then the chosen units in
   ``seq`` order; the payload is validated against the provider's rules, counted on its serialized
   form, given Anthropic cache breakpoints on its stable part (``serialize.anthropic_cache``), and hashed.

The result carries the payload and a manifest (:mod:`ctxledger.manifest`).
"""

from __future__ import annotations

import dataclasses
import math
import operator
import time
import uuid
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import numpy as np

from ctxledger.assemble import stability
from ctxledger.assemble.costing import Coster
from ctxledger.assemble.fill import fill_budget
from ctxledger.assemble.inputs import resolve_participant, unknown_inputs, unserved_exact_evidence
from ctxledger.assemble.lead import anchor_lead
from ctxledger.assemble.pairs import keep_pairs, partners
from ctxledger.assemble.preamble import keep_preamble
from ctxledger.assemble.query import unit_relevance
from ctxledger.assemble.reach import (
    REACH_BUDGETS,
    Reach,
    find_reach,
    unvisited_newer,
    visited_records,
    visited_units,
    widened,
)
from ctxledger.assemble.recall import recalls_in, with_recall_tool
from ctxledger.assemble.record import ManifestInputs, build_manifest
from ctxledger.assemble.relevance import is_question
from ctxledger.assemble.represent import Pointer, charge_savings, omit_redundant, settle_redundant
from ctxledger.assemble.room import anchor_user_turn, make_room_for_errors
from ctxledger.assemble.select import Option, SelectionItem, SelectionResult, select
from ctxledger.assemble.snapshot import Snapshot
from ctxledger.assemble.speakers import attribute_speakers
from ctxledger.assemble.version import ASSEMBLER_VERSION
from ctxledger.budget import DEFAULT_BUDGET, Budget, BudgetLedger, contract_budget
from ctxledger.errors import BudgetItem, ConfigurationError
from ctxledger.hashing import quick_content_hash
from ctxledger.manifest import ManifestView, check_trace
from ctxledger.policy.annotate import annotate, mark_attrs
from ctxledger.policy.base import VERBATIM_REASONS, Outcome, Policy, PolicyDecision, ReasonCode, StageContext
from ctxledger.policy.contracts import expose_tools, tool_name, tool_ref
from ctxledger.policy.rehydration import hard_omission, rehydrate, wanted_memories
from ctxledger.policy.safety import run_stage
from ctxledger.policy.secrets import SPEAKER_WITHHELD, default_scanner, redact_json
from ctxledger.policy.stages.visibility import promoted_records, sees
from ctxledger.records import Message, Record, Role, ToolArtifact, ToolStatus, Visibility, utcnow
from ctxledger.retention.state import META_KEY, SOURCES_KEY, retained, retained_sources
from ctxledger.serialize.anthropic_cache import with_breakpoints
from ctxledger.serialize.base import Serializer, Turn
from ctxledger.serialize.tool_names import request_tool_names, tool_name_map
from ctxledger.units import UNAVAILABLE, ContextClass, Unit, UnitKind, build_units, content_text, drop_thinking

__all__ = ["ASSEMBLER_VERSION", "Assembly", "AssemblyRequest", "assemble", "run_policy"]

FILL_TARGET = 0.95
"""Share of ``B_dynamic`` an assembly uses whenever it leaves something out for budget, or says why not."""

KIND_PRIOR: Mapping[str, float] = {
    UnitKind.INSTRUCTION: 1.0,
    UnitKind.MESSAGE: 0.6,
    UnitKind.TOOL_EXCHANGE: 0.5,
    UnitKind.MEMORY: 0.7,
    UnitKind.COMPACTION: 0.8,
    UnitKind.CHECKPOINT: 0.9,
}
"""Prior utility of a unit by kind (user turns get +0.1, failed tool exchanges +0.3)."""

FILL_FACTOR = 0.25
"""Utility scale of conversation-visible or shared units of other branches: they rank below the lineage's."""

REQUIRED_VERBATIM_SHARE = 1.0
"""A required unit whose verbatim form costs more than this share of ``B_dynamic`` (tokens) is offered only as
exact excerpts (:func:`oversized_required`): the bytes it shows are the stored bytes, with locators to the rest.
``1.0``: only when it cannot fit at all — a required output that fits is sent whole (the agent may need all of
it, e.g. a file it is about to edit), however little room it leaves the rest."""


@dataclass(frozen=True, slots=True)
class AssemblyRequest:
    """What one model call needs.

    Attributes:
        tenant_id, conversation_id: the scope; nothing outside it is ever read.
        branch_id: the active branch (default: the conversation's main branch).
        as_of_seq: snapshot ``seq`` (inclusive); ``None`` = the head.
        participant_id: the participant the call is for (visibility rules).
        model: model name (recorded; selects the counter when not given).
        api: the provider contract: ``openai-chat`` or ``anthropic-messages``.
        window_tokens, output_tokens, margin_tokens: ``W``, ``O``, ``M`` in tokens.
        query: the current goal for relevance (default: the latest user turn's text).
        tools: tool schemas (OpenAI ``tools`` form) overriding those found in the graph.
        provider: the provider the payload goes to (privacy routing; default: implied by ``api``).
        scope: scope labels of the caller (``{"app": …, "user_id": …}``) compared with records' ``scope``.
        agent, call_type: bind the policy's working-set contract for this agent and call type.
        phase: the phase of the run (``investigation``, ``action`` …) for tool exposure.
        checks_passed: checks passed so far (``eligibility``, ``approval`` …); write tools need them.
        now: the request's clock (aware UTC) for freshness; default: the current time.
        exact_evidence: ``True`` (the most relevant selected memory) or ids / external ids of memories or
            artifacts whose raw artifact should be read back if policy allows (rehydration phase two).
        source_versions: current version per source (``{"repo": "d4e5f6"}``); derived records of older
            versions are stale.
    """

    tenant_id: str
    conversation_id: str
    branch_id: str | None = None
    as_of_seq: int | None = None
    participant_id: str | None = None
    model: str = "gpt-4o"
    api: str = "openai-chat"
    window_tokens: int = DEFAULT_BUDGET.window_tokens
    output_tokens: int = DEFAULT_BUDGET.output_tokens
    margin_tokens: int = DEFAULT_BUDGET.margin_tokens
    query: str | None = None
    tools: tuple[Mapping[str, Any], ...] | None = None
    provider: str | None = None
    scope: Mapping[str, str] = field(default_factory=dict)
    agent: str | None = None
    call_type: str | None = None
    phase: str | None = None
    checks_passed: tuple[str, ...] = ()
    now: datetime | None = None
    exact_evidence: bool | tuple[str, ...] = ()
    source_versions: Mapping[str, str] = field(default_factory=dict)

    def budget(self) -> Budget:
        """The :class:`Budget` of this request."""
        return Budget(self.window_tokens, self.output_tokens, self.margin_tokens)


@dataclass(slots=True)
class Assembly:
    """One assembled context: the provider payload and its manifest.

    Attributes:
        id: assembly id (``asm_<uuid>``).
        payload: the provider request body (JSON-able).
        payload_hash: ``"sha256:<hex>"`` of the payload's canonical JSON.
        input_tokens: the payload's tokens counted on its serialized form (an estimate when the counter is one).
        manifest: the manifest (:class:`~ctxledger.manifest.ManifestView`): the persisted record's keys plus
            the full trace (``omitted``, ``candidates``, every decision and mark), built when first read.
    """

    id: str
    payload: dict[str, Any]
    payload_hash: str
    input_tokens: int
    manifest: dict[str, Any] = field(default_factory=dict)
    turn_refs: list[str] = field(default_factory=list)
    """Record id of each turn in payload order (for OpenAI Chat: one per message)."""

    def persisted(self) -> dict[str, Any]:
        """The manifest as the store keeps it (the summary record, or everything with ``trace="full"``)."""
        m = self.manifest
        return m.persisted() if isinstance(m, ManifestView) else dict(m)


@dataclass(slots=True)
class _Plan:
    decisions: list[PolicyDecision]
    omitted: dict[str, tuple[str, str, str]]  # record id -> (reason, stage, detail)
    required: dict[str, str]  # unit id -> protection reason
    marks: dict[str, list[PolicyDecision]] = field(default_factory=dict)  # record id -> mark decisions
    ctx: StageContext | None = None
    extra_records: list[Record] = field(default_factory=list)  # candidates from other branches
    rehydrations: list[dict[str, Any]] = field(default_factory=list)
    tools: dict[str, Any] = field(default_factory=dict)  # {"exposed": [...], "withheld": [...]}


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
) -> _Plan:
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
    plan = _Plan([], {}, {}, marks=ctx.marks, ctx=ctx)
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


def assemble(
    request: AssemblyRequest,
    snap: Snapshot,
    *,
    policy: Policy,
    coster: Coster,
    serializer: Serializer,
    counter_for_payload: Any | None = None,
    options_for: Any | None = None,
    extra_records: Sequence[Record] = (),
    read_blob: Callable[[str], bytes] | None = None,
    redundancy: Callable[[Sequence[Unit], Mapping[str, str]], Mapping[str, str | Pointer]] | None = None,
    find_artifacts: Callable[[str], Sequence[ToolArtifact]] | None = None,
    find_record: Callable[[str], Record | None] | None = None,
    trace: str = "summary",
    stored_previous: Callable[[Any, int], Mapping[str, Any] | None] | None = None,
) -> Assembly:
    """Assemble the context of the next model call.

    Args:
        request: the request (scope, snapshot, budget, API contract).
        snap: the candidate snapshot for ``request`` (from a :class:`SnapshotLoader`).
        policy: the policy whose stages filter and protect (bound here to the request's contract, if any).
        coster: costs turns in tokens (serialized form).
        serializer: builds, validates and counts the provider payload.
        counter_for_payload: counter used to recount the built payload (default: the coster's counter).
        options_for: optional ``(unit, verbatim_option, coster, *, required=False) -> list[Option]`` adding
            cheaper representations of a unit (the representation ladder); default verbatim only. Units whose
            protection reason is in :data:`~ctxledger.policy.base.VERBATIM_REASONS` never get them, except
            that a required unit too large to enter verbatim (:func:`oversized_required`) is offered only
            its excerpts (asked with ``required=True``).
        extra_records: records of the conversation outside the snapshot's lineage (other branches, or an
            ancestor after the fork), up to the snapshot ``seq``: the lineage stage records them as
            branch exclusions, and conversation-visible or shared ones may fill remaining room.
        read_blob: bare-hex sha256 → bytes, for rehydration phase two (and other branches' tool results).
        redundancy: optional ``(live units, required) -> {redundant unit id: kept unit id or Pointer}``
            (:class:`~ctxledger.assemble.represent.Pointer` tells an exact copy from a near-duplicate); those units
            leave as ``redundant`` with a pointer (:func:`~ctxledger.assemble.represent.omit_redundant`), or
            under the kept unit's reason when that unit is not sent either (``settle_redundant``).
            ``options_for`` and ``redundancy`` are ignored when the policy's ``selection.ladder`` is off.
        find_artifacts: bare-hex sha256 → the tool artifacts of ``request.tenant_id`` (and of no other
            tenant) holding those bytes, in any conversation (``GraphStore.artifacts_by_sha256`` bound to the
            tenant). With it the validity stage repairs a memory's broken provenance from the whole tenant
            store, not only from the candidates; a repaired memory rehydrates from the repaired artifact.
        find_record: record id → the record of ``request.tenant_id`` (and of no other tenant) with that id, or
            ``None`` (``GraphStore.get`` bound to the tenant). The privacy and visibility stages look up the
            sources of a derived record that are no candidates with it; without it such sources do not restrict.
        trace: ``"summary"`` (the manifest record keeps the included items and summarised omissions) or
            ``"full"`` (it also keeps every omitted candidate, decision and mark, and the payload).
        stored_previous: ``((api, requested input tokens), seq) -> manifest | None``, the stored assembly a
            prefix-stable selection grows from when none was made in this process (:mod:`.stability`).

    Returns:
        The :class:`Assembly`; its manifest is complete but not yet persisted.

    Raises:
        RequiredBlocksDoNotFit: the fixed and required blocks exceed ``B_input`` (itemised).
        ConfigurationError: the budget leaves no room for input.
        ProviderContractError: the payload would break the provider's message rules (a bug; never sent).
        InputError: ``request.participant_id`` is a name several participants share
            (:func:`~ctxledger.assemble.inputs.resolve_participant`).
    """
    t0 = time.perf_counter()
    check_trace(trace)
    now_given = request.now is not None
    if request.now is None:  # the clock freshness is judged by is part of the request the manifest records
        request = dataclasses.replace(request, now=utcnow())
    policy = policy.for_request(request)
    requested = request.budget()
    budget = _contract_budget(request, policy)
    scores = _relevance(request, snap, policy)
    reach_budgets: float | None = REACH_BUDGETS
    while reach_budgets is not None:  # filter and budget over the reach; widened while it cannot fill B_dynamic
        rch = find_reach(
            snap.units,
            snap.reach_index,
            unit_token_sums(snap, coster),
            budget.input_tokens,
            scores=scores,
            named=_named(request),
            budgets=reach_budgets if _reach_allowed(request, snap) else math.inf,
        )
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
        _mark_unavailable(plan, all_units)
        _mark_retained(plan, all_units)
        units = []
        omitted_ids = plan.omitted.keys()
        for u in all_units:
            if omitted_ids.isdisjoint(u.record_ids):
                units.append(_annotated(u, plan.marks, snap.memo) if plan.marks else u)
                continue
            # the first omitted record (in unit order) gives its reason to the rest of the unit
            cause = next(r for r in u.record_ids if r in plan.omitted)
            first = plan.omitted[cause]
            for rid in u.record_ids:
                if rid not in plan.omitted:
                    plan.omitted[rid] = (
                        first[0],
                        first[1],
                        f"unit {u.id} omitted as a whole with {cause} ({first[0]})",
                    )
        withheld_names = {d.ref for ds in plan.marks.values() for d in ds if d.reason == SPEAKER_WITHHELD}
        units = attribute_speakers(units, records, request.participant_id, withheld_names)
        scanner = getattr(policy.stage("secrets"), "scanner", None) or default_scanner()
        keep_thinking = getattr(serializer, "thinking_types", None) or bool(
            getattr(serializer, "sends_thinking", False)
        )
        units = [
            drop_thinking(u, keep_thinking, lambda text, scanner=scanner: bool(scanner.scan(text)))
            if any(t.thinking for t in u.turns)
            else u
            for u in units
        ]
        if not policy.selection.ladder:
            options_for = redundancy = None
        pointers = redundancy(units, plan.required) if redundancy is not None else {}
        units = omit_redundant(units, pointers, plan.omitted, plan.decisions)
        turn_costs = _turn_costs(snap, coster, units)
        costs = {uid: sum(c) for uid, c in turn_costs.items()}
        fixed, required_units, dynamic, oversized = _check_budget(
            budget, units, plan, turn_costs, coster, tools, options_for
        )
        if _short(units, turn_costs, dynamic) and (reach_budgets := widened(rch, reach_budgets)) is not None:
            continue  # the filters left too little of the reach to fill B_dynamic
        t_policy = time.perf_counter()
        ledger = BudgetLedger(dynamic, policy.selection.class_caps)
        visited_ids = [snap.units[p].id for p in rch.positions]
        relevance = dict(zip(visited_ids, scores[list(rch.positions)].tolist(), strict=True))
        weights = policy.selection.weights(_asks_question(request, units))
        older = {snap.units[p].id: k for p, k in unvisited_newer(rch).items()}
        items = _selection_items(
            units, plan, turn_costs, relevance, policy, coster, options_for, weights, oversized, older
        )
        stable_key = (request.api, requested.input_tokens)
        prev = stability.previous(snap.memo, stable_key, snap.seq)
        if prev is None and policy.selection.stable_prefix and stored_previous is not None:
            prev = stability.from_manifest(stored_previous(stable_key, snap.seq), items)
        stable = prev if policy.selection.stable_prefix else None
        target = stability.target_budget(dynamic, policy.selection.stable_headroom, stable)
        result = select(items, target, ledger)
        grown = stability.grow(stable, items, result, dynamic, policy.selection.class_caps)
        if grown is not None:
            result, ledger = grown
        elif stable is not None and (kept := stability.keep_prefix(stable, items, target, policy.selection.stable_keep,
                                            stability.essentials(items, result))) is not None:  # fmt: skip
            ledger = BudgetLedger(dynamic, policy.selection.class_caps)
            result = select(kept[0], target, ledger)
            result.omitted.update(dict.fromkeys(kept[1], ReasonCode.BUDGET))
        by_id = {u.id: u for u in units}
        if options_for is not None:
            make_room_for_errors(items, result, dynamic, ledger)
            anchor_user_turn(items, result, dynamic, ledger, {u.id: u.role for u in units})
        keep_pairs(units, items, result, dynamic, ledger)  # the manifest's pair warnings: _keep_final_pairs
        for uid, reason in result.omitted.items():
            _omit_unit(plan, by_id[uid], reason, "selection")
        chosen_units = [u for u in units if u.id in result.chosen]
        lead = keep_preamble(
            request.api,
            chosen_units,
            units,
            result.chosen,
            coster,
            ledger,
            dynamic,
            lambda unit, plan=plan: _omit_unit(plan, unit, ReasonCode.BUDGET, "role_order"),
            plan.required,
        )
        chosen_units = [u for u in chosen_units if u.id in result.chosen]
        chosen_units = _fix_role_order(chosen_units, plan, result.chosen, [*required_units, *lead], ledger,
                                       (units, items, dynamic))  # fmt: skip
        chosen_units = _anchor_required_lead(chosen_units, units, items, plan, result.chosen, dynamic, ledger)
        if options_for is not None and stable is None:
            chosen_units = _fill(items, result, chosen_units, by_id, plan, target, ledger, options_for, coster)
            chosen_units = _fix_role_order(chosen_units, plan, result.chosen, [*required_units, *lead], ledger)
        chosen_units, split_pairs = _keep_final_pairs(units, items, result, chosen_units, plan, dynamic, ledger)
        used = sum(o.tokens for o in result.chosen.values())
        left = any(r is ReasonCode.BUDGET for r in result.omitted.values())
        short = used < FILL_TARGET * dynamic and not left  # all it visited entered, and room is left
        reach_budgets = widened(rch, reach_budgets) if short else None
    if plan.ctx is not None:
        plan.ctx.warnings += split_pairs
    settle_redundant(all_units, pointers, {u.id for u in (*fixed, *chosen_units)}, plan.omitted, plan.decisions)
    charge_savings(ledger.saved, result.chosen, costs)
    _rehydrate(request, policy, plan, chosen_units, result, coster, read_blob, dynamic, ledger)
    if plan.ctx is not None:
        plan.ctx.warnings += unserved_exact_evidence(request, records, plan.omitted, plan.rehydrations)
    for unit in fixed:
        ledger.charge(unit.context_class.value, costs[unit.id], required=True)
    framing = _sum_costs(coster, (), tools)  # reply priming and tool schemas: part of F, in no class
    if framing:
        ledger.charge("framing", framing, required=True)
    t_select = time.perf_counter()
    turns = _ordered_turns(fixed, chosen_units, result.chosen)
    payload = serializer.build(turns, model=request.model, tools=tools)
    parts = stability.payload_parts(fixed, chosen_units, result.chosen, costs)
    prefix = {"previous": prev.assembly_id if prev else None, "grown": grown is not None,
              "shared_tokens": stability.shared_prefix_tokens(prev, parts),
              "shared_messages": stability.shared_messages(prev, payload.get("messages") or [])}  # fmt: skip
    built_messages = tuple(payload.get("messages") or ())
    renamed = {k: v for k, v in tool_name_map(request_tool_names(turns, tools)).items() if k != v}
    if renamed:
        plan.tools["renamed"] = renamed
    counter = counter_for_payload or getattr(coster, "counter", None)
    input_tokens = serializer.count(payload, counter) if counter is not None else _sum_costs(coster, turns, tools)
    if request.api == "anthropic-messages":
        payload = with_breakpoints(payload, stable_messages=prefix["shared_messages"],
                                   stable_tokens=prefix["shared_tokens"], input_tokens=input_tokens)  # fmt: skip
        serializer.validate(payload)
    payload_hash = quick_content_hash(payload)
    t_end = time.perf_counter()
    asm = Assembly(f"asm_{uuid.uuid4().hex}", payload, payload_hash, input_tokens, turn_refs=[t.ref for t in turns])
    chosen = [(u, result.chosen[u.id]) for u in chosen_units]
    left_for_budget = {
        i.unit_id: i
        for i in items
        if result.omitted.get(i.unit_id) is ReasonCode.BUDGET and i.unit_id not in result.chosen
    }
    asm.manifest = build_manifest(
        ManifestInputs(
            assembly_id=asm.id,
            payload=payload,
            payload_hash=payload_hash,
            input_tokens=input_tokens,
            turn_refs=asm.turn_refs,
            request=request,
            requested=requested,
            budget=budget,
            snap=snap,
            policy=policy,
            coster=coster,
            plan=plan,
            reach=rch,
            records=records,
            fixed=fixed,
            chosen=chosen,
            ledger=ledger,
            budget_utilities={uid: i.options[0].utility for uid, i in left_for_budget.items()},
            fill=fill_note(dynamic, chosen, left_for_budget.values()),
            timings={
                "graph_query_ms": round(snap.graph_ms, 3),
                "policy_ms": round((t_policy - t0) * 1000, 3),
                "selection_ms": round((t_select - t_policy) * 1000, 3),
                "serialization_ms": round((t_end - t_select) * 1000, 3),
            },
            trace=trace,
        )
    )
    asm.manifest["recalls"] = recalls_in(records)  # what the model read back with the recall tool, and why
    asm.manifest["prefix"] = prefix  # what the payload shares with the previous assembly of this branch
    stability.remember(snap.memo, stable_key, stability.PreviousAssembly(
        asm.id, snap.seq, {u.id: result.chosen[u.id] for u in chosen_units}, parts, built_messages))  # fmt: skip
    return asm


def fill_note(dynamic: int, chosen: Sequence[tuple[Unit, Option]], left_out: Iterable[SelectionItem]) -> str | None:
    """Why less than :data:`FILL_TARGET` of ``B_dynamic`` is used although units were left out for budget.

    ``None`` when nothing was left out for budget or the target is met; otherwise a sentence with the
    tokens left and the cheapest form of any unit left out (none fits the room left, or a class cap or the
    role order kept it out).
    """
    left = list(left_out)
    used = sum(o.tokens for _, o in chosen)
    if not left or dynamic <= 0 or used >= FILL_TARGET * dynamic:
        return None
    room = dynamic - used
    cheapest = min(o.tokens for i in left for o in i.options)
    share = f"{used} of {dynamic} tokens of B_dynamic used ({used / dynamic:.0%}), {room} left"
    if cheapest > room:
        return f"{share}: the cheapest form of any unit left out for budget takes {cheapest} tokens"
    return f"{share}: units that would fit were kept out by class caps or the provider's role order"


def _redact_tools(tools: Sequence[Mapping[str, Any]], plan: _Plan, policy: Policy) -> tuple[Mapping[str, Any], ...]:
    """The tool schemas with every string holding a secret redacted, for schemas marked ``secret_redacted``.

    The secrets stage marks a schema by its :func:`~ctxledger.policy.contracts.tool_ref`; its scanner (the
    policy's ``secrets`` stage, else the default one) finds the strings again here. The redacted schemas are
    what is costed, sent, and stored with the manifest's payload.
    """
    marked = {d.ref for ds in plan.marks.values() for d in ds if d.reason == "secret_redacted"}
    if not any(tool_ref(i, t) in marked for i, t in enumerate(tools)):
        return tuple(tools)
    scanner = getattr(policy.stage("secrets"), "scanner", None) or default_scanner()
    return tuple(redact_json(t, scanner) if tool_ref(i, t) in marked else t for i, t in enumerate(tools))


def _mark_retained(plan: _Plan, units: Sequence[Unit]) -> None:
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


def _mark_unavailable(plan: _Plan, units: Sequence[Unit]) -> None:
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


def _contract_budget(request: AssemblyRequest, policy: Policy) -> Budget:
    """The request's budget, with ``B_input`` capped by the bound contract's allocation (seed 001 ledger)."""
    return contract_budget(request.budget(), policy.contract.max_input_tokens if policy.contract is not None else None)


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


def _named(request: AssemblyRequest) -> tuple[str, ...]:
    """Record ids or external ids the request names as exact evidence."""
    asked = request.exact_evidence
    return tuple(str(a) for a in asked) if asked is not True and asked else ()


def _reach_allowed(request: AssemblyRequest, snap: Snapshot) -> bool:
    """Whether a reach may leave units unvisited: not when a check of the request's inputs reads every record.

    A participant or provider named by no record the reach is sure to hold (participant records, the API
    contracts) is looked for among all records, so every unit is visited.
    """
    who = request.participant_id
    if who is not None and who not in snap.reach_index.loose:
        return False
    return request.provider in (None, "openai", "anthropic")


def _short(units: Sequence[Unit], turn_costs: Mapping[str, tuple[int, ...]], dynamic: int) -> bool:
    """Whether the live units after the filters cost less than ``B_dynamic``: too few to fill it."""
    live = 0
    for unit in units:
        if unit.kind is not UnitKind.INSTRUCTION:
            live += sum(turn_costs[unit.id])
            if live >= dynamic:
                return False
    return True


def _annotated(unit: Unit, marks: Mapping[str, Sequence[PolicyDecision]], memo: dict[Any, Any]) -> Unit:
    """:func:`~ctxledger.policy.annotate.annotate`, cached on the snapshot per (unit object, its marks).

    Rendering marks (every tool result is delimited as data) is pure in the unit and the decisions about
    its records, and those repeat from one call to the next; the same annotated unit object comes back,
    so its token costs are cached too (:func:`_turn_costs`).
    """
    if marks.keys().isdisjoint(unit.record_ids):
        return unit
    mine = tuple((rid, tuple(marks[rid])) for rid in unit.record_ids if rid in marks)
    table = memo.setdefault("annotated", {})
    hit = table.get(unit.id)
    if hit is not None and hit[0] is unit and hit[1] == mine:
        return hit[2]  # type: ignore[no-any-return]
    out = annotate(unit, marks)
    table[unit.id] = (unit, mine, out)
    return out


def _turn_costs(snap: Snapshot, coster: Coster, units: Sequence[Unit]) -> dict[str, tuple[int, ...]]:
    """Per-turn costs of each unit: the snapshot's cache for its own units, else counted.

    Others (annotated by a mark, or from another branch) are counted once per unit object and coster and
    kept on the snapshot's memo.
    """
    own = unit_turn_costs(snap, coster)
    at = snap.reach_index.unit_of
    others = snap.memo.setdefault(("turn_costs", coster.counter_id), {})
    out: dict[str, tuple[int, ...]] = {}
    missing: list[Unit] = []
    for unit in units:
        pos = at.get(unit.id)
        if pos is not None and pos < len(own) and snap.units[pos] is unit:
            out[unit.id] = own[pos]
            continue
        cached = others.get(unit.id)
        if cached is not None and cached[0] is unit:
            out[unit.id] = cached[1]
        else:
            missing.append(unit)
    if missing:  # one read and one write of the store's count table, not one per turn
        coster.prefetch([t for u in missing for t in u.turns])
    for unit in missing:
        out[unit.id] = tuple(coster.turn_tokens(t) for t in unit.turns)
        others[unit.id] = (unit, out[unit.id])
    return {u.id: out[u.id] for u in units}


def _rehydrate(
    request: AssemblyRequest,
    policy: Policy,
    plan: _Plan,
    chosen: Sequence[Unit],
    result: Any,
    coster: Coster,
    read_blob: Callable[[str], bytes] | None,
    dynamic: int,
    ledger: BudgetLedger,
) -> None:
    """Rehydration phase two (:mod:`ctxledger.policy.rehydration`) on the selected memories."""
    if plan.ctx is None:
        return
    query = request.query if request.query is not None else _latest_user_text(chosen)
    repairs = plan.ctx.repairs
    targets = wanted_memories(request, chosen, query, plan.ctx.record, repairs)
    if not targets:
        return
    current = {u.id: result.chosen[u.id].tokens for u in targets}
    remaining = dynamic - sum(o.tokens for o in result.chosen.values())
    rplan = rehydrate(
        request,
        policy,
        targets,
        plan.ctx.record,
        read_blob,
        coster.turn_tokens,
        current,
        remaining,
        repairs,
        lambda rid: mark_attrs(plan.marks.get(rid, ())),
        _hidden(plan.ctx, request.participant_id),
        hard_omission(plan.omitted, plan.decisions),
    )
    plan.rehydrations = rplan.entries
    for unit in targets:
        old = result.chosen[unit.id]
        turns = rplan.turns[unit.id]
        turn_tokens = tuple(coster.turn_tokens(t) for t in turns)
        representation = rplan.representation[unit.id]
        step = "rehydrated" if representation == "rehydrated" else "reference_hint"
        marked = unit.transforms.get(unit.records[0].id)  # e.g. provenance_repaired, stale_marked
        transform = f"{marked}+{step}" if marked else step
        result.chosen[unit.id] = Option(
            representation, sum(turn_tokens), old.utility, turns, transform, {}, turn_tokens
        )
        ledger.charge(unit.context_class.value, sum(turn_tokens) - old.tokens)


def _hidden(ctx: StageContext, who: str | None) -> Callable[[str], bool]:
    """Record id → whether the visibility rules withhold it from ``who`` (by visibility and promotion).

    Rehydration asks this before reading a private artifact back, so a promoted artifact comes back exactly
    for the promotion's audience, and never for someone an earlier stage's omission hid the question from.
    """
    promoted = promoted_records(ctx, who)

    def hidden(rid: str) -> bool:
        rec = ctx.record(rid)
        return rec is None or not sees(rec, who, promoted)

    return hidden


def unit_turn_costs(snap: Snapshot, coster: Coster) -> list[tuple[int, ...]]:
    """Per-turn token costs of every unit of the snapshot (cached on the snapshot per coster)."""
    cached = snap.costs.setdefault(coster.counter_id, [])
    if len(cached) < len(snap.units):
        todo = snap.units[len(cached) :]
        coster.prefetch([t for u in todo for t in u.turns])
        cached.extend(tuple(coster.turn_tokens(t) for t in u.turns) for u in todo)
    return cached


def unit_token_sums(snap: Snapshot, coster: Coster) -> list[int]:
    """Running sums of the units' verbatim tokens: entry ``i`` is the tokens of units ``0 … i-1`` (cached)."""
    costs = unit_turn_costs(snap, coster)
    sums = snap.token_sums.setdefault(coster.counter_id, [0])
    for cost in costs[len(sums) - 1 :]:
        sums.append(sums[-1] + sum(cost))
    return sums


def _check_budget(
    budget: Budget,
    units: Sequence[Unit],
    plan: _Plan,
    turn_costs: Mapping[str, tuple[int, ...]],
    coster: Coster,
    tools: Sequence[Mapping[str, Any]],
    options_for: Any,
) -> tuple[list[Unit], list[Unit], int, dict[str, list[Option]]]:
    """Check that the fixed blocks and the required units fit ``B_input``; return them and ``B_dynamic``.

    Returns:
        ``(fixed units, required units, B_dynamic, oversized)``: ``oversized`` maps the required units
        too large to enter verbatim to their excerpt options (:func:`oversized_required`).

    Raises:
        RequiredBlocksDoNotFit: itemised, each required unit at its cheapest allowed form.
    """
    costs = {uid: sum(c) for uid, c in turn_costs.items()}
    fixed = [u for u in units if u.kind is UnitKind.INSTRUCTION]
    required = [u for u in units if u.id in plan.required and u.kind is not UnitKind.INSTRUCTION]
    blocks = [BudgetItem("request", "reply priming", coster.base_tokens())]
    if tools:
        blocks.append(BudgetItem("tools", f"{len(tools)} tool schemas", coster.tools_tokens(tools)))
    blocks += [BudgetItem(u.id, "instruction", costs[u.id]) for u in fixed]
    fixed_tokens = sum(b.tokens for b in blocks)
    dynamic = budget.input_tokens - fixed_tokens
    oversized = oversized_required(required, plan.required, turn_costs, coster, dynamic, options_for)
    for u in required:
        cheapest = costs[u.id]
        if u.id in oversized:
            cheapest = min(o.tokens for o in oversized[u.id])
        elif options_for is not None and plan.required[u.id] not in VERBATIM_REASONS:
            alternatives = options_for(u, _verbatim(u, costs[u.id]), coster)
            cheapest = min([cheapest, *(o.tokens for o in alternatives)])
        ext = _external(u)
        blocks.append(BudgetItem(u.id if ext is None else f"{u.id} ({ext})", plan.required[u.id], cheapest))
    budget.check_required(blocks)
    return fixed, required, dynamic, oversized


def oversized_required(
    required: Sequence[Unit],
    reasons: Mapping[str, str],
    turn_costs: Mapping[str, tuple[int, ...]],
    coster: Coster,
    dynamic: int,
    options_for: Any,
) -> dict[str, list[Option]]:
    """The required units too large to enter verbatim, each with the excerpts it may enter as instead.

    A required unit (a failed call not yet followed by a success, the step being continued …) whose verbatim
    form costs more than :data:`REQUIRED_VERBATIM_SHARE` of ``B_dynamic`` (all of it) would make every later
    call fail with ``RequiredBlocksDoNotFit``. Such a unit is offered only as the representation ladder's *excerpts*
    (exact bytes: head, tail and the error lines with their neighbours, plus locators to rehydrate the
    rest): an excerpt of exact bytes is not a summary, and extractions, memories and references are not
    offered for it. Each excerpt's ``detail["note"]`` says that the verbatim form did not fit (the manifest
    shows it).

    Units stay verbatim, and the budget check decides, when their protection reason is in
    :data:`~ctxledger.policy.base.VERBATIM_REASONS` (the latest user turn, constraints, approvals,
    ``retry_critical`` …: case B15 wants a user turn that cannot fit to fail loudly, never to be cut), when
    they have no large text to excerpt (long tool-call arguments), or when the ladder is off.

    Args:
        required: the required non-instruction units.
        reasons: unit id → protection reason.
        turn_costs: unit id → verbatim tokens per turn.
        coster: this assembly's coster.
        dynamic: ``B_dynamic`` in tokens.
        options_for: the representation ladder (called with ``required=True``); ``None`` → no excerpts.

    Returns:
        unit id → excerpt options (their utility is the rung factor; the caller scales it); units that stay
        verbatim are absent.
    """
    out: dict[str, list[Option]] = {}
    if options_for is None:
        return out
    limit = REQUIRED_VERBATIM_SHARE * max(dynamic, 0)
    for unit in required:
        per_turn = turn_costs[unit.id]
        tokens = sum(per_turn)
        if tokens <= limit or reasons.get(unit.id) in VERBATIM_REASONS:
            continue
        verbatim = Option("verbatim", tokens, 1.0, unit.turns, turn_tokens=per_turn)
        excerpts = [o for o in options_for(unit, verbatim, coster, required=True) if o.representation == "excerpt"]
        if not excerpts:
            continue
        note = (
            f"required, but its verbatim form ({tokens} tokens) does not fit B_dynamic ({dynamic} tokens): "
            "entered as an exact excerpt of the stored bytes; the locators rehydrate the rest"
        )
        out[unit.id] = [dataclasses.replace(o, detail={**o.detail, "note": note}) for o in excerpts]
    return out


def _external(unit: Unit) -> str | None:
    ids = [r.external_id for r in unit.records if r.external_id]
    return ",".join(ids) if ids else None


def _verbatim(unit: Unit, tokens: int) -> Option:
    return Option("verbatim", tokens, 1.0, unit.turns)


_CLASS_NAMES = {c: c.value for c in ContextClass}


def _selection_items(
    units: Sequence[Unit],
    plan: _Plan,
    turn_costs: Mapping[str, tuple[int, ...]],
    relevance: Mapping[str, float],
    policy: Policy,
    coster: Coster,
    options_for: Any,
    weights: tuple[float, float, float] | None = None,
    oversized: Mapping[str, Sequence[Option]] | None = None,
    unvisited_newer: Mapping[str, int] | None = None,
) -> list[SelectionItem]:
    """One selection item per dynamic unit; a unit's age counts the newer units, the unvisited ones too."""
    params = policy.selection
    w_relevance, w_recency, w_kind = weights or params.weights(False)
    dynamic = [u for u in units if u.kind is not UnitKind.INSTRUCTION]
    half_life = params.recency_half_life
    required_ids = plan.required
    newer = unvisited_newer or {}
    items = []
    for age, unit in enumerate(reversed(dynamic)):
        uid = unit.id
        if newer:
            age += newer.get(uid, 0)
        score = relevance.get(uid)
        utility = w_relevance * (score or 0.0) + w_recency * 0.5 ** (age / half_life) + w_kind * _kind_prior(unit)
        if score is None:  # from another branch: it only fills what the lineage leaves
            utility *= FILL_FACTOR
        costs = turn_costs[uid]
        verbatim = Option("verbatim", sum(costs), round(utility, 9), unit.turns, turn_tokens=costs)
        options = [verbatim]
        required = uid in required_ids
        if oversized and uid in oversized:  # too large to enter verbatim: exact excerpts only
            options = [dataclasses.replace(o, utility=round(utility * o.utility, 9)) for o in oversized[uid]]
        elif options_for is not None and not (required and required_ids[uid] in VERBATIM_REASONS):
            options += options_for(unit, verbatim, coster)
        items.append(
            SelectionItem(
                uid, unit.seq, _CLASS_NAMES[unit.context_class], options, required, required and len(options) == 1
            )
        )
    return items


def _relevance_by_id(request: AssemblyRequest, snap: Snapshot, policy: Policy | None = None) -> dict[str, float]:
    """Relevance (normalised to [0, 1]) of the snapshot's units; other branches' units score 0."""
    scores = _relevance(request, snap, policy)
    return {u.id: float(scores[i]) for i, u in enumerate(snap.units)}


def _relevance(request: AssemblyRequest, snap: Snapshot, policy: Policy | None = None) -> np.ndarray:
    """Relevance of each unit to the query with the policy's signals (:func:`unit_relevance`), over the max."""
    query = request.query if request.query is not None else _latest_user_text(snap.units)
    selection = policy.selection if policy is not None else None
    return unit_relevance(query, snap.index, snap.vectors, snap.facets, len(snap.units), selection)


def _asks_question(request: AssemblyRequest, units: Sequence[Unit]) -> bool:
    """The weight rule of :class:`SelectionParams`: the query is a question and no tool loop is under way."""
    dynamic = [u for u in units if u.kind is not UnitKind.INSTRUCTION]
    if dynamic and dynamic[-1].kind is UnitKind.TOOL_EXCHANGE:
        return False
    query = request.query if request.query is not None else _latest_user_text(units)
    return bool(query) and is_question(query)


def _latest_user_text(units: Sequence[Unit]) -> str:
    for u in reversed(units):
        rec = u.records[0]
        if u.kind is UnitKind.MESSAGE and isinstance(rec, Message) and rec.role is Role.USER:
            return content_text(rec.content)
    return ""


def _kind_prior(unit: Unit) -> float:
    prior = KIND_PRIOR[unit.kind]
    if unit.role == "user" and not unit.turns[0].relayed:  # another participant's turn is no user turn
        prior += 0.1
    if unit.kind is UnitKind.TOOL_EXCHANGE and unit.status is not None and unit.status is not ToolStatus.SUCCEEDED:
        prior += 0.3
    return min(prior, 1.0)


def _omit_unit(plan: _Plan, unit: Unit, reason: ReasonCode, stage: str) -> None:
    for rid in unit.record_ids:
        plan.omitted.setdefault(rid, (str(reason), stage, "" if rid == unit.id else f"unit {unit.id}"))


def _fix_role_order(
    chosen: list[Unit],
    plan: _Plan,
    options: dict[str, Option],
    required: Sequence[Unit],
    ledger: BudgetLedger,
    live: tuple[Sequence[Unit], Sequence[SelectionItem], int] | None = None,
) -> list[Unit]:
    """Anchor or drop leading optional units until the first non-instruction turn is a user turn (case B04).

    With ``live`` (the live units, the selection items, ``B_dynamic``), a leading optional unit first tries
    to stay behind the user message before it (:func:`~ctxledger.assemble.lead.anchor_lead`: room made from
    lower-utility units only); otherwise it is dropped. The ledger gets the tokens of what leaves back, so
    ``used`` stays what the payload carries.
    """
    required_ids = {u.id for u in required}
    while chosen and chosen[0].role != "user" and chosen[0].id not in required_ids:
        items = {i.unit_id: i for i in live[1]} if live is not None else {}
        found = anchor_lead(chosen, live[0], items, options, live[2], required_ids, ledger) if live else None
        if found is not None:
            for unit in found.displaced:
                ledger.charge(unit.context_class.value, -options.pop(unit.id).tokens)
                _omit_unit(plan, unit, ReasonCode.BUDGET, "role_order")
            for rid in found.unit.record_ids:
                plan.omitted.pop(rid, None)
            options[found.unit.id] = found.option
            ledger.charge(found.unit.context_class.value, found.option.tokens)
            return [found.unit, *(u for u in chosen if u not in found.displaced)]
        unit = chosen.pop(0)
        dropped = options.pop(unit.id, None)
        if dropped is not None:
            ledger.charge(unit.context_class.value, -dropped.tokens)
        _omit_unit(plan, unit, ReasonCode.ROLE_ORDER, "role_order")
    return chosen


def _fill(
    items: Sequence[SelectionItem],
    result: SelectionResult,
    chosen: list[Unit],
    by_id: Mapping[str, Unit],
    plan: _Plan,
    dynamic: int,
    ledger: BudgetLedger,
    options_for: Any,
    coster: Coster,
) -> list[Unit]:
    """The fill phase (:func:`~ctxledger.assemble.fill.fill_budget`) after role order: the chosen units, grown.

    Only units after the first chosen one may enter: the payload still opens with the same user turn, and
    no unit the role-order repair dropped is left stranded behind an older one. Half of a question/answer
    pair enters only with the other half. The admitted units' records leave the omissions.
    """
    lead = chosen[0].seq if chosen else None
    admitted = fill_budget(
        items,
        result,
        dynamic,
        ledger,
        lambda i: options_for(by_id[i.unit_id], i.options[0], coster, required=True),
        FILL_TARGET,
        allowed=lambda i: lead is not None and i.seq > lead,
        partners=partners(list(by_id.values())),
    )
    for uid in admitted:
        for rid in by_id[uid].record_ids:
            plan.omitted.pop(rid, None)
    return sorted([*chosen, *(by_id[uid] for uid in admitted)], key=lambda u: u.seq)


def _keep_final_pairs(
    units: Sequence[Unit],
    items: Sequence[SelectionItem],
    result: SelectionResult,
    chosen: list[Unit],
    plan: _Plan,
    dynamic: int,
    ledger: BudgetLedger,
) -> tuple[list[Unit], list[dict[str, str]]]:
    """The pair rule (:func:`~ctxledger.assemble.pairs.keep_pairs`) on the final inclusion set.

    Preamble carrying, role-order repair, the required lead's anchor and fill all run after the first pair
    pass and change what is included, so the pairs are checked again on what the payload carries: a missing
    half that fits the room left enters (its records leave the omissions), and the warnings name the pairs
    that stay split. Admitting a question or an answer keeps the payload's first turn a user turn.

    Returns:
        ``(the chosen units in seq order, the pair warnings)``.
    """
    before = set(result.chosen)
    warnings = keep_pairs(units, items, result, dynamic, ledger)
    admitted = [u for u in units if u.id in result.chosen and u.id not in before]
    if not admitted:
        return chosen, warnings
    for unit in admitted:
        for rid in unit.record_ids:
            plan.omitted.pop(rid, None)
    return sorted([*chosen, *admitted], key=lambda u: u.seq), warnings


def _anchor_required_lead(
    chosen: list[Unit],
    units: Sequence[Unit],
    items: Sequence[SelectionItem],
    plan: _Plan,
    options: dict[str, Option],
    budget_tokens: int,
    ledger: BudgetLedger,
) -> list[Unit]:
    """When a *required* non-user unit leads the history, admit the newest user turn before it.

    Anthropic's Messages API requires the first message to come from the user and ctxledger never invents
    one, so the user turn that led to the required step (e.g. an unresolved tool call) is brought in, with
    room made by leaving out the oldest optional chosen units (``budget``). If no user turn precedes it, or
    it cannot fit, nothing changes (OpenAI Chat accepts an assistant-first history; the Anthropic serializer
    then refuses with a ProviderContractError naming the turn).
    """
    if not chosen or chosen[0].role == "user":
        return chosen
    lead = chosen[0]
    before = [u for u in units if u.role == "user" and u.kind is UnitKind.MESSAGE and u.seq < lead.seq]
    if not before:
        return chosen
    anchor = before[-1]
    item = next(i for i in items if i.unit_id == anchor.id)
    option = min(item.options, key=lambda o: (o.tokens, -o.utility))
    used = sum(o.tokens for o in options.values())
    droppable = [u for u in chosen if u.id not in plan.required]
    freed: list[Unit] = []
    while used + option.tokens > budget_tokens and droppable:
        unit = droppable.pop(0)
        freed.append(unit)
        used -= options[unit.id].tokens
    if used + option.tokens > budget_tokens:
        return chosen
    for unit in freed:
        ledger.charge(unit.context_class.value, -options.pop(unit.id).tokens)
        _omit_unit(plan, unit, ReasonCode.BUDGET, "role_order")
    for rid in anchor.record_ids:
        plan.omitted.pop(rid, None)
    options[anchor.id] = option
    ledger.charge(anchor.context_class.value, option.tokens)
    plan.required.setdefault(anchor.id, "turn_anchor")
    return sorted([anchor, *(u for u in chosen if u not in freed)], key=lambda u: u.seq)


def _ordered_turns(fixed: Sequence[Unit], chosen: Sequence[Unit], options: Mapping[str, Option]) -> list[Turn]:
    turns = [t for u in sorted(fixed, key=lambda u: u.seq) for t in u.turns]
    for unit in sorted(chosen, key=lambda u: u.seq):
        turns.extend(options[unit.id].turns)
    return turns


def _sum_costs(coster: Coster, turns: Sequence[Turn], tools: Sequence[Mapping[str, Any]]) -> int:
    return coster.base_tokens() + coster.tools_tokens(tools) + sum(coster.turn_tokens(t) for t in turns)


def new_assembly_request(**kwargs: Any) -> AssemblyRequest:
    """Build an :class:`AssemblyRequest`, raising ``ConfigurationError`` on unknown fields."""
    try:
        return AssemblyRequest(**kwargs)
    except TypeError as exc:
        raise ConfigurationError(str(exc)) from exc
