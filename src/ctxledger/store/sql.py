"""SQLite and PostgreSQL graph store on SQLAlchemy Core (DESIGN §6; STYLE "Storage").

One class, :class:`SqlStore`, serves both dialects over the tables of ``ctxledger.store.schema``; the
dialects differ only in how an engine is made (:func:`sqlite_engine`, :func:`postgres_engine`) and in
how an append serialises with concurrent appenders:

* SQLite (the embedded default) runs in WAL mode with ``synchronous=NORMAL``, foreign keys on and a
  10 s busy timeout. Python's ``sqlite3`` transaction handling is switched off and SQLAlchemy emits
  ``BEGIN`` itself, so reads get a consistent snapshot and appends begin with ``BEGIN IMMEDIATE`` (they
  take the write lock first, so two appenders queue instead of deadlocking).
* PostgreSQL locks the batch's ``conversation_heads`` rows with ``SELECT … FOR UPDATE`` (in a fixed
  order), so concurrent appenders to one conversation queue and never assign the same ``seq``.

Every query filters by ``tenant_id``; records and assemblies are keyed by ``(tenant_id, id)``, so the
duplicate-id check of an append looks only inside each record's own tenant. The append rules themselves
(ids, conversations, ``seq``) are ``ctxledger.store._rules``, shared with the in-memory store.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from datetime import datetime
from pathlib import Path
from typing import Any

from sqlalchemy import and_, bindparam, delete, event, or_, select, update
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.engine import URL, Connection, Engine, create_engine
from sqlalchemy.exc import IntegrityError as SqlIntegrityError
from sqlalchemy.sql.elements import ColumnElement

from ctxledger.errors import ConfigurationError, InputError, RecordNotFound, UsageAlreadyRecorded
from ctxledger.records import Branch, Record, ToolArtifact, utcnow
from ctxledger.store import _rules
from ctxledger.store._migrate import WRITE_OPTION, check_revision, upgrade
from ctxledger.store.base import AuditEntry, BlobStore, LineageHop, RetentionChange
from ctxledger.store.blobs import check_sha256
from ctxledger.store.codec import (
    READ_COLUMNS,
    assembly_from_row,
    assembly_row,
    decode_record,
    decode_row,
    encode_record,
    format_time,
    parse_time,
)
from ctxledger.store.schema import (
    assemblies,
    conversation_heads,
    records,
    retention_audit,
    retention_blob_queue,
    token_counts,
)

CHUNK = 500
"""Largest ``IN (…)`` list sent in one statement (SQLite allows 32,766 parameters; we stay far below)."""

POSTGRES_HINT = "PostgreSQL support needs the psycopg driver: pip install 'ctxledger[postgres]'"

_READ = [records.c[name] for name in READ_COLUMNS]
_HEAD_UPDATE = (
    update(conversation_heads)
    .where(
        conversation_heads.c.tenant_id == bindparam("t"),
        conversation_heads.c.conversation_id == bindparam("c"),
    )
    .values(head_seq=bindparam("h"))
)


def _chunks(items: Sequence[str]) -> Iterator[Sequence[str]]:
    for start in range(0, len(items), CHUNK):
        yield items[start : start + CHUNK]


def _sqlite_connect(dbapi_connection: Any, _record: Any) -> None:
    dbapi_connection.isolation_level = None
    cursor = dbapi_connection.cursor()
    for pragma in ("journal_mode=WAL", "synchronous=NORMAL", "foreign_keys=ON", "busy_timeout=10000"):
        cursor.execute(f"PRAGMA {pragma}")
    cursor.close()


def _sqlite_begin(conn: Connection) -> None:
    immediate = conn.get_execution_options().get(WRITE_OPTION, False)
    conn.exec_driver_sql("BEGIN IMMEDIATE" if immediate else "BEGIN")


def sqlite_engine(path: str | Path) -> Engine:
    """An engine for the SQLite file ``path`` (parent folder created; WAL etc., see the module docstring)."""
    db = Path(path).expanduser()
    db.parent.mkdir(parents=True, exist_ok=True)
    engine = create_engine(URL.create("sqlite+pysqlite", database=str(db)))
    event.listen(engine, "connect", _sqlite_connect)
    event.listen(engine, "begin", _sqlite_begin)
    return engine


def postgres_engine(url: URL) -> Engine:
    """An engine for a PostgreSQL URL (``postgresql://`` means the psycopg 3 driver).

    Raises:
        ConfigurationError: the driver is not installed (the message says which extra to install).
    """
    if url.drivername in ("postgresql", "postgres"):
        url = url.set(drivername="postgresql+psycopg")
    try:
        return create_engine(url, pool_pre_ping=True)
    except ModuleNotFoundError as exc:
        raise ConfigurationError(f"{POSTGRES_HINT} (missing module {exc.name!r})") from exc


def _lineage_filter(lineage: Sequence[LineageHop]) -> ColumnElement[bool]:
    hops = [
        records.c.branch_id == hop.branch_id
        if hop.max_seq is None
        else and_(records.c.branch_id == hop.branch_id, records.c.seq <= hop.max_seq)
        for hop in lineage
    ]
    return or_(*hops)


class SqlStore:
    """The :class:`~ctxledger.store.base.GraphStore` on SQLite or PostgreSQL.

    Args:
        engine: from :func:`sqlite_engine` or :func:`postgres_engine`.
        blobs: where raw artifacts live (usually a :class:`~ctxledger.store.blobs.LocalBlobStore`).
    """

    def __init__(self, engine: Engine, blobs: BlobStore) -> None:
        """Wrap an engine; call :meth:`migrate` (or ``open_store``) before use."""
        self.engine = engine
        self.blobs = blobs
        self._insert = postgresql.insert if engine.dialect.name == "postgresql" else sqlite.insert

    def __repr__(self) -> str:
        """Show the database (without password) and the blob store."""
        return f"SqlStore({self.engine.url.render_as_string(hide_password=True)!r}, {self.blobs!r})"

    def migrate(self) -> None:
        """Create or upgrade the schema to the newest revision (idempotent). Raises ``MigrationError``."""
        upgrade(self.engine)

    def check_schema(self) -> None:
        """Raise ``MigrationError`` unless the database is at the newest revision."""
        check_revision(self.engine)

    @contextmanager
    def _write(self) -> Iterator[Connection]:
        with self.engine.connect() as conn:
            conn.execution_options(**{WRITE_OPTION: True})
            with conn.begin():
                yield conn

    @contextmanager
    def _read(self) -> Iterator[Connection]:
        with self.engine.connect() as conn, conn.begin():
            yield conn

    def append(self, records: Sequence[Record]) -> list[Record]:
        """Append records in one transaction and return them with ``seq`` assigned.

        See ``GraphStore.append`` and ``ctxledger.store._rules`` for the rules.

        Raises:
            InputError: a duplicate id, an unknown conversation, an unstorable field, or a tool artifact
                whose blob is not stored; nothing is written (names the record index and field).
        """
        batch = list(records)
        if not batch:
            return []
        _rules.check_batch(batch)
        _rules.check_blobs(batch, self.blobs.exists)
        rows = [encode_record(r, i) for i, r in enumerate(batch)]
        try:
            with self._write() as conn:
                return self._append_in(conn, batch, rows)
        except SqlIntegrityError as exc:
            raise self._conflict_error(batch) from exc

    def _append_in(self, conn: Connection, batch: list[Record], rows: list[dict[str, Any]]) -> list[Record]:
        error = _rules.duplicate_error(batch, self._existing_keys(conn, batch))
        if error is not None:
            raise error
        plan = _rules.plan_append(batch, self._lock_heads(conn, _rules.conversation_keys(batch)))
        created = {(c.tenant_id, c.conversation_id) for c in plan.created}
        if plan.created:
            conn.execute(conversation_heads.insert(), [self._head_row(c, plan) for c in plan.created])
        updates = [{"t": key[0], "c": key[1], "h": seq} for key, seq in plan.heads.items() if key not in created]
        if updates:
            conn.execute(_HEAD_UPDATE, updates)
        for row, seq in zip(rows, plan.seqs, strict=True):
            row["seq"] = seq
        conn.execute(records.insert(), rows)
        return [decode_record(row) for row in rows]

    @staticmethod
    def _head_row(new: _rules.NewConversation, plan: _rules.AppendPlan) -> dict[str, Any]:
        return {
            "tenant_id": new.tenant_id,
            "conversation_id": new.conversation_id,
            "head_seq": plan.heads[(new.tenant_id, new.conversation_id)],
            "main_branch_id": new.main_branch_id,
            "created_at": format_time(new.record.created_at),
        }

    def _existing_keys(self, conn: Connection, batch: Sequence[Record]) -> set[_rules.RecordKey]:
        """``(tenant_id, id)`` of the batch's records already stored, each looked up in its own tenant only."""
        found: set[_rules.RecordKey] = set()
        for tenant_id, ids in _rules.ids_by_tenant(batch).items():
            for chunk in _chunks(ids):
                stmt = select(records.c.id).where(records.c.tenant_id == tenant_id, records.c.id.in_(chunk))
                found.update((tenant_id, record_id) for record_id in conn.scalars(stmt))
        return found

    def _lock_heads(self, conn: Connection, keys: Sequence[tuple[str, str]]) -> dict[tuple[str, str], int]:
        heads: dict[tuple[str, str], int] = {}
        for tenant_id in sorted({t for t, _ in keys}):
            wanted = [c for t, c in keys if t == tenant_id]
            for chunk in _chunks(wanted):
                stmt = (
                    select(conversation_heads.c.conversation_id, conversation_heads.c.head_seq)
                    .where(
                        conversation_heads.c.tenant_id == tenant_id,
                        conversation_heads.c.conversation_id.in_(chunk),
                    )
                    .order_by(conversation_heads.c.conversation_id)
                    .with_for_update()
                )
                heads.update({(tenant_id, cid): seq for cid, seq in conn.execute(stmt)})
        return heads

    def _conflict_error(self, batch: list[Record]) -> InputError:
        """A concurrent append won a race for an id or a conversation: name the record if we can."""
        with self._read() as conn:
            error = _rules.duplicate_error(batch, self._existing_keys(conn, batch))
        return error or InputError(
            "a concurrent append created the same conversation or ids; nothing was written", source="<append>"
        )

    def get(self, tenant_id: str, record_id: str) -> Record:
        """Return one record of that tenant. Raises ``RecordNotFound`` (also for other tenants' ids)."""
        stmt = select(*_READ).where(records.c.tenant_id == tenant_id, records.c.id == record_id)
        with self._read() as conn:
            row = conn.execute(stmt).first()
        if row is None:
            raise RecordNotFound(tenant_id, record_id)
        return decode_row(row)

    def head_seq(self, tenant_id: str, conversation_id: str) -> int:
        """The highest ``seq`` written in the conversation (0 when empty or unknown)."""
        stmt = select(conversation_heads.c.head_seq).where(
            conversation_heads.c.tenant_id == tenant_id,
            conversation_heads.c.conversation_id == conversation_id,
        )
        with self._read() as conn:
            return int(conn.scalar(stmt) or 0)

    def branch(self, tenant_id: str, branch_id: str) -> Branch:
        """Return a Branch record. Raises ``RecordNotFound``."""
        with self._read() as conn:
            found = self._find_branch(conn, tenant_id, branch_id)
        if found is None:
            raise RecordNotFound(tenant_id, branch_id, what="branch")
        return found

    def _find_branch(self, conn: Connection, tenant_id: str, branch_id: str) -> Branch | None:
        stmt = select(*_READ).where(
            records.c.tenant_id == tenant_id, records.c.id == branch_id, records.c.kind == Branch.kind.value
        )
        row = conn.execute(stmt).first()
        record = decode_row(row) if row is not None else None
        return record if isinstance(record, Branch) else None

    def lineage(self, tenant_id: str, branch_id: str) -> list[LineageHop]:
        """The branch and its ancestors, child first, each with the last ``seq`` it contributes.

        Raises:
            RecordNotFound: ``branch_id`` is neither a Branch record nor a conversation's main branch.
        """
        main = select(conversation_heads.c.conversation_id).where(
            conversation_heads.c.tenant_id == tenant_id, conversation_heads.c.main_branch_id == bindparam("b")
        )
        with self._read() as conn:
            return _rules.walk_lineage(
                tenant_id,
                branch_id,
                lambda candidate: self._find_branch(conn, tenant_id, candidate),
                lambda candidate: conn.execute(main, {"b": candidate}).first() is not None,
            )

    def records(
        self,
        tenant_id: str,
        conversation_id: str,
        *,
        lineage: Sequence[LineageHop] | None = None,
        as_of_seq: int | None = None,
        after_seq: int = 0,
    ) -> list[Record]:
        """Records of one conversation in ``seq`` order with ``after_seq < seq <= as_of_seq``.

        With ``lineage``, only records on those branches within each hop's ``max_seq`` (inclusive).
        """
        if lineage is not None and not lineage:
            return []
        stmt = select(*_READ).where(
            records.c.tenant_id == tenant_id,
            records.c.conversation_id == conversation_id,
            records.c.seq > after_seq,
        )
        if as_of_seq is not None:
            stmt = stmt.where(records.c.seq <= as_of_seq)
        if lineage is not None:
            stmt = stmt.where(_lineage_filter(lineage))
        with self._read() as conn:
            rows = conn.execute(stmt.order_by(records.c.seq)).all()
        return [decode_row(row) for row in rows]

    def conversations(self, tenant_id: str) -> list[str]:
        """Ids of the tenant's conversations, oldest first (by creation time, then id)."""
        stmt = (
            select(conversation_heads.c.conversation_id)
            .where(conversation_heads.c.tenant_id == tenant_id)
            .order_by(conversation_heads.c.created_at, conversation_heads.c.conversation_id)
        )
        with self._read() as conn:
            return list(conn.scalars(stmt))

    def artifacts_by_sha256(self, tenant_id: str, sha256: str) -> list[ToolArtifact]:
        """The tenant's tool artifacts with that bare-hex sha256, by ``seq`` then id (indexed ``blob_sha256``).

        Raises:
            InputError: ``sha256`` is not a bare sha256 digest.
        """
        stmt = (
            select(*_READ)
            .where(
                records.c.blob_sha256 == check_sha256(sha256),
                records.c.tenant_id == tenant_id,
                records.c.kind == ToolArtifact.kind.value,
            )
            .order_by(records.c.seq, records.c.id)
        )
        with self._read() as conn:
            rows = conn.execute(stmt).all()
        return [r for r in (decode_row(row) for row in rows) if isinstance(r, ToolArtifact)]

    def get_token_counts(self, counter_id: str, hashes: Iterable[str]) -> dict[str, int]:
        """Cached token counts for ``(counter_id, content hash)``; missing hashes are absent."""
        wanted = sorted(set(hashes))
        found: dict[str, int] = {}
        with self._read() as conn:
            for chunk in _chunks(wanted):
                stmt = select(token_counts.c.content_hash, token_counts.c.tokens).where(
                    token_counts.c.counter_id == counter_id, token_counts.c.content_hash.in_(chunk)
                )
                found.update({h: int(n) for h, n in conn.execute(stmt)})
        return found

    def put_token_counts(self, counter_id: str, counts: Mapping[str, int]) -> None:
        """Cache token counts (idempotent: ``ON CONFLICT DO NOTHING`` keeps the first count)."""
        rows = [{"counter_id": counter_id, "content_hash": h, "tokens": int(n)} for h, n in counts.items()]
        if not rows:
            return
        stmt = self._insert(token_counts).on_conflict_do_nothing()
        with self._write() as conn:
            for start in range(0, len(rows), CHUNK):
                conn.execute(stmt, rows[start : start + CHUNK])

    def put_assembly(self, manifest: Mapping[str, Any]) -> None:
        """Persist one assembly manifest (see ``codec.assembly_row`` for the columns it fills).

        Raises:
            InputError: a bad manifest, or the tenant already has an assembly with that id.
        """
        row = assembly_row(manifest)
        try:
            with self._write() as conn:
                conn.execute(assemblies.insert(), row)
        except SqlIntegrityError as exc:
            raise InputError(
                f"assembly {row['id']!r} already exists in tenant {row['tenant_id']!r}",
                source="<assembly>",
                field="id",
            ) from exc

    def _assembly_rows(self, tenant_id: str, *where: ColumnElement[bool]) -> list[dict[str, Any]]:
        stmt = (
            select(assemblies)
            .where(assemblies.c.tenant_id == tenant_id, *where)
            .order_by(assemblies.c.created_at, assemblies.c.id)
        )
        with self._read() as conn:
            return [dict(row._mapping) for row in conn.execute(stmt)]

    def get_assembly(self, tenant_id: str, assembly_id: str) -> dict[str, Any]:
        """Return a persisted manifest (with ``observed_usage`` once recorded). Raises ``RecordNotFound``."""
        rows = self._assembly_rows(tenant_id, assemblies.c.id == assembly_id)
        if not rows:
            raise RecordNotFound(tenant_id, assembly_id, what="assembly")
        return assembly_from_row(rows[0])

    def list_assemblies(self, tenant_id: str, conversation_id: str | None = None) -> list[dict[str, Any]]:
        """Manifests of a tenant (optionally one conversation), oldest first (created_at, then id)."""
        where = [] if conversation_id is None else [assemblies.c.conversation_id == conversation_id]
        return [assembly_from_row(row) for row in self._assembly_rows(tenant_id, *where)]

    def record_usage(
        self, tenant_id: str, assembly_id: str, input_tokens: int, output_tokens: int, *, overwrite: bool = False
    ) -> None:
        """Store the usage (tokens) a provider reported for an assembly's call (see ``GraphStore.record_usage``).

        Raises:
            RecordNotFound: no such assembly in the tenant.
            UsageAlreadyRecorded: usage is recorded and ``overwrite`` is false.
        """
        where = [assemblies.c.tenant_id == tenant_id, assemblies.c.id == assembly_id]
        guard = [] if overwrite else [assemblies.c.usage_input_tokens.is_(None)]
        stmt = (
            update(assemblies)
            .where(*where, *guard)
            .values(
                usage_input_tokens=int(input_tokens),
                usage_output_tokens=int(output_tokens),
                observed_at=format_time(utcnow()),
            )
        )
        with self._write() as conn:
            if conn.execute(stmt).rowcount == 0:
                cols = (assemblies.c.usage_input_tokens, assemblies.c.usage_output_tokens)
                row = conn.execute(select(*cols).where(*where)).first()
                if row is None:
                    raise RecordNotFound(tenant_id, assembly_id, what="assembly")
                raise UsageAlreadyRecorded(assembly_id, row[0], row[1])

    def delete_tenant(self, tenant_id: str) -> int:
        """Delete a tenant's records, heads and assemblies, then its blobs no remaining record references.

        Blobs are deleted after the transaction commits, and only those that no record of any tenant
        references any more (DESIGN §6: GC never removes what a live record references).
        """
        blob_column = records.c.blob_sha256
        with self._write() as conn:
            candidates = sorted(
                conn.scalars(
                    select(blob_column).where(records.c.tenant_id == tenant_id, blob_column.is_not(None)).distinct()
                )
            )
            deleted = conn.execute(delete(records).where(records.c.tenant_id == tenant_id)).rowcount
            conn.execute(delete(conversation_heads).where(conversation_heads.c.tenant_id == tenant_id))
            conn.execute(delete(assemblies).where(assemblies.c.tenant_id == tenant_id))
            live: set[str] = set()
            for chunk in _chunks(candidates):
                live.update(conn.scalars(select(blob_column).where(blob_column.in_(chunk)).distinct()))
        for sha in candidates:
            if sha not in live:
                self.blobs.delete(sha)
        return int(deleted)

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
        """Records of ``kinds`` created before ``created_before``, by ``(tenant_id, id)`` after ``after``."""
        stmt = select(*_READ).where(records.c.kind.in_(list(kinds)), records.c.created_at < format_time(created_before))
        if tenant_id is not None:
            stmt = stmt.where(records.c.tenant_id == tenant_id)
        if after is not None:
            stmt = stmt.where(
                or_(
                    records.c.tenant_id > after[0],
                    and_(records.c.tenant_id == after[0], records.c.id > after[1]),
                )
            )
        stmt = stmt.order_by(records.c.tenant_id, records.c.id).limit(limit)
        with self._read() as conn:
            return [decode_row(row) for row in conn.execute(stmt)]

    def assemblies_scan(
        self,
        created_before: datetime,
        *,
        tenant_id: str | None = None,
        after: tuple[str, str] | None = None,
        limit: int = 500,
    ) -> list[dict[str, Any]]:
        """Manifests created before ``created_before``, by ``(tenant_id, id)`` after ``after``."""
        stmt = select(assemblies).where(assemblies.c.created_at < format_time(created_before))
        if tenant_id is not None:
            stmt = stmt.where(assemblies.c.tenant_id == tenant_id)
        if after is not None:
            stmt = stmt.where(
                or_(
                    assemblies.c.tenant_id > after[0],
                    and_(assemblies.c.tenant_id == after[0], assemblies.c.id > after[1]),
                )
            )
        stmt = stmt.order_by(assemblies.c.tenant_id, assemblies.c.id).limit(limit)
        with self._read() as conn:
            return [assembly_from_row(dict(row._mapping)) for row in conn.execute(stmt)]

    def apply_retention(self, change: RetentionChange) -> None:
        """Apply one retention batch in one transaction (see ``GraphStore.apply_retention``).

        A rewritten record keeps its id, envelope and ``seq``; its body is replaced and its blob reference
        (``blob_sha256``) cleared, so blob collection no longer counts it.
        """
        with self._write() as conn:
            for rec in change.rewrite:
                row = encode_record(rec)
                conn.execute(
                    update(records)
                    .where(records.c.tenant_id == rec.tenant_id, records.c.id == rec.id)
                    .values(body=row["body"], blob_sha256=None)
                )
            for tenant_id, record_id in change.delete:
                conn.execute(delete(records).where(records.c.tenant_id == tenant_id, records.c.id == record_id))
            for tenant_id, conversation_id in change.conversations:
                for table in (records, conversation_heads, assemblies):
                    conn.execute(
                        delete(table).where(table.c.tenant_id == tenant_id, table.c.conversation_id == conversation_id)
                    )
            for manifest in change.assemblies:
                row = assembly_row(manifest)
                conn.execute(
                    update(assemblies)
                    .where(assemblies.c.tenant_id == row["tenant_id"], assemblies.c.id == row["id"])
                    .values(manifest=row["manifest"])
                )
            for tenant_id, assembly_id in change.delete_assemblies:
                conn.execute(
                    delete(assemblies).where(assemblies.c.tenant_id == tenant_id, assemblies.c.id == assembly_id)
                )
            if change.audit:
                conn.execute(retention_audit.insert(), [_audit_row(e) for e in change.audit])
            if change.blobs:
                queued = [{"sha256": sha, "queued_at": format_time(utcnow())} for sha in sorted(set(change.blobs))]
                conn.execute(self._insert(retention_blob_queue).on_conflict_do_nothing(), queued)

    def retention_audit(
        self, tenant_id: str, *, ref: str | None = None, conversation_id: str | None = None
    ) -> list[AuditEntry]:
        """The tenant's retention audit trail (optionally one record or conversation), oldest first."""
        stmt = select(retention_audit).where(retention_audit.c.tenant_id == tenant_id)
        if ref is not None:
            stmt = stmt.where(retention_audit.c.ref == ref)
        if conversation_id is not None:
            stmt = stmt.where(retention_audit.c.conversation_id == conversation_id)
        with self._read() as conn:
            rows = conn.execute(stmt.order_by(retention_audit.c.id)).all()
        return [_audit_entry(row._mapping) for row in rows]

    def collect_blobs(self, limit: int = 500) -> list[str]:
        """Delete queued blobs no record of any tenant references; every queued blob leaves the queue."""
        with self._read() as conn:
            queued = list(conn.scalars(select(retention_blob_queue.c.sha256).order_by("sha256").limit(limit)))
            live = set(conn.scalars(select(records.c.blob_sha256).where(records.c.blob_sha256.in_(queued)).distinct()))
        gone = [sha for sha in queued if sha not in live]
        for sha in gone:
            self.blobs.delete(sha)
        if queued:
            with self._write() as conn:
                conn.execute(delete(retention_blob_queue).where(retention_blob_queue.c.sha256.in_(queued)))
        return gone

    def close(self) -> None:
        """Release every pooled connection (and the blob store's own, if it has any)."""
        close_blobs = getattr(self.blobs, "close", None)
        if close_blobs is not None:
            close_blobs()
        self.engine.dispose()


def _audit_row(entry: AuditEntry) -> dict[str, Any]:
    return {
        "tenant_id": entry.tenant_id,
        "conversation_id": entry.conversation_id,
        "target": entry.target,
        "ref": entry.ref,
        "kind": entry.kind,
        "rule": entry.rule,
        "action": entry.action,
        "at": format_time(entry.at),
        "before_sha256": entry.before_sha256,
        "after_sha256": entry.after_sha256,
        "detail": entry.detail,
    }


def _audit_entry(row: Mapping[str, Any]) -> AuditEntry:
    values = {k: row[k] for k in _AUDIT_FIELDS}
    values["at"] = parse_time(values["at"])
    return AuditEntry(**values)


_AUDIT_FIELDS = (
    "tenant_id",
    "conversation_id",
    "target",
    "ref",
    "kind",
    "rule",
    "action",
    "at",
    "before_sha256",
    "after_sha256",
    "detail",
)
