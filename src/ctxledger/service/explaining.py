"""Why one record was in or out of an assembly, for the service's and the MCP server's ``explain``.

Both read a ref as :meth:`ctxledger.ledger.Ledger.explain` does (one shared reading: a record id, a number
within the conversation, ``12`` for ``<conversation>/12``, an external id or a tool call id), and answer the same.
"""

from __future__ import annotations

from typing import Any

from ctxledger.ledger import Ledger


def explain_record(ledger: Ledger, tenant: str, assembly_id: str, ref: str, *, source: str) -> dict[str, Any]:
    """The answer of :meth:`ctxledger.ledger.Ledger.explain` for ``ref`` in the assembly ``assembly_id`` of ``tenant``.

    Args:
        ledger: the ledger the assembly is stored in.
        tenant: the tenant it belongs to.
        assembly_id: the assembly (manifest) id.
        ref: a record id, an external id, or a number within the assembly's conversation.
        source: where the ref came from, named by an :class:`~ctxledger.errors.InputError` (``"<request>"``).

    Returns:
        The explanation dict; ``status: "unknown"``, ``reason: "replay_mismatch"`` for a record of the
        conversation that a summary manifest does not list when its replay is not the same call.

    Raises:
        RecordNotFound: no such assembly, no record of its conversation is named ``ref``, or it is no candidate.
        InputError: ``ref`` is a record no assembly can hold (a model run, participant, branch or the
            conversation record); the field is ``ref``.
    """
    return ledger.explain_as(assembly_id, ref, tenant_id=tenant, source=source)
