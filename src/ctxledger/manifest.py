"""The manifest of one assembly, and the answers operators ask of it.

DESIGN §5; seed 000 "Registrar qué vio el modelo"; seed 004 §4.4.

A manifest is a JSON-able dict persisted for every assembly. Its top-level keys:

* ``id``, ``tenant_id``, ``conversation_id``, ``branch_id``, ``snapshot_seq``, ``created_at``;
* ``policy`` ``{name, version, hash[, unsafe_without]}`` (``unsafe_without``: the safety stages the policy
  deliberately leaves out, present only when it leaves any out), ``assembler_version``, ``counter``
  ``{id, is_estimate}``, ``model``, ``api``;
* ``request``: the rest of what the call asked for — ``now`` (the clock freshness was judged by, ISO 8601),
  ``provider``, ``query``, ``agent``, ``call_type``, ``phase``, ``checks_passed``, ``exact_evidence``,
  ``scope``, ``source_versions`` — so the assembly can be reproduced; every free-text value among them is
  stored with the lines holding a secret replaced (:func:`~ctxledger.policy.secrets.redact`), so a secret
  passed as ``query=`` never reaches the store;
* ``budget`` ``{window, output, margin, input, fixed, dynamic}`` (tokens) and ``ledger`` (per class
  ``{cap, used, required}``, and ``saved_by_transform``: tokens each representation transform saved
  against verbatim);
* ``candidates``: every candidate record id; ``included``: ``{ref, unit, kind, role, external_id,
  representation, tokens, stage, reason, utility, transform, locators[, promotion]}`` (``locators``:
  where an excerpt, extraction or reference of the record points in its exact bytes, empty for
  verbatim; ``promotion``: the decision that turned an artifact into the memory shown; ``note``: present
  when a required unit entered as an exact excerpt because its verbatim form did not fit); ``omitted``:
  ``{ref, unit, external_id, reason, stage, detail}`` (a ``redundant`` one's detail names the kept
  unit); every candidate is in exactly one of the two;
* ``omitted_by_reason`` / ``omitted_by_stage``: counts of omitted candidates (branch, visibility, budget …
  exclusions counted apart, seed 004 §4.10 and §8 R10);
* ``decisions``: every policy decision ``{ref, stage, outcome, reason, detail}``; ``marks``: the ``mark``
  decisions (stale, conflict, secret_redacted, delimit …), which changed how a record was shown;
* ``rehydrations``: phase-two decisions on raw artifacts of selected memories ``{memory, artifact, sha256,
  bytes, decision: rehydrated | reference, reason, revalidation_tool[, repaired_from]}`` (``repaired_from``:
  the broken source id when the validity stage repaired the memory's provenance with ``artifact``);
* ``tools`` ``{exposed, withheld}`` (tool exposure by phase and checks); ``lineage`` (the branch hops);
  ``contract``: the working-set contract bound, if any;
* ``warnings``: inputs that named nothing or had no effect, ``{code, input, value, detail}``
  (``unknown_exact_evidence``, ``unknown_participant``, ``unknown_provider``, ``unused_contract_input``,
  ``now_before_records`` (:mod:`ctxledger.assemble.inputs`), ``unknown_promoted_record``,
  ``promotion_not_owned`` (the visibility stage)); empty when every input was known and used;
* ``tokens`` ``{estimated_input, replay, saved, observed_input, observed_output, error}``;
* ``timings`` (milliseconds), ``turn_refs`` (record id of each turn in payload order),
  ``payload_hash`` and ``payload``.

**No secret is stored.** Besides the request's free text, every value the manifest copies from records or
inputs is redacted line by line with the policy's secret scanner (the ``secrets`` stage's, else the default):
entries' ``external_id``, ``source_version``, ``detail`` and ``note``; decisions' and marks' ``detail``;
warnings' ``value`` and ``detail``; rehydrations' ``reason`` and ``revalidation_tool``; tool names; the
``model``, ``provider`` and ``participant_id``. Omitted entries, decisions and marks are redacted once,
when their cached entry is built (:class:`~ctxledger.hashing.EncodedList`), never by scanning the manifest.

The same policy on the same snapshot selects the same items and yields the same ``payload_hash``; ids,
``created_at`` and timings differ between runs and are not part of that promise.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from ctxledger.assemble.represent import record_locators, record_promotion
from ctxledger.errors import RecordNotFound
from ctxledger.hashing import EncodedList, canonical_json
from ctxledger.policy.secrets import SecretScanner, default_scanner, redact_text

if TYPE_CHECKING:
    from ctxledger.assemble.assembler import Assembly, AssemblyRequest, _Plan
    from ctxledger.assemble.costing import Coster
    from ctxledger.assemble.select import Option
    from ctxledger.assemble.snapshot import Snapshot
    from ctxledger.assemble.units import Unit
    from ctxledger.budget import Budget, BudgetLedger
    from ctxledger.policy.base import Policy, PolicyDecision

_STRUCTURAL = {"conversation", "branch", "participant", "model_run", "skill_state"}


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
    scanner = policy_scanner(policy)
    costs = snap.costs[coster.counter_id]
    position = {u.id: i for i, u in enumerate(snap.units)}
    replay = sum(sum(c) for c in costs)
    tools = request.tools if request.tools is not None else snap.tool_schemas
    replay += coster.base_tokens() + coster.tools_tokens(tools)
    included = [
        _entry(u, None, "fixed", "instruction", costs[position[u.id]] if u.id in position else None, coster, scanner)
        for u in fixed
    ]
    for unit, option in chosen:
        required = plan.required.get(unit.id)
        stage, reason = ("protection", required) if required else ("selection", "selected")
        included.extend(_entry(unit, option, stage, reason, option.turn_tokens or None, coster, scanner))
    included = [e for group in included for e in (group if isinstance(group, list) else [group])]
    included_refs = {e["ref"] for e in included}
    omitted, candidates = _omitted(snap, plan, included_refs, scanner)
    by_reason = Counter(e["reason"] for e, _ in omitted)
    by_stage = Counter(e["stage"] for e, _ in omitted)
    return {
        "id": asm.id,
        "tenant_id": request.tenant_id,
        "conversation_id": request.conversation_id,
        "branch_id": snap.branch_id,
        "snapshot_seq": snap.seq,
        "created_at": datetime.now(UTC).isoformat(),
        "policy": _policy_block(policy),
        "assembler_version": _assembler_version(),
        "counter": {"id": coster.counter_id, "is_estimate": coster.is_estimate},
        "model": redact_text(request.model, scanner),
        "api": request.api,
        "participant_id": redact_text(request.participant_id, scanner),
        "request": _request_facts(request, scanner),
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
        "omitted": EncodedList((e for e, _ in omitted), [t for _, t in omitted]),
        "omitted_by_reason": dict(sorted(by_reason.items())),
        "omitted_by_stage": dict(sorted(by_stage.items())),
        "decisions": _encoded(snap, "manifest_decisions", plan.decisions, _decision_entry, scanner),
        "marks": _encoded(snap, "manifest_marks", [d for ds in plan.marks.values() for d in ds], _mark_entry, scanner),
        "rehydrations": [_redacted(r, _REHYDRATION_TEXT, scanner) for r in plan.rehydrations],
        "tools": _redacted_names(plan.tools, scanner),
        "lineage": [{"branch_id": h.branch_id, "max_seq": h.max_seq} for h in snap.lineage],
        "contract": policy.contract.as_dict() if policy.contract is not None else None,
        "warnings": [_redacted(w, _WARNING_TEXT, scanner) for w in plan.ctx.warnings] if plan.ctx is not None else [],
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

    Free-text values (provider, query, agent, call type, phase, checks, evidence ids, scope and source
    versions) are redacted with ``scanner`` (default: the default scanner): the manifest is stored, and a
    secret never is.
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
        "scope": {k: redact_text(v, scanner) for k, v in request.scope.items()},
        "source_versions": {k: redact_text(v, scanner) for k, v in request.source_versions.items()},
    }


def _omitted(
    snap: Snapshot, plan: _Plan, included: set[str], scanner: SecretScanner
) -> tuple[list[tuple[dict[str, Any], str]], list[str]]:
    """The omitted entries (with their canonical JSON) in candidate order, and the candidate ids.

    Candidates are the non-structural records of the snapshot, then those of other branches.
    """
    records = _candidate_records(snap)
    cache = snap.memo.setdefault("manifest_omitted", {})
    if not plan.extra_records:  # walk the candidates in order: no sort needed
        omitted = [
            _omitted_entry(cache, rec, why, scanner)
            for rec in records
            if (why := plan.omitted.get(rec.id)) is not None and rec.id not in included
        ]
        return omitted, [r.id for r in records]
    candidates = [r.id for r in records] + [r.id for r in plan.extra_records if r.kind.value not in _STRUCTURAL]
    cand_pos = {ref: i for i, ref in enumerate(candidates)}
    by_id = {r.id: r for r in [*snap.records, *plan.extra_records]}
    entries = (
        _omitted_entry(cache, by_id[ref], why, scanner)
        for ref, why in plan.omitted.items()
        if ref not in included and ref in cand_pos
    )
    return sorted(entries, key=lambda e: cand_pos[e[0]["ref"]]), candidates


def _decision_entry(d: PolicyDecision, scanner: SecretScanner) -> dict[str, Any]:
    detail = redact_text(d.detail, scanner)
    return {"ref": d.ref, "stage": d.stage, "outcome": d.outcome.value, "reason": str(d.reason), "detail": detail}


def _mark_entry(d: PolicyDecision, scanner: SecretScanner) -> dict[str, Any]:
    return {"ref": d.ref, "stage": d.stage, "reason": d.reason, "detail": redact_text(d.detail, scanner)}


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
    found = found + [r for r in snap.records[count:] if r.kind.value not in _STRUCTURAL]
    snap.memo.setdefault("manifest_candidates", {})[""] = (len(snap.records), found)
    return found


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


def _policy_block(policy: Policy) -> dict[str, Any]:
    """The manifest's ``policy`` block; ``unsafe_without`` only when the policy opts out of a safety stage."""
    block: dict[str, Any] = {"name": policy.name, "version": policy.version, "hash": policy.hash}
    if policy.unsafe_without:
        block["unsafe_without"] = sorted(policy.unsafe_without)
    return block


def _omitted_entry(
    cache: dict[str, tuple[Any, Any]], rec: Any, why: tuple[str, str, str], scanner: SecretScanner
) -> tuple[dict[str, Any], str]:
    """The ``omitted`` entry of a record and its canonical JSON, built once per (record, reason, stage, detail).

    Its ``external_id`` and ``detail`` are redacted with ``scanner`` when the entry is built.

    Records are immutable and most omissions repeat from one call to the next (a long history mostly
    leaves out the same old turns for ``budget``), so the entry and its text are cached on the snapshot;
    each manifest gets its own copy of the entry, and the text lets the manifest be persisted without
    encoding every entry again (:class:`~ctxledger.hashing.EncodedList`).
    """
    hit = cache.get(rec.id)
    if hit is None or hit[0] is not rec or hit[1][0] != why or hit[1][3] is not scanner:
        reason, stage, detail = why
        entry = {
            "ref": rec.id,
            "external_id": redact_text(rec.external_id, scanner),
            "reason": reason,
            "stage": stage,
            "detail": redact_text(detail, scanner),
        }
        entry |= _facts(rec)
        hit = cache[rec.id] = (rec, (why, entry, canonical_json(entry), scanner))
    out = dict(hit[1][1])
    if out["sources"]:
        out["sources"] = list(out["sources"])
    return out, hit[1][2]


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
        ``{ref, status, stage, reason, unit, representation, tokens, utility, transform, locators,
        branch_id, policy, decisions, marks, rehydrations, detail, note, chain}``: for an included record the stage that
        admitted it (``fixed``, ``protection`` or ``selection``) with its utility and tokens; for an
        omitted one the reason code and the stage. ``chain`` reads memory → artifact → branch → policy version → stage
        as sentences (seed 004 §4.4).

    Raises:
        RecordNotFound: ``ref`` was not a candidate of this assembly.
    """
    status, entry = find_entry(manifest, ref)
    rid = entry["ref"]
    decisions = [d for d in manifest.get("decisions", []) if d["ref"] in (rid, entry.get("unit"))]
    marks = [m for m in manifest.get("marks", []) if m["ref"] == rid]
    rehydrations = [r for r in manifest.get("rehydrations", []) if rid in (r["memory"], r["artifact"])]
    policy = manifest["policy"]
    out = {
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
        "locators": entry.get("locators", []),
        "branch_id": entry.get("branch_id", manifest["branch_id"]),
        "policy": f"{policy['name']}@{policy['version']} ({policy['hash'][:19]})",
        "decisions": decisions,
        "marks": marks,
        "rehydrations": rehydrations,
        "detail": entry.get("detail", ""),
        "note": entry.get("note"),
    }
    out["chain"] = _chain(manifest, status, entry, marks, rehydrations)
    return out


def _chain(
    manifest: Mapping[str, Any],
    status: str,
    entry: Mapping[str, Any],
    marks: Sequence[Mapping[str, Any]],
    rehydrations: Sequence[Mapping[str, Any]],
) -> list[str]:
    """The explanation as a chain of sentences: record → sources → branch → visibility → policy → stage."""
    policy = manifest["policy"]
    what = f"{entry.get('kind', 'record')} {entry['ref']}" + (
        f" ({entry['external_id']})" if entry.get("external_id") else ""
    )
    chain = [("included " if status == "included" else "omitted ") + what]
    if entry.get("sources"):
        chain.append("derived from " + ", ".join(entry["sources"]))
    chain.append(_branch_sentence(manifest, entry))
    if entry.get("visibility"):
        who = manifest.get("participant_id") or "an anonymous caller"
        chain.append(f"visibility {entry['visibility']} (owner {entry.get('owner') or 'none'}), requested for {who}")
    chain.append(f"under policy {policy['name']} version {policy['version']} ({policy['hash'][:19]})")
    if status == "included":
        how = f"admitted by stage {entry['stage']} ({entry['reason']}) as {entry.get('representation')}"
        if entry.get("utility") is not None:
            how += f", utility {entry['utility']}"
        chain.append(how + f", {entry.get('tokens')} tokens")
        if entry.get("note"):
            chain.append(entry["note"])
        if entry.get("locators"):
            spans = ", ".join(f"bytes {loc['byte_start']}:{loc['byte_end']}" for loc in entry["locators"][:4])
            more = f" (+{len(entry['locators']) - 4} more)" if len(entry["locators"]) > 4 else ""
            fetch = f"all of it: ctxledger rehydrate {entry['ref']}"
            chain.append(f"shown by {entry.get('transform')}: {spans}{more}; {fetch}")
    else:
        chain.append(
            f"left out by stage {entry['stage']}: {entry['reason']}"
            + (f" ({entry['detail']})" if entry.get("detail") else "")
        )
    chain += [f"marked {m['reason']} by {m['stage']}: {m['detail']}" for m in marks]
    for r in rehydrations:
        if r["decision"] == "rehydrated":
            chain.append(
                f"raw artifact {r['artifact']} rehydrated ({r['bytes']} bytes, sha256 {str(r['sha256'])[:12]})"
            )
        else:
            why = r["reason"] + (f" ({r['detail']})" if r.get("detail") else "")
            chain.append(f"raw artifact {r['artifact']} not rehydrated: {why}; a reference was included")
    if status == "included" and entry.get("kind") == "tool_memory" and not rehydrations:
        chain.append("raw artifact not rehydrated: the compact memory was sufficient (no exact evidence asked)")
    return chain


def _branch_sentence(manifest: Mapping[str, Any], entry: Mapping[str, Any]) -> str:
    branch = entry.get("branch_id") or manifest["branch_id"]
    if branch == manifest["branch_id"]:
        return f"on the active branch {branch}"
    active = manifest["branch_id"]
    for hop in manifest.get("lineage", []):
        if hop["branch_id"] == branch:
            seq, last = entry.get("seq"), hop["max_seq"]
            if isinstance(seq, int) and last is not None and seq > last:
                return (
                    f"on branch {branch} after the active branch {active} forked from it "
                    f"(seq {seq} > {last}), so not inherited"
                )
            return f"inherited from branch {branch} (up to seq {last}) by the active branch {active}"
    outside = f"from branch {branch}, outside the lineage of the active branch {active}"
    if entry.get("visibility") in ("conversation", "shared"):
        outside += f" ({entry['visibility']}-visible: may fill room the lineage leaves)"
    return outside
