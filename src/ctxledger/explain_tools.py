"""What an assembly did with a skill state: the record whose tool schemas a call sends.

A :class:`~ctxledger.records.SkillState` is no candidate of selection (it is not history): the newest one on
the active branch's lineage that holds tool schemas gives the call its ``tools`` (part of the fixed blocks
``F``), unless the request names its own tools, and a working-set contract may withhold some of them.
:func:`explain_skill_state` answers for such a record in the shape of :func:`ctxledger.manifest.explain`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ctxledger.errors import InputError, RecordNotFound
from ctxledger.policy.contracts import tool_name
from ctxledger.records import Record, SkillState, ToolArtifact, ToolCall
from ctxledger.serialize.call_ids import call_id_map
from ctxledger.store.base import GraphStore, LineageHop


def check_ref(ref: object, *, source: str = "explain", field: str = "ref") -> str:
    """``ref`` when it is a non-empty record id string.

    Raises:
        InputError: ``ref`` is not a non-empty string (``None``, a number …); names ``field`` and what it must be.
    """
    if not isinstance(ref, str) or not ref.strip():
        raise InputError(
            f"must be a record id string (e.g. 'chat-1/7', the number within the conversation '7', or an "
            f"external id), got {ref!r}",
            source=source,
            field=field,
        )
    return ref


def ref_candidates(manifest: Mapping[str, Any], ref: str) -> tuple[str, ...]:
    """The ids ``ref`` may stand for in the assembly's conversation: itself, then ``<conversation>/<ref>``.

    A ref that already starts with the conversation id stands only for itself. This is how every ``explain``
    (library, CLI, service, MCP) completes a short reference such as ``7``.
    """
    prefix = f"{manifest['conversation_id']}/"
    return (ref,) if ref.startswith(prefix) else (ref, prefix + ref)


def resolve_ref(store: GraphStore, manifest: Mapping[str, Any], ref: str, *, source: str = "explain") -> str:
    """The id of the record of the assembly's conversation that ``ref`` names.

    ``ref`` is read as a record id, then ``<conversation>/<ref>`` (:func:`ref_candidates`), then an external id,
    then a tool call id as the assembly's payload shows it (:func:`sent_call_ids`: a repeated provider id gets a
    ``_2``, ``_3`` … suffix there), then a provider tool call id as recorded (``call_…``). Reads one record, or the
    conversation's records when the ref is no record id.

    Raises:
        RecordNotFound: no record of the conversation has that id, external id or call id (``among`` names the
            conversation, and the other conversation of the tenant whose record ``ref`` names, if any; a short ref
            such as ``7`` is named completed, ``<conversation>/7``).
        InputError: ``ref`` is a provider call id that several tool calls share and the assembly's payload does
            not show (field ``ref``; real traces reuse them): name one by its record id.
    """
    tenant, conversation = manifest["tenant_id"], manifest["conversation_id"]
    candidates = ref_candidates(manifest, ref)
    elsewhere = None
    for candidate in candidates:
        try:
            record = store.get(tenant, candidate)
        except RecordNotFound:
            continue
        if record.conversation_id == conversation:
            return record.id
        elsewhere = elsewhere or record.conversation_id
    records = store.records(tenant, conversation)
    named = [r.id for r in records if r.external_id == ref]
    if len(named) == 1:
        return named[0]
    shown = sent_call_ids(manifest, records).get(ref)
    if shown is not None:
        return shown
    calls = [r.id for r in records if isinstance(r, ToolCall) and r.call_id == ref] or [
        r.id for r in records if isinstance(r, ToolArtifact) and r.call_id == ref
    ]
    if len(calls) > 1:
        raise InputError(
            f"tool call id {ref!r} is shared by {len(calls)} tool calls ({', '.join(calls)}); name one by its "
            "record id",
            source=source,
            field="ref",
        )
    if calls:
        return calls[0]
    if named:
        raise InputError(
            f"external id {ref!r} is shared by {len(named)} records ({', '.join(named)}); name one by its record id",
            source=source,
            field="ref",
        )
    among = f"the records of conversation {conversation} (of assembly {manifest['id']})"
    if elsewhere is not None:
        among += f": it is a record of conversation {elsewhere}"
    raise RecordNotFound(tenant, ref if "/" in ref or elsewhere else candidates[-1], among=among)


def sent_call_ids(manifest: Mapping[str, Any], records: Sequence[Record]) -> dict[str, str]:
    """The tool call ids the assembly's payload shows, each mapped to its tool call's record id.

    Every serializer makes a request's call ids valid and unique (:func:`ctxledger.serialize.call_ids.call_id_map`:
    a repeated id gets the first free ``_2``, ``_3`` … suffix); this replays that mapping over the tool calls of
    ``manifest["included"]`` in their order, reading each one's recorded ``call_id`` from ``records`` (the
    conversation's records). An id shown unchanged maps too.
    """
    by_id = {r.id: r for r in records}
    used: set[str] = set()
    out: dict[str, str] = {}
    for entry in manifest.get("included") or ():
        call = by_id.get(entry.get("ref"))
        if isinstance(call, ToolCall):
            out[call_id_map([call.call_id], used)[call.call_id]] = call.id
    return out


def explain_skill_state(store: GraphStore, manifest: Mapping[str, Any], ref: str) -> dict[str, Any] | None:
    """Why the call of ``manifest`` did or did not send the tool schemas of the skill state ``ref``.

    Returns:
        ``None`` when ``ref`` is no skill state of the assembly's conversation; else an answer with the keys
        of :func:`ctxledger.manifest.explain`: ``status`` ``included`` (stage ``fixed``, reason
        ``tool_schemas``: sent as the request's tools, ``detail`` naming the tools exposed and withheld) or
        ``omitted`` with the reason: ``not_in_lineage`` (another branch, or written after the snapshot),
        ``no_tool_schemas`` (it names skills or tools but holds no schema), ``request_tools`` (the request
        sent its own tools), ``superseded`` (a newer skill state supplies them) or ``out_of_contract`` (the
        working-set contract withheld every one of its tools).
    """
    tenant = manifest["tenant_id"]
    try:
        record = store.get(tenant, ref)
    except RecordNotFound:
        return None
    if not isinstance(record, SkillState) or record.conversation_id != manifest["conversation_id"]:
        return None
    names = [tool_name(t) for t in record.tool_schemas]
    status, stage, reason, detail = _decide(store, manifest, record, names)
    policy = manifest["policy"]
    what = f"skill state {record.id}" + (f" ({record.external_id})" if record.external_id else "")
    named = (("skills", record.skills), ("tool profiles", record.tool_profiles))
    enables = "".join(f"; {label} {', '.join(v)}" for label, v in named if v)
    holds = f"holds {len(names)} tool schema(s){enables}" if names else f"holds no tool schema{enables}"
    chain = [
        f"{'included' if status == 'included' else 'omitted'} {what}",
        holds,
        f"under policy {policy['name']} version {policy['version']} ({policy['hash'][:19]})",
        f"sent as {detail}" if status == "included" else f"left out by stage {stage}: {reason} ({detail})",
    ]
    return _answer(record, manifest, (status, stage, reason, detail), chain)


def _answer(
    record: Record, manifest: Mapping[str, Any], why: tuple[str, str, str, str], chain: list[str]
) -> dict[str, Any]:
    """An answer in the shape of :func:`ctxledger.manifest.explain` for ``record``, which no manifest entry lists.

    ``why`` is ``(status, stage, reason, detail)``; ``chain`` the sentences saying it.
    """
    status, stage, reason, detail = why
    policy = manifest["policy"]
    return {
        "ref": record.id,
        "external_id": record.external_id,
        "status": status,
        "stage": stage,
        "reason": reason,
        "unit": None,
        "representation": "tool_schemas" if status == "included" else None,
        "tokens": None,
        "utility": None,
        "transform": None,
        "locators": [],
        "branch_id": record.branch_id,
        "policy": f"{policy['name']}@{policy['version']} ({policy['hash'][:19]})",
        "decisions": [],
        "marks": [],
        "rehydrations": [],
        "detail": detail,
        "note": None,
        "chain": chain,
    }


def explain_after_snapshot(store: GraphStore, manifest: Mapping[str, Any], ref: str) -> dict[str, Any] | None:
    """The answer for a record written after the assembly's snapshot, which the assembly could not see.

    Returns:
        ``None`` when ``ref`` (a record id of the assembly's conversation) was written at or before
        ``snapshot_seq``; else an answer with the keys of :func:`ctxledger.manifest.explain`: ``status``
        ``omitted``, stage ``lineage``, reason ``not_in_lineage`` (as a skill state written after the snapshot),
        ``detail`` "written at seq N, after the snapshot (seq M)".
    """
    try:
        record = store.get(manifest["tenant_id"], ref)
    except RecordNotFound:
        return None
    seq = manifest["snapshot_seq"]
    if record.seq <= seq:
        return None
    detail = f"written at seq {record.seq}, after the snapshot (seq {seq})"
    what = f"{record.kind.value} {record.id}" + (f" ({record.external_id})" if record.external_id else "")
    chain = [
        f"omitted {what}",
        f"assembly {manifest['id']} read the conversation as of seq {seq}",
        f"left out by stage lineage: not_in_lineage ({detail}); an assembly made later may consider it",
    ]
    return _answer(record, manifest, ("omitted", "lineage", "not_in_lineage", detail), chain)


def _decide(
    store: GraphStore, manifest: Mapping[str, Any], record: SkillState, names: list[str]
) -> tuple[str, str, str, str]:
    """``(status, stage, reason, detail)`` for the skill state ``record`` in the call of ``manifest``."""
    seq, active = manifest["snapshot_seq"], manifest["branch_id"]
    lineage = [LineageHop(h["branch_id"], h.get("max_seq")) for h in manifest.get("lineage") or ()]
    hop = next((h for h in lineage if h.branch_id == record.branch_id), None)
    if record.seq > seq:
        return "omitted", "lineage", "not_in_lineage", f"written at seq {record.seq}, after the snapshot (seq {seq})"
    if hop is None or (hop.max_seq is not None and record.seq > hop.max_seq):
        return (
            "omitted",
            "lineage",
            "not_in_lineage",
            (f"on branch {record.branch_id}, outside the lineage of the active branch {active}"),
        )
    if not names:
        return "omitted", "tools", "no_tool_schemas", "only tool schemas are sent, and it holds none"
    asked = (manifest.get("request") or {}).get("tools")
    if asked:
        return (
            "omitted",
            "tools",
            "request_tools",
            (f"the request named its own {len(asked)} tool schema(s), which replace the conversation's"),
        )
    later = store.records(
        manifest["tenant_id"], record.conversation_id, lineage=lineage, as_of_seq=seq, after_seq=record.seq
    )
    newer = next((r for r in reversed(later) if isinstance(r, SkillState) and r.tool_schemas), None)
    if newer is not None:
        return "omitted", "tools", "superseded", f"the newer skill state {newer.id} supplies the tool schemas"
    tools = manifest.get("tools") or {}
    withheld = [w for w in tools.get("withheld") or () if w.get("name") in names]
    exposed = [n for n in tools.get("exposed") or () if n in names]
    held = ", ".join(f"{w['name']} ({w['reason']})" for w in withheld)
    if not exposed:
        return "omitted", "tools", "out_of_contract", f"the working-set contract withheld every tool of it: {held}"
    renamed = tools.get("renamed") or {}
    sent = [f"{n} (named {renamed[n]} for the provider)" if n in renamed else n for n in exposed]
    detail = "the call's tool schemas (part of the fixed blocks F): " + ", ".join(sent)
    return (
        "included",
        "fixed",
        "tool_schemas",
        detail + (f"; withheld by the working-set contract: {held}" if held else ""),
    )


_NEVER_SENT = {
    "model_run": "describes a model call (model, usage, timing); it is kept for audits and never sent to a model",
    "participant": "describes who takes part; it shapes visibility and speaker names and is never sent itself",
    "branch": "describes a branch of the conversation; it decides the lineage and is never sent itself",
    "conversation": "describes the conversation itself; it is never sent",
}
"""Record kinds that are never a context candidate, and why (what ``explain`` says of them)."""


def never_a_candidate(store: GraphStore, manifest: Mapping[str, Any], ref: str) -> str | None:
    """Why ``ref`` (a record id, or an id relative to the conversation) can be no candidate of any assembly.

    Returns:
        ``"record ID is a KIND: WHY"`` for a record of the assembly's conversation whose kind never enters a
        context (a model run, participant, branch or the conversation), else ``None``.
    """
    tenant, conversation = manifest["tenant_id"], manifest["conversation_id"]
    for candidate in (ref, f"{conversation}/{ref}"):
        try:
            record = store.get(tenant, candidate)
        except RecordNotFound:
            continue
        why = _NEVER_SENT.get(record.kind.value)
        if why is not None and record.conversation_id == conversation:
            return f"record {record.id} is a {record.kind.value}: it {why}, so no assembly includes or omits it"
    return None
