"""Request inputs that name nothing or do nothing: warnings for the manifest.

An assembly request can name things the graph or the policy does not know: an ``exact_evidence`` id that
is no record of the conversation, a ``participant_id`` no participant record or record owner carries, a
``provider`` the policy and the API contracts never mention. It can also give inputs that have no effect:
``agent``, ``call_type``, ``phase`` or ``checks_passed`` when no working-set contract is bound (e.g. a
policy without contracts), or a ``now`` earlier than records the call still sees. Assembly keeps failing
closed on them exactly as before (an unknown id rehydrates nothing, an unknown participant sees no private
state, scoped data never goes to an unknown provider); :func:`unknown_inputs` only says so, so that a typo
is visible in the manifest's ``warnings`` (and on the command line) instead of passing silently.

Each warning is ``{"code", "input", "value", "detail"}``: ``code`` is ``unknown_exact_evidence``,
``exact_evidence_not_served`` (:func:`unserved_exact_evidence`: a known record whose raw bytes were asked
for but neither read back nor referenced, e.g. an omitted stale memory), ``unknown_participant``,
``unknown_provider``, ``unused_contract_input`` or ``now_before_records``;
``input`` the request field; ``value`` what it named.

A participant may be named by its name: :func:`resolve_participant` turns ``"lead"`` into
``<conversation>/participant/lead`` (the id the recorder and the importers write) when that participant
exists and ``"lead"`` itself is no participant id or record owner.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime
from operator import attrgetter
from typing import Any

from ctxledger.errors import InputError
from ctxledger.policy.stages._common import API_PROVIDERS, request_provider
from ctxledger.records import Participant, Record, ToolMemory


def resolve_participant(request: Any, records: Sequence[Record]) -> Any:
    """The request with a ``participant_id`` given by name replaced by the participant's id.

    ``participant_id`` is kept when it is the id of a participant record or of a record owner, or when no
    participant matches. Otherwise the participant records whose ``name`` is it, or whose id is
    ``<conversation>/participant/<it>``, are looked up: exactly one match replaces it.

    Args:
        request: the :class:`~ctxledger.assemble.assembler.AssemblyRequest`.
        records: every candidate record of the call.

    Returns:
        The request, unchanged or with the resolved ``participant_id``.

    Raises:
        InputError: the name matches several participants (names ``participant_id`` and lists their ids).
    """
    who = request.participant_id
    if who is None or who in _participants(records):
        return request
    by_id = f"{request.conversation_id}/participant/{who}"
    matches = sorted({r.id for r in records if isinstance(r, Participant) and (r.name == who or r.id == by_id)})
    if len(matches) > 1:
        raise InputError(
            f"{who!r} is the name of several participants ({', '.join(matches)}); give the participant's id",
            source="assemble",
            field="participant_id",
        )
    return dataclasses.replace(request, participant_id=matches[0]) if matches else request


def unknown_inputs(
    request: Any, records: Sequence[Record], policy: Any, *, now_given: bool = True
) -> list[dict[str, str]]:
    """Warnings for the request's inputs that match nothing or have no effect (see the module docstring).

    Args:
        request: the :class:`~ctxledger.assemble.assembler.AssemblyRequest`.
        records: every candidate record of the call (the lineage and the conversation's other branches).
        policy: the bound :class:`~ctxledger.policy.base.Policy` (its privacy stage names providers; its
            ``contract`` is the one bound to the call, if any).
        now_given: whether the caller set ``request.now`` (a default clock is never warned about).

    Returns:
        The warnings, in the order exact evidence, participant, provider, contract inputs, clock.
    """
    out: list[dict[str, str]] = []
    asked = request.exact_evidence
    if asked is not True and asked:
        known = _record_names(records)
        for name in dict.fromkeys(str(a) for a in asked):
            if name not in known:
                out.append(
                    _warning(
                        "unknown_exact_evidence",
                        "exact_evidence",
                        name,
                        f"{name!r} is no record id or external id of conversation {request.conversation_id} "
                        "up to the snapshot; nothing was read back for it",
                    )
                )
    who = request.participant_id
    if who is not None and who not in _participants(records):
        out.append(
            _warning(
                "unknown_participant",
                "participant_id",
                who,
                f"no participant record or record owner is {who!r}; it sees no private or shared state",
            )
        )
    provider = request.provider
    if provider == "":
        routed = request_provider(request)
        out.append(
            _warning(
                "unknown_provider",
                "provider",
                provider,
                f"an empty provider name names no provider; the payload was routed as {routed!r}, the "
                f"provider of api {request.api!r}",
            )
        )
    elif provider is not None:
        providers = _providers(records, policy)
        if provider not in providers:
            listed = ", ".join(sorted(providers))
            out.append(
                _warning(
                    "unknown_provider",
                    "provider",
                    provider,
                    f"provider {provider!r} is named by neither the API contracts nor the policy's privacy "
                    f"stage nor any record's provider_scope (known: {listed}); data scoped to a provider "
                    "does not go to it",
                )
            )
    out.extend(_unused_contract_inputs(request, policy))
    if now_given and request.now is not None:
        out.extend(_clock_warnings(request.now, records))
    return out


def _unused_contract_inputs(request: Any, policy: Any) -> list[dict[str, str]]:
    """``agent``, ``call_type``, ``phase``, ``checks_passed`` given while no working-set contract is bound."""
    if policy is None or getattr(policy, "contract", None) is not None:
        return []
    given = [
        (name, value if isinstance(value, str) else ",".join(value))
        for name, value in (
            ("agent", request.agent),
            ("call_type", request.call_type),
            ("phase", request.phase),
            ("checks_passed", request.checks_passed),
        )
        if value
    ]
    if not given:
        return []
    label = f"policy {policy.name}@{policy.version}"
    why = (
        f"{label} has no working-set contracts"
        if not policy.contracts
        else f"no contract of {label} is bound to this call (name the agent and call type of one)"
    )
    return [
        _warning("unused_contract_input", name, value, f"{why}, so {name} {value!r} had no effect")
        for name, value in given
    ]


_CREATED_AT = attrgetter("created_at")


def _clock_warnings(now: datetime, records: Iterable[Record]) -> list[dict[str, str]]:
    """A ``now`` earlier than the newest candidate record's ``created_at``."""
    newest = max((r for r in records if r.created_at is not None), key=_CREATED_AT, default=None)
    if newest is None or now >= newest.created_at:
        return []
    return [
        _warning(
            "now_before_records",
            "now",
            now.isoformat(),
            f"now {now.isoformat()} is earlier than the newest record the call sees ({newest.id}, created "
            f"{newest.created_at.isoformat()}); records are not filtered by time (a snapshot seq does that), "
            "only freshness is judged as of now",
        )
    ]


def unserved_exact_evidence(
    request: Any,
    records: Iterable[Record],
    omitted: Mapping[str, tuple[str, str, str]],
    rehydrations: Iterable[Mapping[str, Any]],
) -> list[dict[str, str]]:
    """Warnings for exact evidence asked by id that no rehydration entry answers.

    Args:
        request: the assembly request (its ``exact_evidence`` ids or external ids).
        records: the call's candidate records.
        omitted: the plan's omissions, record id → ``(reason, stage, detail)``.
        rehydrations: the manifest's rehydration entries (``memory`` and ``artifact`` ids).

    Returns:
        One ``exact_evidence_not_served`` warning per known name whose record was omitted or is not a
        selected memory or its source; unknown names are :func:`unknown_inputs`' to report.
    """
    asked = request.exact_evidence
    if asked is True or not asked:
        return []
    touched = {str(e.get(k)) for e in rehydrations for k in ("memory", "artifact") if e.get(k)}
    ids: dict[str, str] = {}
    for rec in records:
        ids[rec.id] = rec.id
        if rec.external_id:
            ids.setdefault(rec.external_id, rec.id)
    out = []
    for name in dict.fromkeys(str(a) for a in asked):
        rid = ids.get(name)
        if rid is None or rid in touched:
            continue
        why = omitted.get(rid)
        what = f"{rid} was omitted ({why[0]}: {why[2]})" if why else f"{rid} is not a selected memory or its source"
        out.append(
            _warning("exact_evidence_not_served", "exact_evidence", name, f"no raw bytes read back for it: {what}")
        )
    return out


def _warning(code: str, input_name: str, value: str, detail: str) -> dict[str, str]:
    return {"code": code, "input": input_name, "value": value, "detail": detail}


def _record_names(records: Iterable[Record]) -> set[str]:
    """Ids and external ids of the records, and the source artifact ids their memories name."""
    names: set[str] = set()
    for rec in records:
        names.add(rec.id)
        if rec.external_id:
            names.add(rec.external_id)
        if isinstance(rec, ToolMemory):
            names.update(rec.source_artifact_ids)
    return names


def _participants(records: Iterable[Record]) -> set[str]:
    """Participant record ids and every record owner."""
    out: set[str] = set()
    for rec in records:
        if isinstance(rec, Participant):
            out.add(rec.id)
        if rec.owner_participant_id:
            out.add(rec.owner_participant_id)
    return out


def _providers(records: Iterable[Record], policy: Any) -> set[str]:
    """Providers the API contracts, the privacy stage (``allow``, ``routes``) and records' scopes name."""
    known = set(API_PROVIDERS.values())
    stage = policy.stage("privacy") if policy is not None else None
    if stage is not None:
        known.update(k for k in getattr(stage, "allow", {}) if k != "*")
        for origin, targets in getattr(stage, "routes", {}).items():
            known.add(origin)
            known.update(targets)
    known.update(r.provider_scope for r in records if r.provider_scope)
    return known
