"""The assembler: one model call's context from the graph, under a budget and a policy.

Constraints first, relevance second (seed 002 "Primero restricciones, después relevancia"). :func:`assemble` runs
the phases in order, each a module of :mod:`ctxledger.assemble.phases` that takes the previous one's typed result:

0. **reach** (:mod:`.reach`): of the snapshot of the active branch lineage up to ``as_of_seq`` (:mod:`.snapshot`),
   only the units that could enter ``B_input`` are visited; the rest is counted, never visited.
1. **filter** (:mod:`.phases.filter`, :class:`~.phases.filter.Filtered`): the policy's stages write
   :class:`~ctxledger.policy.base.PolicyDecision` s; an omitted record takes its whole unit out (a unit enters whole
   or not at all); assistant turns are attributed to their speakers (:mod:`.speakers`), unsent reasoning dropped,
   redundant units left out.
2. **budget** (:mod:`.phases.budget`, :class:`~.phases.budget.Budgeted`): ``B_input = W − O − M`` (capped by a
   working-set contract); the fixed blocks and every required unit must fit, else
   :class:`~ctxledger.errors.RequiredBlocksDoNotFit` lists them all; a required unit too large to enter verbatim
   is offered as exact excerpts with locators.
3. **select** (:mod:`.phases.select`, :class:`~.phases.select.Selected`): ``utility = w_rel·relevance +
   w_rec·recency + w_kind·prior`` per unit and a multiple-choice knapsack under ``B_dynamic``
   (:mod:`.select`); with ``stable_prefix`` the previous call's selection is grown instead (:mod:`.stability`).
4. **repair** (:mod:`.phases.repair`, :class:`~.phases.repair.Repaired`): room for error evidence, question/answer
   pairs, the preamble and the provider's role order, the required lead's user turn, and fill to
   :data:`FILL_TARGET` of ``B_dynamic``. While the filters or the repairs leave the budget short, the reach widens
   and phases 1–4 run again.
5. **rehydrate** (:mod:`.phases.rehydrate`): raw artifacts of the chosen memories read back, or referenced.
6. **serialize** (:mod:`.phases.serialize`, :class:`~.phases.serialize.Serialized`): instructions first (a stable
   prefix for provider caches), then the chosen units in ``seq`` order; validated against the provider's rules,
   counted on the serialized form, given Anthropic cache breakpoints, hashed.
7. **manifest** (:mod:`.record`): the typed record of what was sent, left out and why (:mod:`ctxledger.manifest`).

The phases' results are kept on :attr:`Assembly.phases` (:class:`PhaseTrace`) for the process that assembled.
"""

from __future__ import annotations

import dataclasses
import math
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ctxledger.assemble import stability
from ctxledger.assemble.costing import Coster
from ctxledger.assemble.phases.budget import (
    REQUIRED_VERBATIM_SHARE,
    Budgeted,
    charge_fixed,
    effective_budget,
    fit_budget,
    oversized_required,
    unit_token_sums,
    unit_turn_costs,
)
from ctxledger.assemble.phases.filter import EMPTY_TURN_NOTE, Filtered, filter_candidates, run_policy
from ctxledger.assemble.phases.rehydrate import rehydrate_chosen
from ctxledger.assemble.phases.repair import FILL_TARGET, Repaired, fill_note, repair_selection, settle
from ctxledger.assemble.phases.select import Selected, relevance_scores, select_units
from ctxledger.assemble.phases.serialize import Serialized, serialize_payload
from ctxledger.assemble.reach import REACH_BUDGETS, Reach, find_reach, widened
from ctxledger.assemble.recall import recalls_in
from ctxledger.assemble.record import ManifestInputs, build_manifest
from ctxledger.assemble.represent import Pointer
from ctxledger.assemble.request import Assembly, AssemblyRequest, new_assembly_request
from ctxledger.assemble.snapshot import Snapshot
from ctxledger.assemble.version import ASSEMBLER_VERSION
from ctxledger.manifest import check_trace
from ctxledger.policy.base import Policy, ReasonCode
from ctxledger.records import Record, ToolArtifact, utcnow
from ctxledger.serialize.base import Serializer
from ctxledger.units import Unit

__all__ = [
    "ASSEMBLER_VERSION",
    "EMPTY_TURN_NOTE",
    "FILL_TARGET",
    "REQUIRED_VERBATIM_SHARE",
    "Assembly",
    "AssemblyRequest",
    "PhaseTrace",
    "assemble",
    "fill_note",
    "new_assembly_request",
    "oversized_required",
    "run_policy",
    "unit_token_sums",
    "unit_turn_costs",
]


@dataclass(frozen=True, slots=True)
class PhaseTrace:
    """The typed result of every phase of one assembly, in order (kept in process on :attr:`Assembly.phases`).

    Attributes:
        reach: the units visited (:mod:`ctxledger.assemble.reach`), after any widening.
        filtered: the filter phase (:class:`~ctxledger.assemble.phases.filter.Filtered`).
        budgeted: the budget phase (:class:`~ctxledger.assemble.phases.budget.Budgeted`).
        selected: the select phase (:class:`~ctxledger.assemble.phases.select.Selected`).
        repaired: the repair phase (:class:`~ctxledger.assemble.phases.repair.Repaired`).
        rehydrations: the rehydrate phase's entries (one per memory it read back or referenced).
        serialized: the serialize phase (:class:`~ctxledger.assemble.phases.serialize.Serialized`).
    """

    reach: Reach
    filtered: Filtered
    budgeted: Budgeted
    selected: Selected
    repaired: Repaired
    rehydrations: list[dict[str, Any]]
    serialized: Serialized


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
    recorded_prefix: stability.RecordedPrefix | None = None,
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
        recorded_prefix: for the replay of a stored assembly, what its manifest's ``prefix`` recorded: the
            previous assembly it grew from and the shared part its breakpoints were placed on
            (:class:`~ctxledger.assemble.stability.RecordedPrefix`); ``None`` for a live call.

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
    if not policy.selection.ladder:
        options_for = redundancy = None
    requested = request.budget()
    budget = effective_budget(request, policy)
    scores = relevance_scores(request, snap, policy)
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
        filtered = filter_candidates(
            request,
            snap,
            rch,
            policy,
            serializer,
            extra_records=extra_records,
            read_blob=read_blob,
            redundancy=redundancy,
            find_artifacts=find_artifacts,
            find_record=find_record,
            now_given=now_given,
        )
        request, plan, units = filtered.request, filtered.plan, filtered.units
        budgeted = fit_budget(budget, units, plan, filtered.tools, snap, coster, options_for)
        if budgeted.short and (reach_budgets := widened(rch, reach_budgets)) is not None:
            continue  # the filters left too little of the reach to fill B_dynamic
        t_policy = time.perf_counter()
        selected = select_units(
            request, requested, snap, rch, scores, units, plan, budgeted, policy, coster, options_for, stored_previous,
            recorded_prefix,
        )
        repaired = repair_selection(request, units, plan, budgeted, selected, policy, coster, options_for)
        reach_budgets = widened(rch, reach_budgets) if repaired.short else None
    settle(filtered.all_units, filtered.pointers, plan, budgeted, selected, repaired)
    result, ledger = selected.result, selected.ledger
    room = budgeted.dynamic + repaired.framing_credit  # the charged framing merged away is room, not tokens sent
    rehydrations = rehydrate_chosen(
        request, policy, plan, filtered.records, repaired.chosen, result, coster, read_blob, room, ledger
    )
    charge_fixed(ledger, budgeted, coster, filtered.tools)
    t_select = time.perf_counter()
    serialized = serialize_payload(
        request,
        budgeted.fixed,
        repaired.chosen,
        result.chosen,
        budgeted.costs,
        filtered.tools,
        plan,
        selected.previous,
        selected.grown,
        serializer,
        coster,
        counter_for_payload,
        recorded_prefix,
    )
    t_end = time.perf_counter()
    turn_refs = [t.ref for t in serialized.turns]
    asm = Assembly(
        f"asm_{uuid.uuid4().hex}",
        serialized.payload,
        serialized.payload_hash,
        serialized.input_tokens,
        turn_refs=turn_refs,
    )
    chosen = [(u, result.chosen[u.id]) for u in repaired.chosen]
    left_for_budget = {
        i.unit_id: i
        for i in selected.items
        if result.omitted.get(i.unit_id) is ReasonCode.BUDGET and i.unit_id not in result.chosen
    }
    asm.manifest = build_manifest(
        ManifestInputs(
            assembly_id=asm.id,
            payload=asm.payload,
            payload_hash=asm.payload_hash,
            input_tokens=asm.input_tokens,
            turn_refs=asm.turn_refs,
            request=request,
            requested=requested,
            budget=budget,
            snap=snap,
            policy=policy,
            coster=coster,
            plan=plan,
            reach=rch,
            records=filtered.records,
            fixed=budgeted.fixed,
            chosen=chosen,
            ledger=ledger,
            budget_options={uid: i.options[0] for uid, i in left_for_budget.items()},
            fill=fill_note(
                budgeted.dynamic,
                chosen,
                left_for_budget.values(),
                coster.merged_framing(serialized.turns) if left_for_budget else 0,
            ),
            timings={
                "graph_query_ms": round(snap.graph_ms, 3),
                "policy_ms": round((t_policy - t0) * 1000, 3),
                "selection_ms": round((t_select - t_policy) * 1000, 3),
                "serialization_ms": round((t_end - t_select) * 1000, 3),
            },
            trace=trace,
            framing_credit=repaired.framing_credit,
        )
    )
    asm.manifest["recalls"] = recalls_in(filtered.records)  # what the model read back with the recall tool, and why
    asm.manifest["prefix"] = serialized.prefix  # what the payload shares with the previous assembly of this branch
    if recorded_prefix is None:  # a replay is not a call: later calls do not grow from it
        stability.remember(snap.memo, selected.stable_key, stability.PreviousAssembly(
            asm.id, snap.seq, {u.id: result.chosen[u.id] for u in repaired.chosen}, serialized.parts,
            serialized.built_messages))  # fmt: skip
    asm.phases = PhaseTrace(rch, filtered, budgeted, selected, repaired, rehydrations, serialized)
    return asm


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
