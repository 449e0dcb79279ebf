"""Request inputs that name nothing: warnings for the manifest (DESIGN §5; new-user report item 15).

An assembly request can name things the graph or the policy does not know: an ``exact_evidence`` id that
is no record of the conversation, a ``participant_id`` no participant record or record owner carries, a
``provider`` the policy and the API contracts never mention. Assembly keeps failing closed on them exactly
as before (an unknown id rehydrates nothing, an unknown participant sees no private state, scoped data never
goes to an unknown provider); :func:`unknown_inputs` only says so, so that a typo is visible in the
manifest's ``warnings`` (and on the command line) instead of passing silently.

Each warning is ``{"code", "input", "value", "detail"}``: ``code`` is ``unknown_exact_evidence``,
``unknown_participant`` or ``unknown_provider``; ``input`` the request field; ``value`` what it named.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from ctxledger.policy.stages._common import API_PROVIDERS, request_provider
from ctxledger.records import Participant, Record, ToolMemory


def unknown_inputs(request: Any, records: Sequence[Record], policy: Any) -> list[dict[str, str]]:
    """Warnings for the request's inputs that match nothing (see the module docstring).

    Args:
        request: the :class:`~ctxledger.assemble.assembler.AssemblyRequest`.
        records: every candidate record of the call (the lineage and the conversation's other branches).
        policy: the bound :class:`~ctxledger.policy.base.Policy` (its privacy stage names providers).

    Returns:
        The warnings, in the order exact evidence, participant, provider.
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
