"""The narrow storage interface every backend implements.

A :class:`GraphStore` appends immutable records, answers "the records of this branch lineage as of
seq S", caches token counts by (counter id, content hash), and keeps assembly manifests. Raw tool
outputs live in a :class:`BlobStore` beside it. Backends: the in-memory reference store in
``ctxledger.testing``; SQLite (the embedded default) and PostgreSQL in ``ctxledger.store.sql``, sharing
one schema and one Alembic migration history. ``ctxledger.testing`` ships the conformance suite all of
them pass.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from ctxledger.records import Branch, Record, ToolArtifact

if TYPE_CHECKING:
    from ctxledger.facts import RecordFacts


@dataclass(frozen=True, slots=True)
class LineageHop:
    """One branch of a lineage and the last ``seq`` it contributes (inclusive; ``None`` = no bound)."""

    branch_id: str
    max_seq: int | None


@dataclass(frozen=True, slots=True)
class BlobRef:
    """Where a raw artifact's bytes are: bare-hex ``sha256``, ``size_bytes``, ``media_type``."""

    sha256: str
    size_bytes: int
    media_type: str


@dataclass(frozen=True, slots=True)
class RecordLink:
    """A link the newer record ``source_id`` (at ``seq`` on ``branch_id``) holds to ``target_id``.

    ``relation`` is ``supersedes`` (``ToolMemory.supersedes``), ``conflicts_with`` or ``derived_from`` (a memory's
    source artifacts, a compaction's covered records). Stored on append and readable from either end.
    """

    source_id: str
    relation: str
    target_id: str
    branch_id: str
    seq: int


@dataclass(frozen=True, slots=True)
class ProtectedEntry:
    """One entry of the protected-state index, maintained on append.

    ``state`` is one of :data:`PROTECTED_STATES`; ``subject`` what closes it (a call's record id, a tool name)
    or describes it (the tags, a checkpoint's run id, an instruction's role). ``closed_by`` is the record
    that closed it, at ``closed_seq`` on ``closed_branch_id`` (``None`` while open). An entry read from the
    store is open in the lineage it was read for; its unit decides the protection reason.
    """

    record_id: str
    state: str
    branch_id: str
    seq: int
    subject: str
    closed_by: str | None = None
    closed_branch_id: str | None = None
    closed_seq: int | None = None


PROTECTED_STATES = ("call", "failed_call", "tagged", "checkpoint", "instruction")
"""States of :class:`ProtectedEntry`: a tool call without a result yet (``call``); a failed tool result not yet
followed by a success of the same tool (``failed_call``, subject the tool name); a record with ``meta`` tags
(``tagged``, subject the tags joined by ``,``: constraints, approvals, pending operations …); a checkpoint
(subject its run id); a system or developer message (``instruction``)."""


@dataclass(frozen=True, slots=True)
class AuditEntry:
    """One retention action, as the audit trail keeps it (``retention_audit``).

    Attributes:
        tenant_id, conversation_id: where the target lived.
        target: ``"record"`` or ``"assembly"``.
        ref: the record or assembly id.
        kind: the record kind (``"assembly"`` for a manifest).
        rule: the retention rule's name (``"forget"`` for a request to be forgotten).
        action: ``redact``, ``hash_only``, ``delete``, ``summary`` …
        at: when it was applied (aware UTC).
        before_sha256, after_sha256: bare-hex sha256 of the content before and after (``None`` = none).
        detail: the sentence explanations show ("redacted by retention rule R at T").
    """

    tenant_id: str
    conversation_id: str | None
    target: str
    ref: str
    kind: str
    rule: str
    action: str
    at: datetime
    before_sha256: str | None
    after_sha256: str | None
    detail: str = ""


@dataclass(frozen=True, slots=True)
class RetentionChange:
    """What one retention batch changes, applied in one transaction by ``GraphStore.apply_retention``.

    Attributes:
        rewrite: records whose content was replaced (same id, new body); they no longer reference a blob.
        delete: ``(tenant_id, record_id)`` of records removed.
        conversations: ``(tenant_id, conversation_id)`` whose every record is removed (their heads go too).
        assemblies: manifests replaced by their summary (same tenant and id).
        delete_assemblies: ``(tenant_id, assembly_id)`` of manifests removed.
        audit: the audit rows of the batch.
        blobs: bare-hex sha256 of blobs whose last reference may be gone (queued for collection).
    """

    rewrite: tuple[Record, ...] = ()
    delete: tuple[tuple[str, str], ...] = ()
    conversations: tuple[tuple[str, str], ...] = ()
    assemblies: tuple[Mapping[str, Any], ...] = ()
    delete_assemblies: tuple[tuple[str, str], ...] = ()
    audit: tuple[AuditEntry, ...] = ()
    blobs: tuple[str, ...] = ()


@runtime_checkable
class BlobStore(Protocol):
    """Content-addressed storage of raw bytes (sha256-named, write-once)."""

    def put(self, data: bytes, media_type: str = "application/octet-stream") -> BlobRef:
        """Store ``data`` (idempotent) and return its reference."""
        ...

    def get(self, sha256: str) -> bytes:
        """Return the exact bytes named ``sha256``.

        Raises:
            RecordNotFound: no such blob.
            IntegrityError: the stored bytes no longer hash to ``sha256``.
        """
        ...

    def get_range(self, sha256: str, start: int, end: int) -> bytes:
        """Return bytes ``[start, end)`` of the blob (byte offsets, end exclusive)."""
        ...

    def exists(self, sha256: str) -> bool:
        """Whether a blob named ``sha256`` is stored."""
        ...

    def delete(self, sha256: str) -> None:
        """Remove a blob (retention/GC only; callers check nothing live references it)."""
        ...


@runtime_checkable
class GraphStore(Protocol):
    """The execution-graph store. All reads are scoped by ``tenant_id``; nothing crosses tenants."""

    blobs: BlobStore

    def migrate(self) -> None:
        """Create or upgrade the schema to the newest revision (idempotent)."""
        ...

    def append(self, records: Sequence[Record]) -> list[Record]:
        """Append records in one transaction and return them with ``seq`` assigned.

        ``seq`` is assigned per conversation in input order, continuing after the conversation's
        current head. Either every record is written or none is. A record is identified by
        ``(tenant_id, id)``: ids are unique per tenant, and two tenants may use the same ids.

        Raises:
            InputError: a record id already exists in the record's tenant (the error names only that
                tenant's record), a record names an unknown conversation, or a ``ToolArtifact``'s ``sha256``
                names no blob of ``blobs`` (field ``sha256``).
        """
        ...

    def get(self, tenant_id: str, record_id: str) -> Record:
        """Return one record of that tenant.

        Raises:
            RecordNotFound: no such record in that tenant (records of other tenants are never found).
        """
        ...

    def head_seq(self, tenant_id: str, conversation_id: str) -> int:
        """The highest ``seq`` written in the conversation (0 when empty)."""
        ...

    def branch(self, tenant_id: str, branch_id: str) -> Branch:
        """Return a branch record. Raises ``RecordNotFound``."""
        ...

    def lineage(self, tenant_id: str, branch_id: str) -> list[LineageHop]:
        """The branch and its ancestors, child first, each with the last ``seq`` it contributes."""
        ...

    def records(
        self,
        tenant_id: str,
        conversation_id: str,
        *,
        lineage: Sequence[LineageHop] | None = None,
        as_of_seq: int | None = None,
        after_seq: int = 0,
        outside_lineage: bool = False,
    ) -> list[Record]:
        """Records of one conversation in ``seq`` order with ``after_seq < seq <= as_of_seq``.

        With ``lineage``, only records on those branches within each hop's ``max_seq``; with ``lineage`` and
        ``outside_lineage``, only the others (other branches, and a hop's branch past its ``max_seq``); without
        ``lineage``, every branch of the conversation (callers filter by visibility).
        """
        ...

    def conversations(self, tenant_id: str) -> list[str]:
        """Ids of the tenant's conversations, oldest first."""
        ...

    def artifacts_by_sha256(self, tenant_id: str, sha256: str) -> list[ToolArtifact]:
        """The tenant's tool artifacts whose raw bytes hash to ``sha256``, in any conversation.

        Used to repair broken provenance by content (a memory's locator names a sha256 whose artifact
        is gone). Ordered by ``seq``, then id. Artifacts of other tenants are never returned.

        Args:
            tenant_id: the tenant to search.
            sha256: a bare lowercase hex sha256 digest (64 characters).

        Raises:
            InputError: ``sha256`` is not a bare sha256 digest.
        """
        ...

    def record_facts(
        self,
        tenant_id: str,
        conversation_id: str,
        *,
        lineage: Sequence[LineageHop] | None = None,
        as_of_seq: int | None = None,
        after_seq: int = 0,
        terms: bool = True,
    ) -> dict[str, RecordFacts]:
        """Stored write-path facts (``ctxledger.facts``) of the records :meth:`records` would return, by id.

        Facts computed on append are never missing; their ``stamp`` may be old (check ``RecordFacts.current``
        and recompute with :meth:`put_facts`). ``terms=False`` leaves the lexical terms out.
        """
        ...

    def put_facts(self, tenant_id: str, facts: Sequence[RecordFacts]) -> None:
        """Replace the stored facts of existing records of the tenant (after the detectors changed)."""
        ...

    def links(
        self,
        tenant_id: str,
        conversation_id: str,
        *,
        lineage: Sequence[LineageHop] | None = None,
        as_of_seq: int | None = None,
    ) -> list[RecordLink]:
        """Links held by the conversation's records (in the lineage, as of ``as_of_seq``), by ``seq``."""
        ...

    def links_to(self, tenant_id: str, target_ids: Iterable[str]) -> list[RecordLink]:
        """Links held by any record of the tenant that point at ``target_ids`` (the reverse direction)."""
        ...

    def protected(
        self,
        tenant_id: str,
        conversation_id: str,
        *,
        lineage: Sequence[LineageHop] | None = None,
        as_of_seq: int | None = None,
    ) -> list[ProtectedEntry]:
        """Protected-state entries opened in the lineage as of ``as_of_seq`` and not closed there, by ``seq``."""
        ...

    def get_token_counts(self, counter_id: str, hashes: Iterable[str]) -> dict[str, int]:
        """Cached token counts for ``(counter_id, content hash)`` pairs; missing hashes are absent."""
        ...

    def put_token_counts(self, counter_id: str, counts: Mapping[str, int]) -> None:
        """Cache token counts (idempotent)."""
        ...

    def put_assembly(self, manifest: Mapping[str, Any]) -> None:
        """Persist one assembly manifest (a JSON-able mapping with ``id``, ``tenant_id`` …).

        Raises:
            InputError: a bad manifest, or the tenant already has an assembly with that id (ids are
                unique per tenant, like record ids).
        """
        ...

    def get_assembly(self, tenant_id: str, assembly_id: str) -> dict[str, Any]:
        """Return a persisted manifest. Raises ``RecordNotFound``."""
        ...

    def list_assemblies(self, tenant_id: str, conversation_id: str | None = None) -> list[dict[str, Any]]:
        """Manifests of a tenant (optionally one conversation), oldest first."""
        ...

    def record_usage(
        self, tenant_id: str, assembly_id: str, input_tokens: int, output_tokens: int, *, overwrite: bool = False
    ) -> None:
        """Store the usage a provider reported for an assembly's model call (tokens).

        Usage already recorded is replaced only with ``overwrite=True``; the check and the write are
        atomic, so two replicas reporting the same call cannot both win.

        Raises:
            RecordNotFound: no such assembly in the tenant.
            UsageAlreadyRecorded: usage is recorded and ``overwrite`` is false.
        """
        ...

    def delete_tenant(self, tenant_id: str) -> int:
        """Delete every record, assembly and unreferenced blob of a tenant; return records deleted."""
        ...

    # -- retention (ctxledger.retention): the only writes that change or remove stored rows -------------

    def retention_scan(
        self,
        kinds: Sequence[str],
        created_before: datetime,
        *,
        tenant_id: str | None = None,
        after: tuple[str, str] | None = None,
        limit: int = 500,
    ) -> list[Record]:
        """Records of ``kinds`` created before ``created_before``, of one tenant or all, by ``(tenant_id, id)``.

        ``after`` is the ``(tenant_id, id)`` of the last record of the previous page (keyset paging).
        """
        ...

    def assemblies_scan(
        self,
        created_before: datetime,
        *,
        tenant_id: str | None = None,
        after: tuple[str, str] | None = None,
        limit: int = 500,
    ) -> list[dict[str, Any]]:
        """Manifests created before ``created_before`` (of one tenant or all), by ``(tenant_id, id)``."""
        ...

    def apply_retention(self, change: RetentionChange) -> None:
        """Apply one retention batch in one transaction: all of it or nothing (see :class:`RetentionChange`)."""
        ...

    def retention_audit(
        self, tenant_id: str, *, ref: str | None = None, conversation_id: str | None = None
    ) -> list[AuditEntry]:
        """The tenant's retention audit trail (optionally one record or one conversation), oldest first."""
        ...

    def collect_blobs(self, limit: int = 500) -> list[str]:
        """Delete queued blobs that no record of any tenant references; return the sha256 deleted.

        Every queued blob leaves the queue: a referenced one is kept (something still needs it).
        """
        ...

    def close(self) -> None:
        """Release connections."""
        ...
