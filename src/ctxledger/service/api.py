"""The JSON routes under ``/v1`` (every one scoped to the tenant of the request's key)."""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Query, Request, Response

from ctxledger.errors import InputError, RecordNotFound
from ctxledger.policy.secrets_in_bytes import found_in_bytes, secrets_in_range
from ctxledger.records import Conversation
from ctxledger.represent.rehydrate import as_given
from ctxledger.service import manifest_view
from ctxledger.service.auth import request_tenant
from ctxledger.service.explaining import explain_record
from ctxledger.service.import_errors import located
from ctxledger.service.messages import check_events, read_events, write_events
from ctxledger.service.models import (
    Appended,
    AppendMessages,
    Assembled,
    AssembleRequest,
    AssemblySummary,
    ConversationSummary,
    Imported,
    ImportFile,
    Usage,
)
from ctxledger.service.problems import MEDIA_TYPE, problem
from ctxledger.service.state import Service
from ctxledger.service.withheld import Reader, reasons, scanner_of, withheld

Tenant = Annotated[str, Depends(request_tenant)]

router = APIRouter(prefix="/v1")


def _service(request: Request) -> Service:
    return request.app.state.service


def _known_conversation(ledger: Any, tenant: str, conversation_id: str) -> Conversation:
    try:
        conv = ledger.store.get(tenant, conversation_id)
    except RecordNotFound:
        raise RecordNotFound(tenant, conversation_id, what="conversation") from None
    if not isinstance(conv, Conversation):
        raise RecordNotFound(tenant, conversation_id, what="conversation")
    return conv


@router.get("/conversations", summary="List the tenant's conversations")
def list_conversations(request: Request, tenant: Tenant) -> list[ConversationSummary]:
    """Conversations of the key's tenant, oldest first, with their number of records."""

    def run(ledger: Any) -> list[ConversationSummary]:
        out = []
        for cid in ledger.store.conversations(tenant):
            head = ledger.store.get(tenant, cid)
            out.append(
                ConversationSummary(
                    id=cid, events=ledger.store.head_seq(tenant, cid), title=str(getattr(head, "title", "") or "")
                )
            )
        return out

    return _service(request).call(run)


@router.post("/conversations/{conversation_id:path}/messages", status_code=201, summary="Append messages")
def append_messages(request: Request, tenant: Tenant, conversation_id: str, body: AppendMessages) -> Appended:
    """Append OpenAI Chat, Anthropic Messages or Responses-format messages (the conversation is created if new).

    The whole request is checked first and its records are written in one transaction: a bad message
    anywhere writes nothing (not even a new conversation), and the problem names ``messages[i].<field>``.
    """
    events = read_events(body.format, body.messages, body.system)

    def run(ledger: Any) -> Appended:
        kwargs = {"title": body.title} if body.title else {}
        recorder = ledger.recorder(conversation_id, tenant_id=tenant, create=False, **kwargs)
        check_events(events, recorder)
        written = recorder.atomic(lambda rec: write_events(rec, events))
        return Appended(
            conversation_id=conversation_id, records=written, head_seq=ledger.store.head_seq(tenant, conversation_id)
        )

    return _service(request).call(run)


@router.post("/imports", status_code=201, summary="Import a transcript or trajectory file")
def import_file(request: Request, tenant: Tenant, body: ImportFile) -> Imported:
    """Parse and validate a whole file, then write it in one transaction (bad input writes nothing).

    A problem with the file names its ``field``: the record's field at fault, for malformed JSON the JSON path
    where parsing stopped (:mod:`ctxledger.ingest.json_paths`), else ``body.content``
    (:func:`ctxledger.service.import_errors.located`).
    """
    suffix = Path(body.filename).suffix or ".json"
    with tempfile.TemporaryDirectory(prefix="ctxledger-import-") as folder:
        path = Path(folder) / f"{Path(body.filename).stem or 'upload'}{suffix}"
        path.write_text(body.content, encoding="utf-8")

        def run(ledger: Any) -> Any:
            for cid in [body.conversation_id] if body.conversation_id else []:
                try:
                    ledger.store.get(tenant, cid)
                except RecordNotFound:
                    continue
                raise InputError(f"conversation {cid!r} already exists", source=body.filename, field="conversation_id")
            return ledger.import_file(path, body.format, tenant_id=tenant, conversation_id=body.conversation_id)

        try:
            result = _service(request).call(run)
        except InputError as exc:
            raise located(exc) from exc
    return Imported(
        format=result.format or body.format,
        conversation_ids=list(result.conversation_ids),
        records=len(result.records),
    )


@router.post("/conversations/{conversation_id:path}/assemble", summary="Assemble the next model call's context")
def assemble(request: Request, tenant: Tenant, conversation_id: str, body: AssembleRequest) -> Assembled:
    """Assemble under a token budget and persist the manifest; returns the provider payload and the assembly id."""
    fields = body.model_dump(exclude_none=True)
    counter = fields.pop("counter", None)
    for name in ("checks_passed", "tools"):
        if name in fields:
            fields[name] = tuple(fields[name])
    if isinstance(fields.get("exact_evidence"), list):
        fields["exact_evidence"] = tuple(fields["exact_evidence"])

    def run(ledger: Any) -> Any:
        _known_conversation(ledger, tenant, conversation_id)
        return ledger.assemble(conversation_id, tenant_id=tenant, counter=counter, **fields)

    asm = _service(request).call(run)
    m = asm.manifest
    return Assembled(
        assembly_id=asm.id,
        conversation_id=conversation_id,
        payload=asm.payload,
        payload_hash=asm.payload_hash,
        tokens=manifest_view.tokens(m),
        included=len(m.get("included", [])),
        omitted=sum(m["omitted_by_reason"].values()),  # every omitted candidate, without building the trace
    )


def _summary(m: dict[str, Any]) -> AssemblySummary:
    t = manifest_view.tokens(m)
    return AssemblySummary(
        id=m["id"],
        conversation_id=m["conversation_id"],
        snapshot_seq=m.get("snapshot_seq"),
        created_at=m.get("created_at"),
        model=m.get("model"),
        estimated_input=t["estimated_input"],
        observed_input=t["observed_input"],
    )


@router.get("/conversations/{conversation_id:path}/assemblies", summary="List a conversation's assemblies")
def list_assemblies(request: Request, tenant: Tenant, conversation_id: str) -> list[AssemblySummary]:
    """Assemblies of one conversation, oldest first."""

    def run(ledger: Any) -> list[dict[str, Any]]:
        _known_conversation(ledger, tenant, conversation_id)
        return ledger.store.list_assemblies(tenant, conversation_id)

    return [_summary(m) for m in _service(request).call(run)]


@router.get("/assemblies", summary="List the tenant's assemblies")
def list_all_assemblies(request: Request, tenant: Tenant) -> list[AssemblySummary]:
    """Every assembly of the key's tenant, oldest first."""
    return [_summary(m) for m in _service(request).call(lambda ledger: ledger.store.list_assemblies(tenant))]


@router.get("/assemblies/{assembly_id}", summary="Get an assembly's manifest")
def get_assembly(
    request: Request, tenant: Tenant, assembly_id: str, full: Annotated[bool, Query()] = False
) -> dict[str, Any]:
    """The persisted manifest: budget, per-class ledger, included items, omissions summarised by reason.

    With ``full=true`` the full trace is re-derived by replay: every omitted record with its reason, every
    decision and mark, and the payload (a 400 problem says so when the replay is not the same call).
    """
    return _service(request).call(lambda ledger: ledger.get_assembly(assembly_id, tenant_id=tenant, full=full))


@router.get("/assemblies/{assembly_id}/explain/{ref:path}", summary="Explain one record of an assembly")
def explain(request: Request, tenant: Tenant, assembly_id: str, ref: str) -> dict[str, Any]:
    """Why the record ``ref`` (its id, external id, or number within the conversation) was included or omitted.

    Included records are answered from the stored manifest; another record of a summary manifest by one replay
    of the assembly (``status: "unknown"``, ``reason: "replay_mismatch"`` when the replay is not the same call).
    """
    return _service(request).call(lambda ledger: explain_record(ledger, tenant, assembly_id, ref, source="<request>"))


@router.post("/assemblies/{assembly_id}/usage", summary="Record the provider's token usage")
def record_usage(request: Request, tenant: Tenant, assembly_id: str, body: Usage) -> dict[str, Any]:
    """Store what the provider reported; returns the manifest's tokens with the estimate's error."""

    def run(ledger: Any) -> dict[str, Any]:
        ledger.record_usage(
            assembly_id, body.input_tokens, body.output_tokens, tenant_id=tenant, overwrite=body.overwrite
        )
        return dict(ledger.get_assembly(assembly_id, tenant_id=tenant)["tokens"])

    return _service(request).call(run)


_BYTES = {200: {"content": {"application/octet-stream": {}}, "description": "The exact stored bytes."}}


@router.get(
    "/rehydrate/{ref:path}",
    summary="Raw bytes of a tool result, under the hard filters",
    responses={**_BYTES, 403: {"description": "A hard filter withholds it", "content": {MEDIA_TYPE: {}}}},
    response_class=Response,
)
def rehydrate(
    request: Request,
    tenant: Tenant,
    ref: str,
    start: Annotated[int | None, Query(description="First byte (0-based; default 0).")] = None,
    end: Annotated[int | None, Query(description="Byte after the last (default: the end).")] = None,
    participant: Annotated[str | None, Query(description="Reader: a participant id or name.")] = None,
    provider: Annotated[str | None, Query(description="Reader: the provider the bytes go to.")] = None,
) -> Response:
    """The exact raw bytes of a tool artifact (record id or ``sha256:<hex>``) or a message's text, hash-checked.

    Answered only when an assembly of the record's branch for the same reader (``participant``, ``provider``)
    would not withhold the record by a hard filter (privacy, provider scope, visibility, a withheld secret …),
    and the bytes hold no secret (assemblies show such bytes redacted; for a range, no line it overlaps holds one,
    the whole content scanned, so a range cannot cut a key into unrecognised pieces); otherwise 403 names the reason
    (for a secret, its type and line, never its value). For a
    ``sha256:`` ref, at least one record holding those bytes must pass. A range outside the content is refused
    (422, field ``start`` or ``end``: the query parameter at fault) in the words
    :meth:`~ctxledger.ledger.Ledger.rehydrate` gives.
    """
    span = None if start is None and end is None else (start, end)
    reader = Reader(participant_id=participant, provider=provider)

    def run(ledger: Any) -> bytes | str:
        try:
            return read(ledger)
        except InputError as exc:
            raise as_given(exc, span, source="<query>", names=("start", "end")) from None

    def read(ledger: Any) -> bytes | str:
        try:
            refusal = _hard_refusal(ledger, tenant, ref, reader)
        except RecordNotFound:
            ledger.rehydrate(ref, span, tenant_id=tenant)  # a record retention deleted: 410 naming the rule
            raise
        if refusal is not None:
            return refusal
        data: bytes = ledger.rehydrate(ref, span, tenant_id=tenant)
        whole = data if span is None else ledger.rehydrate(ref, None, tenant_id=tenant)
        found = secrets_in_range(whole, span, scanner_of(ledger))
        if found:
            return f"secret ({found_in_bytes(found)}; assemblies redact them; exact bytes are not served)"
        return data

    out = _service(request).call(run)
    if isinstance(out, str):
        return problem(403, "rehydration-refused", "Rehydration refused by the policy", out, field="ref")
    return Response(out, media_type="application/octet-stream")


def _hard_refusal(ledger: Any, tenant: str, ref: str, reader: Reader) -> str | None:
    """Why a hard filter withholds ``ref`` from ``reader`` (``None``: it may be read).

    Raises:
        RecordNotFound: no record (or artifact) of the tenant has that id or hash.
    """
    if ref.startswith("sha256:"):
        holders = ledger.store.artifacts_by_sha256(tenant, ref.removeprefix("sha256:"))
        if not holders:
            raise RecordNotFound(tenant, ref)
    else:
        holders = [ledger.store.get(tenant, ref)]
    why = None
    for rec in holders:
        hidden = withheld(ledger, tenant, rec.conversation_id, reader, branch_id=rec.branch_id)
        why = reasons(hidden, rec.id)
        if why is None:
            return None
    return why


@router.get(
    "/assemblies/{assembly_id}/rehydrate/{ref:path}",
    summary="Raw bytes of an assembly's item, if policy allows",
    responses={**_BYTES, 403: {"description": "The policy forbids it", "content": {MEDIA_TYPE: {}}}},
    response_class=Response,
)
def rehydrate_item(request: Request, tenant: Tenant, assembly_id: str, ref: str) -> Response:
    """An item's raw bytes, only when the assembly's policy would let them in (no hard filter, no secret).

    ``ref`` is a record id or, as for ``explain``, its number or name within the assembly's conversation.
    """

    def run(ledger: Any) -> bytes | str:
        manifest = ledger.get_assembly(assembly_id, tenant_id=tenant, full=True)
        record = manifest_view.candidate_ref(manifest, ref)
        refusal = manifest_view.rehydration_refusal(manifest, record)
        return refusal if refusal is not None else ledger.rehydrate(record, None, tenant_id=tenant)

    out = _service(request).call(run)
    if isinstance(out, str):
        return problem(403, "rehydration-refused", "Rehydration refused by the policy", out, field="ref")
    return Response(out, media_type="application/octet-stream")
