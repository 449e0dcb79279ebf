"""The in-memory stores, graph and blobs.

:class:`MemoryStore` is a :class:`~ctxledger.store.base.GraphStore` and :class:`MemoryBlobStore` a
:class:`~ctxledger.store.base.BlobStore`.

:class:`MemoryStore` is the reference graph store, opened by ``open_store("memory://")``: it applies the same
append and lineage rules (``ctxledger.store._rules``) and the same record codec (``ctxledger.store.codec``) as
the SQL backends, so a record read back from memory equals one read back from SQLite or PostgreSQL, and the
same inputs are refused with the same errors. Nothing is persistent; every method is thread-safe.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from ctxledger.errors import BlobNotFound, InputError, IntegrityError, RecordNotFound, UsageAlreadyRecorded
from ctxledger.facts import RecordFacts, compute_facts
from ctxledger.hashing import sha256_hex
from ctxledger.records import (
    Branch,
    Record,
    ToolArtifact,
    blob_references,
    utcnow,
)
from ctxledger.store import _index, _rules
from ctxledger.store.base import (
    AuditEntry,
    BlobRef,
    BlobStore,
    LineageHop,
    ProtectedEntry,
    RecordLink,
    RetentionChange,
)
from ctxledger.store.blobs import check_range, check_sha256
from ctxledger.store.codec import (
    assembly_from_row,
    assembly_row,
    decode_record,
    encode_record,
    format_time,
)

__all__ = ["MemoryBlobStore", "MemoryStore"]


class MemoryBlobStore:
    """Content-addressed blobs in a dict, with the semantics of ``ctxledger.store.blobs.LocalBlobStore``."""

    def __init__(self) -> None:
        """Start empty."""
        self._blobs: dict[str, bytes] = {}
        self._lock = threading.Lock()

    def put(self, data: bytes, media_type: str = "application/octet-stream") -> BlobRef:
        """Store ``data`` (idempotent) and return its reference (``size_bytes`` in bytes)."""
        blob = bytes(data)
        sha = sha256_hex(blob)
        with self._lock:
            self._blobs.setdefault(sha, blob)
        return BlobRef(sha256=sha, size_bytes=len(blob), media_type=media_type)

    def get(self, sha256: str) -> bytes:
        """Return the exact bytes named ``sha256``.

        Raises:
            BlobNotFound: no such blob.
            IntegrityError: the stored bytes no longer hash to ``sha256`` (see :meth:`tamper`).
            InputError: ``sha256`` is not a bare hex digest.
        """
        check_sha256(sha256)
        data = self._blobs.get(sha256)
        if data is None:
            raise BlobNotFound(sha256, "memory")
        if sha256_hex(data) != sha256:
            raise IntegrityError(f"in-memory blob does not hash to its name {sha256}")
        return data

    def get_range(self, sha256: str, start: int, end: int) -> bytes:
        """Return bytes ``[start, end)`` of a verified blob (``end`` past the size is clamped)."""
        check_range(start, end)
        return self.get(sha256)[start:end]

    def exists(self, sha256: str) -> bool:
        """Whether a blob named ``sha256`` is stored."""
        return check_sha256(sha256) in self._blobs

    def delete(self, sha256: str) -> None:
        """Remove a blob if present."""
        with self._lock:
            self._blobs.pop(check_sha256(sha256), None)

    def tamper(self, sha256: str, data: bytes) -> None:
        """Replace a stored blob's bytes without renaming it (to test integrity checks)."""
        self._blobs[check_sha256(sha256)] = bytes(data)

    def __len__(self) -> int:
        """Number of stored blobs."""
        return len(self._blobs)


@dataclass(slots=True)
class _Head:
    seq: int
    main_branch_id: str
    created_at: str


@dataclass(slots=True)
class _Tenant:
    """Everything one tenant owns."""

    heads: dict[str, _Head] = field(default_factory=dict)
    records: dict[str, Record] = field(default_factory=dict)
    by_conversation: dict[str, list[Record]] = field(default_factory=dict)
    assemblies: dict[str, dict[str, Any]] = field(default_factory=dict)
    facts: dict[str, RecordFacts] = field(default_factory=dict)
    links: dict[str, list[RecordLink]] = field(default_factory=dict)  # by conversation, in append order
    entries: dict[str, dict[tuple[str, str], ProtectedEntry]] = field(default_factory=dict)  # by conversation
    open_entries: dict[tuple[str, str, str], dict[tuple[str, str], ProtectedEntry]] = field(default_factory=dict)
    """The open entries by (conversation, state, subject): what a new record may close."""
    blobless: set[str] = field(default_factory=set)
    """Ids of records retention rewrote: they keep their ``sha256`` field but no longer reference the blob."""
    rungs: dict[str, tuple[str, bytes]] = field(default_factory=dict)
    """The ladder's stored rungs: key → (conversation id, body) (:mod:`ctxledger.assemble.rung_memo`)."""


class MemoryStore:
    """The in-memory reference :class:`~ctxledger.store.base.GraphStore` (thread-safe, not persistent).

    Args:
        blobs: the blob store to use (a fresh :class:`MemoryBlobStore` by default).
    """

    def __init__(self, blobs: BlobStore | None = None) -> None:
        """Start empty."""
        self.blobs: BlobStore = blobs if blobs is not None else MemoryBlobStore()
        self._tenants: dict[str, _Tenant] = {}
        self._token_counts: dict[tuple[str, str], int] = {}
        self._lock = threading.RLock()
        self._audit: list[AuditEntry] = []
        self._blob_queue: set[str] = set()

    def _tenant(self, tenant_id: str) -> _Tenant:
        return self._tenants.get(tenant_id) or _Tenant()

    def migrate(self) -> None:
        """Nothing to migrate in memory."""

    def append(self, records: Sequence[Record]) -> list[Record]:
        """Append records atomically and return them with ``seq`` assigned (see ``GraphStore.append``).

        Raises:
            InputError: a duplicate id, an unknown conversation, an unstorable field, or a tool artifact
                whose blob is not stored (nothing written).
        """
        batch = list(records)
        _rules.check_batch(batch)
        _rules.check_blobs(batch, self.blobs.exists, getattr(self.blobs, "existing", None))
        rows = [encode_record(r, i) for i, r in enumerate(batch)]
        with self._lock:
            stored = (_rules.record_key(r) for r in batch if r.id in self._tenant(r.tenant_id).records)
            error = _rules.duplicate_error(batch, stored)
            if error is not None:
                raise error
            heads = {
                key: self._tenant(key[0]).heads[key[1]].seq
                for key in _rules.conversation_keys(batch)
                if key[1] in self._tenant(key[0]).heads
            }
            plan = _rules.plan_append(batch, heads)
            written = self._write(plan, rows)
            self._write_facts(written, compute_facts(written, self.blobs.get, self._find))
            return written

    def _find(self, tenant_id: str, record_id: str) -> Record | None:
        return self._tenant(tenant_id).records.get(record_id)

    def _write_facts(self, written: Sequence[Record], facts: Sequence[RecordFacts]) -> None:
        """Facts, links and protected-state entries of the new records (``ctxledger.store._index``)."""
        for rec, f in zip(written, facts, strict=True):
            self._tenants[rec.tenant_id].facts[rec.id] = f
        closable = {(r.tenant_id, r.conversation_id, *key) for r in written for key in _index.closers(r)}
        stored = [
            (tenant_id, conv, e)
            for tenant_id in {r.tenant_id for r in written}
            for (conv, state, subject), entries in self._tenants[tenant_id].open_entries.items()
            if (tenant_id, conv, state, subject) in closable
            for e in entries.values()
        ]
        index = _index.OpenEntries(stored)
        for rec in written:
            tenant = self._tenants[rec.tenant_id]
            tenant.links.setdefault(rec.conversation_id, []).extend(_index.links_of(rec))
            index.append(rec)
        for rec, entry in [*index.new, *index.closed_stored]:
            tenant = self._tenants[rec.tenant_id]
            key = (entry.record_id, entry.state)
            tenant.entries.setdefault(rec.conversation_id, {})[key] = entry
            still_open = tenant.open_entries.setdefault((rec.conversation_id, entry.state, entry.subject), {})
            if entry.closed_by is None:
                still_open[key] = entry
            else:
                still_open.pop(key, None)

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
        """Stored write-path facts by record id, filtered like :meth:`records` (see ``GraphStore.record_facts``)."""
        chosen = self.records(tenant_id, conversation_id, lineage=lineage, as_of_seq=as_of_seq, after_seq=after_seq)
        facts = self._tenant(tenant_id).facts
        return {r.id: facts[r.id] if terms else facts[r.id].without_terms() for r in chosen if r.id in facts}

    def put_facts(self, tenant_id: str, facts: Sequence[RecordFacts]) -> None:
        """Replace the stored facts of existing records of the tenant."""
        with self._lock:
            stored = self._tenant(tenant_id).facts
            for f in facts:
                if f.record_id in stored:
                    stored[f.record_id] = f

    def links(
        self,
        tenant_id: str,
        conversation_id: str,
        *,
        lineage: Sequence[LineageHop] | None = None,
        as_of_seq: int | None = None,
    ) -> list[RecordLink]:
        """Links held by the conversation's records in the lineage as of ``as_of_seq``, by ``seq``."""
        found = self._tenant(tenant_id).links.get(conversation_id, [])
        chosen = [link for link in found if _index.link_in(link, lineage, as_of_seq)]
        return sorted(chosen, key=lambda link: (link.seq, link.relation, link.target_id))

    def links_to(self, tenant_id: str, target_ids: Iterable[str]) -> list[RecordLink]:
        """Links of any record of the tenant pointing at ``target_ids``, by ``seq``."""
        wanted = set(target_ids)
        found = [link for links in self._tenant(tenant_id).links.values() for link in links if link.target_id in wanted]
        return sorted(found, key=lambda link: (link.seq, link.source_id, link.relation, link.target_id))

    def protected(
        self,
        tenant_id: str,
        conversation_id: str,
        *,
        lineage: Sequence[LineageHop] | None = None,
        as_of_seq: int | None = None,
    ) -> list[ProtectedEntry]:
        """Protected-state entries open in the lineage as of ``as_of_seq``, by ``seq``."""
        entries = self._tenant(tenant_id).entries.get(conversation_id, {}).values()
        chosen = [e for e in entries if _index.open_in(e, lineage, as_of_seq)]
        return sorted(chosen, key=lambda e: (e.seq, e.state))

    def _write(self, plan: _rules.AppendPlan, rows: list[dict[str, Any]]) -> list[Record]:
        stored = [decode_record({**row, "seq": seq}) for row, seq in zip(rows, plan.seqs, strict=True)]
        for new in plan.created:
            tenant = self._tenants.setdefault(new.tenant_id, _Tenant())
            created = format_time(new.record.created_at)
            tenant.heads[new.conversation_id] = _Head(0, new.main_branch_id, created)
        for (tenant_id, conversation_id), seq in plan.heads.items():
            self._tenants[tenant_id].heads[conversation_id].seq = seq
        for record in stored:
            tenant = self._tenants[record.tenant_id]
            tenant.records[record.id] = record
            tenant.by_conversation.setdefault(record.conversation_id, []).append(record)
        return stored

    def get(self, tenant_id: str, record_id: str) -> Record:
        """Return one record of that tenant. Raises ``RecordNotFound``."""
        record = self._tenant(tenant_id).records.get(record_id)
        if record is None:
            raise RecordNotFound(tenant_id, record_id)
        return record

    def head_seq(self, tenant_id: str, conversation_id: str) -> int:
        """The highest ``seq`` written in the conversation (0 when empty or unknown)."""
        head = self._tenant(tenant_id).heads.get(conversation_id)
        return head.seq if head else 0

    def branch(self, tenant_id: str, branch_id: str) -> Branch:
        """Return a Branch record. Raises ``RecordNotFound``."""
        record = self._tenant(tenant_id).records.get(branch_id)
        if not isinstance(record, Branch):
            raise RecordNotFound(tenant_id, branch_id, what="branch")
        return record

    def lineage(self, tenant_id: str, branch_id: str) -> list[LineageHop]:
        """The branch and its ancestors, child first (``ctxledger.store._rules.walk_lineage``)."""
        tenant = self._tenant(tenant_id)

        def find(candidate: str) -> Branch | None:
            record = tenant.records.get(candidate)
            return record if isinstance(record, Branch) else None

        def is_main(candidate: str) -> bool:
            return any(head.main_branch_id == candidate for head in tenant.heads.values())

        return _rules.walk_lineage(tenant_id, branch_id, find, is_main)

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
        """Records with ``after_seq < seq <= as_of_seq`` in ``seq`` order (see ``GraphStore.records``)."""
        with self._lock:
            rows = list(self._tenant(tenant_id).by_conversation.get(conversation_id, ()))
        return [
            r
            for r in rows
            if r.seq > after_seq
            and (as_of_seq is None or r.seq <= as_of_seq)
            and (lineage is None or _rules.in_lineage(r, lineage) != outside_lineage)
        ]

    def conversations(self, tenant_id: str) -> list[str]:
        """Ids of the tenant's conversations, oldest first (by creation time, then id)."""
        heads = self._tenant(tenant_id).heads
        return sorted(heads, key=lambda cid: (heads[cid].created_at, cid))

    def artifacts_by_sha256(self, tenant_id: str, sha256: str) -> list[ToolArtifact]:
        """The tenant's tool artifacts with that bare-hex sha256, by ``seq`` then id.

        Raises:
            InputError: ``sha256`` is not a bare sha256 digest.
        """
        check_sha256(sha256)
        with self._lock:
            found = [
                r
                for r in self._tenant(tenant_id).records.values()
                if isinstance(r, ToolArtifact) and r.sha256 == sha256
            ]
        return sorted(found, key=lambda r: (r.seq, r.id))

    def get_token_counts(self, counter_id: str, hashes: Iterable[str]) -> dict[str, int]:
        """Cached token counts for ``(counter_id, hash)``; missing hashes are absent."""
        found = ((h, self._token_counts.get((counter_id, h))) for h in hashes)
        return {h: n for h, n in found if n is not None}

    def put_token_counts(self, counter_id: str, counts: Mapping[str, int]) -> None:
        """Cache token counts (idempotent: an existing entry is kept)."""
        with self._lock:
            for content_hash, tokens in counts.items():
                self._token_counts.setdefault((counter_id, content_hash), int(tokens))

    def get_rungs(self, tenant_id: str, key: str) -> bytes | None:
        """The stored rungs under ``key`` (:mod:`ctxledger.assemble.rung_memo`), or ``None``."""
        with self._lock:
            found = self._tenant(tenant_id).rungs.get(key)
        return None if found is None else found[1]

    def put_rungs(self, tenant_id: str, rows: Mapping[str, tuple[str, bytes]]) -> None:
        """Keep rungs: key → (conversation id, body); an existing key keeps its body."""
        with self._lock:
            tenant = self._tenants.setdefault(tenant_id, _Tenant())
            for key, (conversation_id, body) in rows.items():
                tenant.rungs.setdefault(key, (conversation_id, bytes(body)))

    def put_assembly(self, manifest: Mapping[str, Any]) -> None:
        """Persist one manifest. Raises ``InputError`` for a bad manifest or an id the tenant already has."""
        row = assembly_row(manifest)
        with self._lock:
            tenant = self._tenants.setdefault(row["tenant_id"], _Tenant())
            if row["id"] in tenant.assemblies:
                raise InputError(
                    f"assembly {row['id']!r} already exists in tenant {row['tenant_id']!r}",
                    source="<assembly>",
                    field="id",
                )
            tenant.assemblies[row["id"]] = row

    def get_assembly(self, tenant_id: str, assembly_id: str) -> dict[str, Any]:
        """Return a persisted manifest (with ``observed_usage`` once recorded). Raises ``RecordNotFound``."""
        row = self._tenant(tenant_id).assemblies.get(assembly_id)
        if row is None:
            raise RecordNotFound(tenant_id, assembly_id, what="assembly")
        return assembly_from_row(row)

    def list_assemblies(self, tenant_id: str, conversation_id: str | None = None) -> list[dict[str, Any]]:
        """Manifests of a tenant (optionally one conversation), oldest first (created_at, then id)."""
        rows = [
            row
            for row in self._tenant(tenant_id).assemblies.values()
            if conversation_id is None or row["conversation_id"] == conversation_id
        ]
        return [assembly_from_row(r) for r in sorted(rows, key=lambda r: (r["created_at"], r["id"]))]

    def record_usage(
        self, tenant_id: str, assembly_id: str, input_tokens: int, output_tokens: int, *, overwrite: bool = False
    ) -> None:
        """Store provider-reported usage (tokens) for an assembly (see ``GraphStore.record_usage``).

        Raises:
            RecordNotFound: no such assembly in the tenant.
            UsageAlreadyRecorded: usage is recorded and ``overwrite`` is false.
        """
        with self._lock:
            row = self._tenant(tenant_id).assemblies.get(assembly_id)
            if row is None:
                raise RecordNotFound(tenant_id, assembly_id, what="assembly")
            if row["usage_input_tokens"] is not None and not overwrite:
                raise UsageAlreadyRecorded(assembly_id, row["usage_input_tokens"], row["usage_output_tokens"])
            row.update(
                usage_input_tokens=int(input_tokens),
                usage_output_tokens=int(output_tokens),
                observed_at=format_time(utcnow()),
            )

    def delete_tenant(self, tenant_id: str) -> int:
        """Delete a tenant's records, assemblies and unreferenced blobs; return records deleted."""
        with self._lock:
            tenant = self._tenants.pop(tenant_id, None)
            if tenant is None:
                return 0
            candidates = {
                sha for r in tenant.records.values() if r.id not in tenant.blobless for sha in blob_references(r)
            }
            live = self._live_blobs()
        for sha in sorted(candidates - live):
            self.blobs.delete(sha)
        return len(tenant.records)

    # -- retention (ctxledger.retention): the only writes that change or remove stored rows -------------

    def _live_blobs(self) -> set[str]:
        return {
            sha
            for t in self._tenants.values()
            for r in t.records.values()
            if r.id not in t.blobless
            for sha in blob_references(r)
        }

    def retention_scan(
        self,
        kinds: Sequence[str],
        created_before: datetime,
        *,
        tenant_id: str | None = None,
        after: tuple[str, str] | None = None,
        limit: int = 500,
    ) -> list[Record]:
        """Records of ``kinds`` created before ``created_before``, by ``(tenant_id, id)`` after ``after``."""
        with self._lock:
            found = [
                r
                for tid, t in self._tenants.items()
                if tenant_id is None or tid == tenant_id
                for r in t.records.values()
                if r.kind.value in kinds
                and r.created_at < created_before
                and (after is None or (r.tenant_id, r.id) > after)
            ]
        return sorted(found, key=lambda r: (r.tenant_id, r.id))[:limit]

    def assemblies_scan(
        self,
        created_before: datetime,
        *,
        tenant_id: str | None = None,
        after: tuple[str, str] | None = None,
        limit: int = 500,
    ) -> list[dict[str, Any]]:
        """Manifests created before ``created_before``, by ``(tenant_id, id)`` after ``after``."""
        cutoff = format_time(created_before)
        with self._lock:
            rows = [
                row
                for tid, t in self._tenants.items()
                if tenant_id is None or tid == tenant_id
                for row in t.assemblies.values()
                if row["created_at"] < cutoff and (after is None or (row["tenant_id"], row["id"]) > after)
            ]
        rows.sort(key=lambda r: (r["tenant_id"], r["id"]))
        return [assembly_from_row(r) for r in rows[:limit]]

    def apply_retention(self, change: RetentionChange) -> None:
        """Apply one retention batch atomically (see ``GraphStore.apply_retention``)."""
        rows = [encode_record(r) for r in change.rewrite]  # checked before anything changes
        manifests = [assembly_row(m) for m in change.assemblies]
        fresh = compute_facts([decode_record(row) for row in rows], self.blobs.get, self._find)
        with self._lock:
            self._forget_rungs(change)
            for rec, row, facts in zip(change.rewrite, rows, fresh, strict=True):
                tenant = self._tenants[rec.tenant_id]
                stored = decode_record({**row, "seq": tenant.records[rec.id].seq})
                tenant.records[rec.id] = stored
                tenant.blobless.add(rec.id)
                tenant.facts[rec.id] = facts
                conv = tenant.by_conversation[rec.conversation_id]
                conv[:] = [stored if r.id == rec.id else r for r in conv]
            for tenant_id, record_id in change.delete:
                tenant = self._tenant(tenant_id)
                gone = tenant.records.pop(record_id, None)
                if gone is not None:
                    conv = tenant.by_conversation[gone.conversation_id]
                    conv[:] = [r for r in conv if r.id != record_id]
                    tenant.blobless.discard(record_id)
                    self._forget_facts(tenant, gone.conversation_id, {record_id})
            for tenant_id, conversation_id in change.conversations:
                tenant = self._tenant(tenant_id)
                gone_ids = set()
                for r in tenant.by_conversation.pop(conversation_id, []):
                    tenant.records.pop(r.id, None)
                    tenant.blobless.discard(r.id)
                    gone_ids.add(r.id)
                self._forget_facts(tenant, conversation_id, gone_ids)
                tenant.heads.pop(conversation_id, None)
                for aid in [a for a, row in tenant.assemblies.items() if row["conversation_id"] == conversation_id]:
                    del tenant.assemblies[aid]
            for row in manifests:
                held = self._tenant(row["tenant_id"]).assemblies.get(row["id"])
                if held is not None:
                    held["manifest"] = row["manifest"]
            for tenant_id, assembly_id in change.delete_assemblies:
                self._tenant(tenant_id).assemblies.pop(assembly_id, None)
            self._audit.extend(change.audit)
            self._blob_queue.update(change.blobs)

    def _forget_rungs(self, change: RetentionChange) -> None:
        """Drop the stored rungs of every conversation the change rewrites or removes a record of."""
        touched = {(r.tenant_id, r.conversation_id) for r in change.rewrite} | set(change.conversations)
        for tenant_id, record_id in change.delete:
            gone = self._tenant(tenant_id).records.get(record_id)
            if gone is not None:
                touched.add((tenant_id, gone.conversation_id))
        for tenant_id, conversation_id in touched:
            rungs = self._tenant(tenant_id).rungs
            for key in [k for k, (conv, _) in rungs.items() if conv == conversation_id]:
                del rungs[key]

    @staticmethod
    def _forget_facts(tenant: _Tenant, conversation_id: str, ids: set[str]) -> None:
        """Drop the facts, links and protected-state entries of deleted records."""
        for rid in ids:
            tenant.facts.pop(rid, None)
        links = tenant.links.get(conversation_id)
        if links is not None:
            links[:] = [link for link in links if link.source_id not in ids]
        entries = tenant.entries.get(conversation_id, {})
        for key in [k for k in entries if k[0] in ids]:
            del entries[key]
        for (conv, _, _), still_open in tenant.open_entries.items():
            if conv == conversation_id:
                for key in [k for k in still_open if k[0] in ids]:
                    del still_open[key]

    def retention_audit(
        self, tenant_id: str, *, ref: str | None = None, conversation_id: str | None = None
    ) -> list[AuditEntry]:
        """The tenant's retention audit trail (optionally one record or conversation), oldest first."""
        with self._lock:
            return [
                e
                for e in self._audit
                if e.tenant_id == tenant_id
                and (ref is None or e.ref == ref)
                and (conversation_id is None or e.conversation_id == conversation_id)
            ]

    def collect_blobs(self, limit: int = 500) -> list[str]:
        """Delete queued blobs no record of any tenant references; every queued blob leaves the queue."""
        with self._lock:
            queued = sorted(self._blob_queue)[:limit]
            live = self._live_blobs()
            self._blob_queue.difference_update(queued)
        gone = [sha for sha in queued if sha not in live]
        for sha in gone:
            self.blobs.delete(sha)
        return gone

    def close(self) -> None:
        """Nothing to release."""
