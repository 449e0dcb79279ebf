"""``ctxledger mcp``: a read-only Model Context Protocol server over stdio (``pip install 'ctxledger[mcp]'``).

Tools (all read-only, all for the one tenant fixed when the server starts, from ``--key`` or ``--tenant``,
and for one reader fixed with it: ``--participant`` and ``--provider``, as an assembly request names them):

* ``last_assembly(conversation_id)``: the newest assembly of a conversation: budget, counts of included and
  omitted records by reason, token figures;
* ``explain(assembly_id, ref)``: why a record was included or omitted (ids, stages and reasons, no content);
* ``rehydrate(assembly_id, ref, start, end)``: the raw bytes behind an item of an assembly (bytes ``start`` to
  ``end``, end exclusive, either optional), as text with secrets redacted, only when that assembly's policy
  would let them in (:func:`ctxledger.service.manifest_view.rehydration_refusal`) and no hard filter withholds
  the record from the server's reader;
* ``search_history(query, conversation_id, limit, branch_id)``: records whose text holds the query's words,
  best first, among those an assembly for the server's reader could show
  (:func:`ctxledger.service.withheld.withheld`: branch lineage, participant visibility, privacy class,
  provider scope, withheld secrets and the policy's other hard filters), secrets redacted.

Built on the official ``mcp`` SDK's :class:`~mcp.server.mcpserver.MCPServer`.
"""

from __future__ import annotations

from ctxledger.mcp_server.server import build_server, search_history

__all__ = ["build_server", "search_history"]
