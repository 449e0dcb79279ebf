"""The MCP tools over one ledger and one tenant (see the package docstring)."""

from __future__ import annotations

import re
from collections import Counter
from typing import Any

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError

from ctxledger.errors import CtxledgerError, RecordNotFound
from ctxledger.ledger import Ledger
from ctxledger.policy.secrets import default_scanner, redact_text
from ctxledger.records import Compaction, Message, ToolMemory
from ctxledger.service import manifest_view as mv

MAX_TEXT = 20_000
"""Longest text (characters) a tool answers with; longer rehydrations are cut and say so."""

_HIDDEN = ("audit_only", "participant_private")
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


def search_history(
    ledger: Ledger, tenant: str, query: str, conversation_id: str | None = None, limit: int = 10
) -> list[dict[str, Any]]:
    """Records of ``tenant`` whose text holds the words of ``query``, best first (count of matching words).

    Leaves out ``audit_only`` and participant-private records; secrets in the text are redacted.

    Raises:
        RecordNotFound: ``conversation_id`` is not a conversation of the tenant.
    """
    words = {w.lower() for w in _WORD.findall(query)}
    if not words:
        return []
    conversations = ledger.store.conversations(tenant)
    if conversation_id is not None:
        if conversation_id not in conversations:
            raise RecordNotFound(tenant, conversation_id, what="conversation")
        conversations = [conversation_id]
    scanner = default_scanner()
    hits = []
    for cid in conversations:
        for rec in ledger.store.records(tenant, cid):
            if str(getattr(rec.visibility, "value", rec.visibility)) in _HIDDEN:
                continue
            text = _record_text(rec)
            counts = Counter(w.lower() for w in _WORD.findall(text))
            score = sum(counts[w] > 0 for w in words)
            if score:
                clean = redact_text(text, scanner)
                hits.append(
                    (
                        score,
                        rec.seq,
                        {
                            "ref": rec.id,
                            "conversation_id": cid,
                            "kind": rec.kind.value,
                            "score": score,
                            "text": clean[:500],
                        },
                    )
                )
    hits.sort(key=lambda h: (-h[0], h[1]))
    return [h[2] for h in hits[: max(1, min(limit, 100))]]


def build_server(ledger: Ledger, tenant: str) -> MCPServer:
    """The MCP server whose tools read ``tenant``'s records from ``ledger`` (read-only)."""
    server = MCPServer("ctxledger", instructions=f"Read-only ctxledger tools for tenant {tenant}.")

    def guarded(fn: Any) -> Any:
        try:
            return fn()
        except RecordNotFound as exc:
            raise ToolError(f"{exc.record_id!r} not found") from None
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

        def run() -> dict[str, Any]:
            manifest = ledger.get_assembly(assembly_id, tenant_id=tenant, full=True)
            for candidate in (ref, f"{manifest['conversation_id']}/{ref}"):
                if mv.entry(manifest, candidate) is not None:
                    return ledger.explain(assembly_id, candidate, tenant_id=tenant)
            raise RecordNotFound(tenant, ref)

        return guarded(run)

    @server.tool()
    def rehydrate(assembly_id: str, ref: str, start: int | None = None, end: int | None = None) -> str:
        """The raw bytes (as UTF-8 text) behind an item of an assembly, if that assembly's policy allows it."""

        def run() -> str:
            manifest = ledger.get_assembly(assembly_id, tenant_id=tenant, full=True)
            full = ref if mv.entry(manifest, ref) is not None else f"{manifest['conversation_id']}/{ref}"
            refusal = mv.rehydration_refusal(manifest, full)
            if refusal is not None:
                raise ToolError(f"rehydration refused by the policy: {refusal}")
            span = None if start is None and end is None else (start or 0, end if end is not None else 1 << 62)
            text = ledger.rehydrate(full, span, tenant_id=tenant).decode("utf-8", "replace")
            cut = f"\n[cut at {MAX_TEXT:,} of {len(text):,} characters]" if len(text) > MAX_TEXT else ""
            return text[:MAX_TEXT] + cut

        return guarded(run)

    @server.tool(name="search_history")
    def search(query: str, conversation_id: str | None = None, limit: int = 10) -> list[dict[str, Any]]:
        """Records whose text holds the query's words, best first (audit-only and private records left out)."""
        return guarded(lambda: search_history(ledger, tenant, query, conversation_id, limit))

    return server
