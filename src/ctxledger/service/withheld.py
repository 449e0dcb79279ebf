"""What an assembly's hard filters would withhold from a reader, for answers that are not assemblies.

The MCP tools (search, rehydrate) answer outside an assembly but must show nothing an assembly for the same
reader would keep out. :func:`withheld` runs the policy's stages exactly as the assembler's filter phase does
(:func:`ctxledger.assemble.assembler.run_policy`) on the conversation's snapshot for a :class:`Reader`, plus
the records of other branches, and returns the records a hard filter omitted: those outside the branch
lineage, private to another participant or audit-only, of a privacy class or a provider scope the reader's
provider may not receive, holding a secret the policy withholds, out of scope, stale, superseded … — every
reason outside :data:`~ctxledger.policy.rehydration.READABLE_OMISSIONS` (which only choose a cheaper form or
spend the budget). Secrets in what is shown are redacted separately (:func:`redact`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ctxledger.assemble.assembler import AssemblyRequest, run_policy
from ctxledger.assemble.inputs import resolve_participant
from ctxledger.assemble.record import policy_scanner
from ctxledger.errors import RecordNotFound
from ctxledger.policy.rehydration import hard_omission
from ctxledger.policy.secrets import SecretScanner, redact_text
from ctxledger.records import Conversation, Visibility
from ctxledger.store._rules import get_or_none
from ctxledger.units import build_units


@dataclass(frozen=True, slots=True)
class Reader:
    """Whom an answer is for, as an assembly request would say it.

    Attributes:
        participant_id: the participant (id or name); ``None`` sees no participant-private or shared state.
        provider: the provider the answer goes to (privacy classes and provider scopes); ``None``: the one
            ``api`` implies.
        api: the provider contract (``openai-chat``, ``anthropic-messages``, ``openai-responses``).
    """

    participant_id: str | None = None
    provider: str | None = None
    api: str = "openai-chat"


def withheld(
    ledger: Any, tenant_id: str, conversation_id: str, reader: Reader, *, branch_id: str | None = None
) -> dict[str, tuple[str, str]]:
    """Record id → ``(reason, detail)`` of each record of the conversation a hard filter withholds from ``reader``.

    The records of ``branch_id``'s lineage (default the main branch) at the head, and the conversation's
    records on other branches, go through the ledger's policy as in an assembly; a record absent from the
    answer is one an assembly could show. Costs one pass of the policy over the conversation.

    Raises:
        RecordNotFound: no such conversation (or branch) in the tenant.
        InputError: ``reader.participant_id`` is a name several participants share.
    """
    try:
        conv = ledger.store.get(tenant_id, conversation_id)
    except RecordNotFound:
        raise RecordNotFound(tenant_id, conversation_id, what="conversation") from None
    if not isinstance(conv, Conversation):
        raise RecordNotFound(tenant_id, conversation_id, what="conversation")
    branch = branch_id or conv.branch_id
    snap = ledger.snapshots.load(tenant_id, conversation_id, branch)
    request = AssemblyRequest(
        tenant_id=tenant_id,
        conversation_id=conversation_id,
        branch_id=branch,
        participant_id=reader.participant_id,
        provider=reader.provider,
        api=reader.api,
    )
    lineage = {r.id for r in snap.records}
    extra = [r for r in ledger.store.records(tenant_id, conversation_id, as_of_seq=snap.seq) if r.id not in lineage]
    records = sorted([*snap.records, *extra], key=lambda r: r.seq)
    units = list(snap.units)
    fill = [r for r in extra if r.visibility in (Visibility.CONVERSATION, Visibility.SHARED)]
    if fill:
        units = sorted([*units, *build_units(fill, ledger.store.blobs.get)[0]], key=lambda u: u.seq)
    request = resolve_participant(request, records)
    policy = ledger.policy.for_request(request)
    plan = run_policy(
        policy,
        request,
        snap,
        records=records,
        units=units,
        find_artifacts=lambda sha: ledger.store.artifacts_by_sha256(tenant_id, sha),
        find_record=lambda rid: get_or_none(ledger.store, tenant_id, rid),
    )
    hard = hard_omission(plan.omitted, plan.decisions)
    return {r.id: found for r in records if (found := hard(r.id)) is not None}


def scanner_of(ledger: Any) -> SecretScanner:
    """The secret scanner of the ledger's policy (:func:`~ctxledger.assemble.record.policy_scanner`)."""
    return policy_scanner(ledger.policy)


def redact(text: str, scanner: SecretScanner) -> str:
    """``text`` with every secret the scanner finds replaced by its redaction marker, line by line."""
    return redact_text(text, scanner)


def reasons(found: Mapping[str, tuple[str, str]], ref: str) -> str | None:
    """``"reason (detail)"`` when ``ref`` is withheld, else ``None``."""
    hit = found.get(ref)
    return None if hit is None else f"{hit[0]} ({hit[1]})"
