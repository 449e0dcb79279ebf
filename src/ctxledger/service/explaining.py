"""Why one record was in or out of an assembly, for the service's and the MCP server's ``explain``.

Both accept a ref as a record id, an external id, or a number within the conversation (``12`` for
``<conversation>/12``). An included record, a skill state, or any record of a ``trace="full"`` manifest is
answered from the stored manifest; any other record of a summary manifest by one replay of the assembly
(:meth:`ctxledger.ledger.Ledger.replay`), shared by every form of the ref.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ctxledger.errors import InputError, RecordNotFound
from ctxledger.explain_tools import explain_skill_state, never_a_candidate
from ctxledger.ledger import Ledger, unexplained
from ctxledger.manifest import explain, has_full_trace


def explain_record(ledger: Ledger, tenant: str, assembly_id: str, ref: str, *, source: str) -> dict[str, Any]:
    """The answer of :func:`ctxledger.manifest.explain` for ``ref`` in the assembly ``assembly_id`` of ``tenant``.

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
        RecordNotFound: no such assembly, or ``ref`` is no candidate of it.
        InputError: ``ref`` is a record no assembly can hold (a model run, participant, branch or the
            conversation record); the field is ``ref``.
    """
    stored = ledger.get_assembly(assembly_id, tenant_id=tenant)
    candidates = (ref, f"{stored['conversation_id']}/{ref}")
    for candidate in candidates:
        if (tool_state := explain_skill_state(ledger.store, stored, candidate)) is not None:
            return tool_state
    if (found := _answer(stored, candidates)) is not None:
        return ledger.with_content_now(found, tenant_id=tenant)
    never = never_a_candidate(ledger.store, stored, ref)
    if never is not None:
        raise InputError(never, source=source, field="ref")
    if not has_full_trace(stored):
        replayed, mismatch = ledger.replay(stored)
        if replayed is not None:
            if (found := _answer(replayed, candidates)) is not None:
                return ledger.with_content_now(found, tenant_id=tenant)
        elif (record := _record_of(ledger, stored, candidates)) is not None:
            return unexplained(stored, record, str(mismatch))
    shown = ref if ref.startswith(f"{stored['conversation_id']}/") else candidates[1]  # both were looked for
    raise RecordNotFound(tenant, shown, among=f"the candidates of assembly {assembly_id}")


def _answer(manifest: Mapping[str, Any], candidates: tuple[str, ...]) -> dict[str, Any] | None:
    """The explanation of the first candidate the manifest lists (by id or external id), else ``None``."""
    for candidate in candidates:
        try:
            return explain(manifest, candidate)
        except RecordNotFound:
            continue
    return None


def _record_of(ledger: Ledger, manifest: Mapping[str, Any], candidates: tuple[str, ...]) -> str | None:
    """The id of the first candidate that is a record of the manifest's conversation, else ``None``."""
    for candidate in candidates:
        try:
            record = ledger.store.get(manifest["tenant_id"], candidate)
        except RecordNotFound:
            continue
        if record.conversation_id == manifest["conversation_id"]:
            return record.id
    return None
