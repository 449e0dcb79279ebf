"""The append and lineage rules every backend shares, so that all stores agree.

Append: a batch is checked whole before anything is written. Every record needs non-empty ``id``,
``tenant_id``, ``conversation_id`` and ``branch_id``; ids are unique per tenant (within the batch and
against the tenant's stored records; another tenant may use the same id, and is never told so); a
:class:`~ctxledger.records.Branch` has ``id == branch_id`` and, when it has a parent, an integer
``fork_seq >= 0``. A :class:`~ctxledger.records.Conversation` record creates its conversation's
head (at most once); every other record must belong to a conversation created earlier (in the store or
earlier in the same batch). ``seq`` is assigned per conversation in input order, continuing the head;
a ``seq`` set on an input record is ignored. A :class:`~ctxledger.records.ToolArtifact` must name bytes
the store's blob store already holds (a bare-hex ``sha256``; put the bytes first): an artifact whose raw
output does not exist would break every later assembly and rehydration.

Lineage: a branch sees its own records and, through ``parent_branch_id``/``fork_seq``, its parent's
records with ``seq <= fork_seq`` (inclusive), recursively; a grandparent is bounded by the smallest
fork point on the way. A conversation's main branch may exist without a Branch record; a parent without
a Branch record ends the walk (it is a root).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ctxledger.errors import DuplicateRecordId, InputError, RecordNotFound, StoreError
from ctxledger.records import Branch, Conversation, Record, ToolArtifact
from ctxledger.store.base import LineageHop
from ctxledger.store.codec import SOURCE

ConversationKey = tuple[str, str]
"""``(tenant_id, conversation_id)``."""

RecordKey = tuple[str, str]
"""``(tenant_id, record id)``: a record's identity in every store."""

_REQUIRED = ("id", "tenant_id", "conversation_id", "branch_id")


def _check_envelope(record: Record, index: int) -> None:
    for name in _REQUIRED:
        value = getattr(record, name, None)
        if not isinstance(value, str) or not value:
            raise InputError("required non-empty string", source=SOURCE, index=index, field=name)
    if isinstance(record, Branch):
        if record.id != record.branch_id:
            raise InputError(
                f"branch {record.id!r} must have branch_id equal to its id",
                source=SOURCE,
                index=index,
                field="branch_id",
            )
        fork = record.fork_seq
        if record.parent_branch_id is not None and (not isinstance(fork, int) or isinstance(fork, bool) or fork < 0):
            raise InputError(
                f"branch {record.id!r} has a parent, so fork_seq must be an integer >= 0 (got {fork!r})",
                source=SOURCE,
                index=index,
                field="fork_seq",
            )


def record_key(record: Record) -> RecordKey:
    """``(tenant_id, id)`` of a record."""
    return (record.tenant_id, record.id)


def check_batch(records: Sequence[Record]) -> None:
    """Check the envelope of every record and that no id repeats within one tenant of the batch.

    Raises:
        InputError: names the record index and field.
    """
    first_index: dict[RecordKey, int] = {}
    for index, record in enumerate(records):
        if not isinstance(record, Record):
            raise InputError(f"expected a Record, got {type(record).__name__}", source=SOURCE, index=index)
        _check_envelope(record, index)
        key = record_key(record)
        if key in first_index:
            raise InputError(
                f"record id {record.id!r} appears twice in tenant {record.tenant_id!r} of this append "
                f"(also at record {first_index[key]})",
                source=SOURCE,
                index=index,
                field="id",
            )
        first_index[key] = index


def check_blobs(
    records: Sequence[Record],
    exists: Callable[[str], bool],
    existing: Callable[[Sequence[str]], set[str]] | None = None,
) -> None:
    """Check that every :class:`~ctxledger.records.ToolArtifact` of a batch names a stored blob.

    Args:
        records: the batch.
        exists: the store's ``blobs.exists`` (bare-hex sha256 → whether the blob is stored).
        existing: the blob store's batch form of ``exists`` (the stored ones of many names), when it has one;
            asked once for the batch's well-formed digests.

    Raises:
        InputError: names the record index, the artifact id and the field ``sha256``: the digest is empty
            or not a bare hex sha256, or no blob with it is in the blob store.
    """
    stored: set[str] = set()
    if existing is not None:
        named = [r.sha256 for r in records if isinstance(r, ToolArtifact) and _bare_hex(r.sha256)]
        stored = existing(list(dict.fromkeys(named)))
    for index, record in enumerate(records):
        if not isinstance(record, ToolArtifact):
            continue
        sha = record.sha256
        if not _bare_hex(sha):
            raise InputError(
                f"tool artifact {record.id!r} needs the bare-hex sha256 of its raw bytes (got {sha!r})",
                source=SOURCE,
                index=index,
                field="sha256",
            )
        if sha not in stored and not exists(sha):
            raise InputError(
                f"tool artifact {record.id!r}: no blob with sha256 {sha} is in the blob store; store the raw "
                "bytes first (ref = ledger.store.blobs.put(data), then sha256=ref.sha256)",
                source=SOURCE,
                index=index,
                field="sha256",
            )


def _bare_hex(sha: object) -> bool:
    return isinstance(sha, str) and len(sha) == 64 and not sha.strip("0123456789abcdef")


def ids_by_tenant(records: Iterable[Record]) -> dict[str, list[str]]:
    """The batch's record ids grouped by tenant (sorted tenants, ids in input order)."""
    grouped: dict[str, list[str]] = {}
    for record in records:
        grouped.setdefault(record.tenant_id, []).append(record.id)
    return dict(sorted(grouped.items()))


def duplicate_error(records: Sequence[Record], existing: Iterable[RecordKey]) -> DuplicateRecordId | None:
    """The error for the first record whose ``(tenant_id, id)`` is already stored, or ``None``.

    Args:
        records: the batch.
        existing: keys of the batch's records that the store already holds (other tenants' records
            must not be passed: a tenant is never told about ids outside it).
    """
    taken = set(existing)
    for index, record in enumerate(records):
        if record_key(record) in taken:
            return DuplicateRecordId(record.id, record.tenant_id, source=SOURCE, index=index)
    return None


def conversation_keys(records: Iterable[Record]) -> list[ConversationKey]:
    """The distinct conversations of a batch, sorted (a stable lock order)."""
    return sorted({(r.tenant_id, r.conversation_id) for r in records})


@dataclass(frozen=True, slots=True)
class NewConversation:
    """A conversation head created by a :class:`~ctxledger.records.Conversation` record of a batch."""

    tenant_id: str
    conversation_id: str
    main_branch_id: str
    record: Conversation


@dataclass(frozen=True, slots=True)
class AppendPlan:
    """What an append writes: the ``seq`` of each input record, changed heads, conversations created."""

    seqs: list[int]
    heads: dict[ConversationKey, int]
    created: list[NewConversation]


def _conversation_error(record: Record, index: int, problem: str) -> InputError:
    return InputError(problem, source=SOURCE, index=index, field="conversation_id")


def plan_append(records: Sequence[Record], heads: Mapping[ConversationKey, int]) -> AppendPlan:
    """Assign ``seq`` per conversation, continuing ``heads`` (the stored heads of the batch's conversations).

    Raises:
        InputError: a Conversation record for an existing conversation, or a record of a conversation
            that does not exist (yet).
    """
    current = dict(heads)
    created: list[NewConversation] = []
    seqs: list[int] = []
    for index, record in enumerate(records):
        key = (record.tenant_id, record.conversation_id)
        if isinstance(record, Conversation):
            if key in current:
                raise _conversation_error(record, index, f"conversation {key[1]!r} already exists in tenant {key[0]!r}")
            current[key] = 0
            created.append(NewConversation(key[0], key[1], record.branch_id, record))
        elif key not in current:
            raise _conversation_error(
                record,
                index,
                f"record {record.id!r} names unknown conversation {key[1]!r} in tenant {key[0]!r} "
                "(append its Conversation record first)",
            )
        current[key] += 1
        seqs.append(current[key])
    changed = {key: seq for key, seq in current.items() if heads.get(key) != seq}
    return AppendPlan(seqs, changed, created)


def walk_lineage(
    tenant_id: str,
    branch_id: str,
    find_branch: Callable[[str], Branch | None],
    is_main_branch: Callable[[str], bool],
) -> list[LineageHop]:
    """The lineage of ``branch_id``, child first (see the module docstring).

    Args:
        tenant_id: the tenant (for error messages).
        branch_id: the branch to start from.
        find_branch: returns the tenant's Branch record of an id, or ``None``.
        is_main_branch: whether an id is the main branch of one of the tenant's conversations.

    Raises:
        RecordNotFound: ``branch_id`` is neither a Branch record nor a main branch.
        StoreError: the parent links form a cycle.
    """
    current = find_branch(branch_id)
    if current is None and not is_main_branch(branch_id):
        raise RecordNotFound(tenant_id, branch_id, what="branch")
    hops = [LineageHop(branch_id, None)]
    bound: int | None = None
    while current is not None and current.parent_branch_id is not None:
        fork = int(current.fork_seq or 0)
        bound = fork if bound is None else min(bound, fork)
        parent = current.parent_branch_id
        if any(hop.branch_id == parent for hop in hops):
            raise StoreError(f"branch lineage of {branch_id!r} has a cycle at {parent!r}")
        hops.append(LineageHop(parent, bound))
        current = find_branch(parent)
    return hops


def in_lineage(record: Record, hops: Sequence[LineageHop]) -> bool:
    """Whether ``record`` is visible through ``hops`` (its branch listed, within that hop's ``max_seq``)."""
    return visible_at(record.branch_id, record.seq, hops)


def visible_at(branch_id: str | None, seq: int, hops: Sequence[LineageHop]) -> bool:
    """Whether a record of ``branch_id`` at ``seq`` is visible through ``hops`` (see :func:`in_lineage`)."""
    for hop in hops:
        if hop.branch_id == branch_id:
            return hop.max_seq is None or seq <= hop.max_seq
    return False


def get_or_none(store: Any, tenant_id: str, record_id: str) -> Record | None:
    """``store.get(tenant_id, record_id)``, or ``None`` when the tenant holds no such record."""
    try:
        found: Record = store.get(tenant_id, record_id)
    except RecordNotFound:
        return None
    return found
