"""The MCP tools over one ledger and one tenant (see the package docstring)."""

from __future__ import annotations

import re
from collections import Counter
from typing import Any

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError

from ctxledger.errors import CtxledgerError, InputError, RecordNotFound
from ctxledger.ledger import Ledger
from ctxledger.records import Compaction, Message, ToolMemory
from ctxledger.represent.rehydrate import as_given
from ctxledger.service import manifest_view as mv
from ctxledger.service.explaining import explain_record
from ctxledger.service.withheld import Reader, reasons, redact, scanner_of, withheld

MAX_TEXT = 20_000
"""Longest text (characters) a tool answers with; longer rehydrations are cut and say so."""

_WORD = re.compile(r"\w+", re.UNICODE)


def _record_text(rec: Any) -> str:
    if isinstance(rec, Message):
        content = rec.content
        if isinstance(content, str):
            return content
        return " ".join(str(p.get("text", "")) for p in content or () if isinstance(p, dict))
    if isinstance(rec, ToolMemory):
        return rec.summary
    if isinstance(rec, Compaction):
        return rec.text
    return ""


def _score(text: str, words: set[str]) -> int:
    """How many of ``words`` occur in ``text`` (case-insensitive, whole words)."""
    counts = Counter(w.lower() for w in _WORD.findall(text))
    return sum(counts[w] > 0 for w in words)


def search_history(
    ledger: Ledger,
    tenant: str,
    query: str,
    conversation_id: str | None = None,
    limit: int = 10,
    *,
    reader: Reader | None = None,
    branch_id: str | None = None,
) -> list[dict[str, Any]]:
    """Records of ``tenant`` whose text holds the words of ``query``, best first (count of matching words).

    Only records an assembly for ``reader`` could show are searched: whatever a hard filter of the policy
    withholds (:func:`ctxledger.service.withheld.withheld`: another branch, another participant's private
    state, audit-only records, a privacy class or provider scope the reader's provider may not receive,
    withheld secrets …) is left out, and secrets in the text shown are redacted (a record is found only by
    words of its redacted text, so a query cannot test a guessed secret). Each conversation is read
    on its main branch, or on ``branch_id`` when one conversation is searched.

    ``reader`` defaults to ``Reader()``: no participant, the provider of ``openai-chat``.

    Returns:
        Up to ``limit`` (1-100) hits ``{ref, conversation_id, kind, score, text}`` (text: 500 characters).

    Raises:
        RecordNotFound: ``conversation_id`` (or ``branch_id``) is not one of the tenant's.
        InputError: ``branch_id`` without ``conversation_id``.
    """
    if branch_id is not None and conversation_id is None:
        raise InputError("a branch belongs to one conversation: give conversation_id too", field="branch_id")
    words = {w.lower() for w in _WORD.findall(query)}
    if not words:
        return []
    conversations = ledger.store.conversations(tenant)
    if conversation_id is not None:
        if conversation_id not in conversations:
            raise RecordNotFound(tenant, conversation_id, what="conversation")
        conversations = [conversation_id]
    reader = reader or Reader()
    scanner = scanner_of(ledger)
    hits = []
    for cid in conversations:
        hidden = withheld(ledger, tenant, cid, reader, branch_id=branch_id)
        for rec in ledger.store.records(tenant, cid):
            if rec.id in hidden:
                continue
            text = _record_text(rec)
            if not _score(text, words):
                continue
            text = redact(text, scanner)  # matched again once redacted: a secret is never found by its value
            score = _score(text, words)
            if score:
                shown = {"ref": rec.id, "conversation_id": cid, "kind": rec.kind.value, "score": score}
                hits.append((score, rec.seq, {**shown, "text": text[:500]}))
    hits.sort(key=lambda h: (-h[0], h[1]))
    return [h[2] for h in hits[: max(1, min(limit, 100))]]


def build_server(ledger: Ledger, tenant: str, reader: Reader | None = None) -> MCPServer:
    """The MCP server whose tools read ``tenant``'s records from ``ledger`` (read-only) for ``reader``.

    ``reader`` (participant, provider; default ``Reader()``) is fixed too: search and rehydration show
    nothing an assembly for it would withhold.
    """
    reader = reader or Reader()
    server = MCPServer("ctxledger", instructions=f"Read-only ctxledger tools for tenant {tenant}.")

    def guarded(fn: Any) -> Any:
        try:
            return fn()
        except RecordNotFound as exc:
            raise ToolError(f"{exc.what} {exc.record_id!r} not found") from None
        except CtxledgerError as exc:
            raise ToolError(str(exc)) from None

    @server.tool()
    def last_assembly(conversation_id: str) -> dict[str, Any]:
        """The newest assembly of a conversation: id, budget, token figures, omissions grouped by reason."""

        def run() -> dict[str, Any]:
            if conversation_id not in ledger.store.conversations(tenant):
                raise RecordNotFound(tenant, conversation_id, what="conversation")
            found = ledger.store.list_assemblies(tenant, conversation_id)
            if not found:
                raise ToolError(f"conversation {conversation_id!r} has no assembly yet")
            m = ledger.get_assembly(found[-1]["id"], tenant_id=tenant, full=True)
            b = mv.budget(m)
            return {
                "assembly_id": m["id"],
                "snapshot_seq": m.get("snapshot_seq"),
                "model": m.get("model"),
                "budget": {
                    "window": b.window,
                    "input": b.input,
                    "used": b.used,
                    "classes": {c.name: c.used for c in b.classes},
                },
                "tokens": mv.tokens(m),
                "included": len(m.get("included", [])),
                "omitted_by_reason": {g.reason: g.count for g in mv.omissions(m)},
            }

        return guarded(run)

    @server.tool()
    def explain(assembly_id: str, ref: str) -> dict[str, Any]:
        """Why the record ``ref`` (its id or number in the conversation) was included in or omitted from an assembly."""
        return guarded(lambda: explain_record(ledger, tenant, assembly_id, ref, source="MCP tool explain"))

    @server.tool()
    def rehydrate(assembly_id: str, ref: str, start: int | None = None, end: int | None = None) -> str:
        """The raw bytes (as UTF-8 text, secrets redacted) behind an item of an assembly, if the policy allows it."""

        def run() -> str:
            manifest = ledger.get_assembly(assembly_id, tenant_id=tenant, full=True)
            full = ref if mv.entry(manifest, ref) is not None else f"{manifest['conversation_id']}/{ref}"
            refusal = mv.rehydration_refusal(manifest, full)
            if refusal is None:
                hidden = withheld(ledger, tenant, manifest["conversation_id"], reader, branch_id=manifest["branch_id"])
                refusal = reasons(hidden, full)
            if refusal is not None:
                raise ToolError(f"rehydration refused by the policy: {refusal}")
            span = None if start is None and end is None else (start, end)
            try:
                data = ledger.rehydrate(full, span, tenant_id=tenant)
            except InputError as exc:  # a bad range: the library's words, naming the argument at fault
                raise as_given(exc, span, source="MCP tool rehydrate", names=("start", "end")) from None
            raw = data.decode("utf-8", "replace")
            text = redact(raw, scanner_of(ledger))
            cut = f"\n[cut at {MAX_TEXT:,} of {len(text):,} characters]" if len(text) > MAX_TEXT else ""
            return text[:MAX_TEXT] + cut

        return guarded(run)

    @server.tool(name="search_history")
    def search(
        query: str, conversation_id: str | None = None, limit: int = 10, branch_id: str | None = None
    ) -> list[dict[str, Any]]:
        """Records whose text holds the query's words, best first, under the policy's hard filters (secrets hidden)."""
        return guarded(
            lambda: search_history(ledger, tenant, query, conversation_id, limit, reader=reader, branch_id=branch_id)
        )

    return server
