"""``ctxledger mcp``: a read-only Model Context Protocol server over stdio (``pip install 'ctxledger[mcp]'``).

Tools (all read-only, all for the one tenant fixed when the server starts, from ``--key`` or ``--tenant``):

* ``last_assembly(conversation_id)``: the newest assembly of a conversation: budget, counts of included and
  omitted records by reason, token figures;
* ``explain(assembly_id, ref)``: why a record was included or omitted;
* ``rehydrate(assembly_id, ref, start, end)``: the raw bytes behind an item of an assembly, as text, only
  when that assembly's policy would let them in (:func:`ctxledger.service.manifest_view.rehydration_refusal`):
  what a hard filter kept out (secret, privacy, lineage …) stays out;
* ``search_history(query, conversation_id, limit)``: records whose text holds the query's words, best
  first, leaving out ``audit_only`` and participant-private records and redacting secrets.

Built on the official ``mcp`` SDK's :class:`~mcp.server.mcpserver.MCPServer`.
"""

from __future__ import annotations

from ctxledger.mcp_server.server import build_server, search_history

__all__ = ["build_server", "search_history"]
