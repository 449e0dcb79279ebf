"""The result of parsing an input, and the one place that writes it.

Importing is two phases. *Parsing* reads and validates the whole input and builds every record and
blob in memory; any bad input raises :class:`~ctxledger.errors.InputError` before anything is
written. *Writing* (:func:`write_batch`) then stores the blobs and appends all records with **one**
``GraphStore.append`` call, which the store runs as one transaction. If that append fails, the store
holds no record of the import; at most some content-addressed blobs were stored, which nothing
references and garbage collection may remove. Blobs go first because a record must never
point at bytes that are not there.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from ctxledger._collector import collector_paused
from ctxledger.conversation_ids import check_conversation_id, conflict
from ctxledger.errors import InputError, IntegrityError
from ctxledger.exchange_cuts import mark_whole_exchanges
from ctxledger.policy.secrets import check_identifiers
from ctxledger.records import Conversation, Kind, Message, Record, ToolArtifact, ToolCall
from ctxledger.store.base import GraphStore


@dataclass(frozen=True, slots=True)
class ParsedConversation:
    """One source conversation or trajectory, ready to append.

    Attributes:
        conversation_id: id of its :class:`~ctxledger.records.Conversation` record.
        records: every record in append order: Conversation, Branch, Participants, then history.
        blobs: raw bytes referenced by its artifacts, ``sha256 hex -> (bytes, media_type)``.
    """

    conversation_id: str
    records: list[Record]
    blobs: dict[str, tuple[bytes, str]] = field(default_factory=dict)

    def count(self, kind: Kind) -> int:
        """Number of records of ``kind`` in this conversation."""
        return sum(1 for record in self.records if record.kind is kind)


@dataclass(frozen=True, slots=True, repr=False)
class ImportBatch:
    """Everything parsed from one input, not yet written (its repr gives counts, not records).

    Attributes:
        source: the file name (or ``"<api>"``) it came from.
        format: the format it was read as (``"openai-chat"``, ``"tau-bench"`` …).
        conversations: the parsed conversations in source order.
    """

    source: str
    format: str
    conversations: list[ParsedConversation]

    @property
    def messages(self) -> int:
        """Number of :class:`~ctxledger.records.Message` records."""
        return self._count(Kind.MESSAGE)

    @property
    def tool_calls(self) -> int:
        """Number of :class:`~ctxledger.records.ToolCall` records."""
        return self._count(Kind.TOOL_CALL)

    @property
    def artifacts(self) -> int:
        """Number of :class:`~ctxledger.records.ToolArtifact` records."""
        return self._count(Kind.TOOL_ARTIFACT)

    @property
    def records(self) -> int:
        """Number of records of every kind."""
        return sum(len(conv.records) for conv in self.conversations)

    def _count(self, kind: Kind) -> int:
        return sum(conv.count(kind) for conv in self.conversations)

    def __repr__(self) -> str:
        """``ImportBatch(source=…, format=…, conversations=(ids…), records=N, messages=N, …)``."""
        ids = tuple(conv.conversation_id for conv in self.conversations)
        return (
            f"ImportBatch(source={self.source!r}, format={self.format!r}, conversations={_ids(ids)}, "
            f"records={self.records}, messages={self.messages}, tool_calls={self.tool_calls}, "
            f"artifacts={self.artifacts})"
        )


@dataclass(frozen=True, slots=True, repr=False)
class ImportResult:
    """What :func:`write_batch` stored (its repr gives counts and conversation ids, not the records).

    Attributes:
        conversation_ids: ids of the conversations written, in order.
        records: the appended records, with ``seq`` assigned by the store.
        blobs: number of distinct blobs put (bytes already present count too; puts are idempotent).
        format: the format the input was read as (the detected one when it was imported with ``"auto"``).
    """

    conversation_ids: tuple[str, ...]
    records: list[Record]
    blobs: int
    format: str = ""

    @property
    def messages(self) -> int:
        """Number of messages written."""
        return sum(1 for r in self.records if isinstance(r, Message))

    @property
    def tool_calls(self) -> int:
        """Number of tool calls written."""
        return sum(1 for r in self.records if isinstance(r, ToolCall))

    @property
    def artifacts(self) -> int:
        """Number of tool artifacts written."""
        return sum(1 for r in self.records if isinstance(r, ToolArtifact))

    def __repr__(self) -> str:
        """``ImportResult(conversation_ids=(…), records=N, messages=N, tool_calls=N, artifacts=N, blobs=N)``."""
        return (
            f"ImportResult(conversation_ids={_ids(self.conversation_ids)}, records={len(self.records)}, "
            f"messages={self.messages}, tool_calls={self.tool_calls}, artifacts={self.artifacts}, blobs={self.blobs})"
        )


REPR_IDS = 10
"""Conversation ids a repr lists before summarising the rest (a LoCoMo file holds many)."""


def _ids(ids: tuple[str, ...]) -> str:
    if len(ids) <= REPR_IDS:
        return repr(ids)
    shown = ", ".join(repr(i) for i in ids[:REPR_IDS])
    return f"({shown}, … {len(ids) - REPR_IDS} more)"


def write_batch(store: GraphStore, batch: ImportBatch) -> ImportResult:
    """Store a parsed batch: refuse re-imports, put the blobs, then append all records at once.

    Validation is complete once parsing returned, so nothing here looks at the source again. The
    records go in with one ``store.append`` (one transaction): either all are written or none. A failed
    append can leave only unreferenced, content-addressed blobs behind (garbage-collectable), never
    records.

    Raises:
        InputError: an id or participant name holds a secret; a conversation of the batch is already in the
            store (ids are deterministic, so importing the same source twice is detected here, before any write),
            its id is another record's id or nests with another conversation's
            (:mod:`ctxledger.conversation_ids`).
        IntegrityError: the blob store named bytes with a different sha256 than the parser did.
        StoreError: the store failed; no record of the batch was written.
    """
    # the batch's records, rows and facts all stay alive until the end: full collections would walk them in vain
    with collector_paused():
        return _write_batch(store, batch)


def check_batch(store: GraphStore, batch: ImportBatch) -> None:
    """The refusals :func:`write_batch` makes before it writes, for a caller with work to do in between.

    Raises:
        InputError: an id or participant name holds a secret, or a conversation of the batch is already in the
            store, or its id is another record's id or nests with another conversation's.
    """
    for conv in batch.conversations:
        check_identifiers(conv.records, source=batch.source)
    _refuse_reimport(store, batch)


def _write_batch(store: GraphStore, batch: ImportBatch) -> ImportResult:
    check_batch(store, batch)
    blobs = _merged_blobs(batch)
    put_many = getattr(store.blobs, "put_many", None)
    if put_many is not None:
        refs = put_many(list(blobs.values()))
    else:
        refs = [store.blobs.put(data, media_type) for data, media_type in blobs.values()]
    for sha256, ref in zip(blobs, refs, strict=True):
        if ref.sha256 != sha256:
            raise IntegrityError(f"blob store named bytes {ref.sha256}, the importer computed {sha256}")
    records = mark_whole_exchanges([record for conv in batch.conversations for record in conv.records])
    written = store.append(records)
    ids = tuple(conv.conversation_id for conv in batch.conversations)
    return ImportResult(conversation_ids=ids, records=written, blobs=len(blobs), format=batch.format)


def _refuse_reimport(store: GraphStore, batch: ImportBatch) -> None:
    known: dict[str, list[str]] = {}
    for conv in batch.conversations:
        tenant_id = _tenant_of(conv)
        check_conversation_id(conv.conversation_id, source=batch.source)
        ids = known.setdefault(tenant_id, [])
        problem = conflict(store, tenant_id, conv.conversation_id, known=ids)
        if problem is not None:
            raise InputError(
                f"{problem}; pass another conversation_id to import it", source=batch.source, field="conversation_id"
            )
        ids.append(conv.conversation_id)


def _tenant_of(conv: ParsedConversation) -> str:
    head = conv.records[0]
    assert isinstance(head, Conversation), "a parsed conversation starts with its Conversation record"
    return head.tenant_id


def _merged_blobs(batch: ImportBatch) -> Mapping[str, tuple[bytes, str]]:
    merged: dict[str, tuple[bytes, str]] = {}
    for conv in batch.conversations:
        merged.update(conv.blobs)
    return merged
