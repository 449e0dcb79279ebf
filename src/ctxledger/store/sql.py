"""SQLite and PostgreSQL graph store on SQLAlchemy Core (STYLE "Storage").

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

import functools
import os
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from datetime import datetime
from pathlib import Path
from typing import Any

from sqlalchemy import and_, bindparam, delete, event, not_, or_, select, update
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.engine import URL, Connection, Engine, create_engine
from sqlalchemy.exc import IntegrityError as SqlIntegrityError
from sqlalchemy.sql.elements import ColumnElement

from ctxledger.errors import ConfigurationError, InputError, RecordNotFound, StoreError, UsageAlreadyRecorded
from ctxledger.facts import RecordFacts, compute_facts, decode_facts, encode_facts
from ctxledger.records import Branch, Record, ToolArtifact, utcnow
from ctxledger.store import _index, _rules
from ctxledger.store._migrate import WRITE_OPTION, check_revision, connect_timeout, upgrade
from ctxledger.store.base import AuditEntry, BlobStore, LineageHop, ProtectedEntry, RecordLink, RetentionChange
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
from ctxledger.store.gc import kept_raw_outputs, referenced_blobs, referenced_in
from ctxledger.store.schema import (
    assemblies,
    conversation_heads,
    protected_state,
    record_facts,
    record_links,
    records,
    retention_audit,
    retention_blob_queue,
    rung_memo,
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
_TOKEN_COUNTS = select(token_counts.c.content_hash, token_counts.c.tokens).where(
    token_counts.c.counter_id == bindparam("c"), token_counts.c.content_hash.in_(bindparam("h", expanding=True))
)
"""Cached counts of one counter for a list of content hashes (``h``, expanding: at most ``CHUNK`` of them)."""
_HEAD_SEQ = select(conversation_heads.c.head_seq).where(
    conversation_heads.c.tenant_id == bindparam("tenant_id"),
    conversation_heads.c.conversation_id == bindparam("conversation_id"),
)
"""A conversation's head ``seq`` (built once: every assembly asks for it)."""

_REWRITE = (
    update(records)
    .where(records.c.tenant_id == bindparam("t"), records.c.id == bindparam("i"))
    .values(body=bindparam("b"), blob_sha256=None)
)
_DELETE = delete(records).where(records.c.tenant_id == bindparam("t"), records.c.id == bindparam("i"))


_CLOSE = (
    update(protected_state)
    .where(
        protected_state.c.tenant_id == bindparam("t"),
        protected_state.c.record_id == bindparam("r"),
        protected_state.c.state == bindparam("st"),
    )
    .values(closed_by=bindparam("b"), closed_branch_id=bindparam("cb"), closed_seq=bindparam("cs"))
)


def _facts_row(rec: Record, facts: RecordFacts) -> dict[str, Any]:
    return {
        "tenant_id": rec.tenant_id,
        "record_id": rec.id,
        "conversation_id": rec.conversation_id,
        "branch_id": rec.branch_id,
        "seq": rec.seq,
        "stamp": facts.stamp,
        "body": encode_facts(facts).decode("utf-8"),
    }


def _sqlite_insert(
    conn: Connection, table: Any, rows: Sequence[Mapping[str, Any]], *, skip_conflicts: bool = False
) -> int:
    """Insert ``rows`` (column name -> value) into a SQLite ``table`` with one ``executemany``; how many were inserted.

    The rows' values go to the driver as they are (every column of these tables is text or an integer, which
    SQLAlchemy binds unchanged on SQLite), without building a statement per chunk of rows. ``skip_conflicts``:
    a row whose key is taken is skipped (``ON CONFLICT DO NOTHING``) and not counted. Runs in ``conn``'s
    transaction.
    """
    if not rows:
        return 0
    names = list(rows[0])
    columns = ", ".join(f'"{name}"' for name in names)
    marks = ", ".join("?" * len(names))
    conflict = " ON CONFLICT DO NOTHING" if skip_conflicts else ""
    sql = f'INSERT INTO "{table.name}" ({columns}) VALUES ({marks}){conflict}'
    values = [tuple(row[name] for name in names) for row in rows]
    return conn.exec_driver_sql(sql, values).rowcount


def _assign_seqs(decoded: list[Record], seqs: Sequence[int]) -> list[Record]:
    """``decoded`` (records :func:`decode_record` made from an append's rows) with their assigned ``seq``, in place.

    The same records as decoding the rows again once their ``seq`` is set, at no cost: the objects were made
    by this append and nothing else holds them yet (the facts computed from them keep no record).
    """
    for rec, seq in zip(decoded, seqs, strict=True):
        object.__setattr__(rec, "seq", seq)  # a frozen record, not yet handed out
    return decoded


def _link_row(rec: Record, link: RecordLink) -> dict[str, Any]:
    return {
        "tenant_id": rec.tenant_id,
        "conversation_id": rec.conversation_id,
        "branch_id": link.branch_id,
        "seq": link.seq,
        "source_id": link.source_id,
        "relation": link.relation,
        "target_id": link.target_id,
    }


def _link(row: Any) -> RecordLink:
    return RecordLink(row["source_id"], row["relation"], row["target_id"], row["branch_id"], int(row["seq"]))


def _entry_row(rec: Record, entry: ProtectedEntry) -> dict[str, Any]:
    return {
        "tenant_id": rec.tenant_id,
        "conversation_id": rec.conversation_id,
        "record_id": entry.record_id,
        "state": entry.state,
        "branch_id": entry.branch_id,
        "seq": entry.seq,
        "subject": entry.subject,
        "closed_by": entry.closed_by,
        "closed_branch_id": entry.closed_branch_id,
        "closed_seq": entry.closed_seq,
    }


def _entry(row: Any) -> ProtectedEntry:
    closed_seq = row["closed_seq"]
    return ProtectedEntry(
        row["record_id"],
        row["state"],
        row["branch_id"],
        int(row["seq"]),
        row["subject"],
        row["closed_by"],
        row["closed_branch_id"],
        int(closed_seq) if closed_seq is not None else None,
    )


def _closed_in(lineage: Sequence[LineageHop] | None, as_of_seq: int | None) -> ColumnElement[bool]:
    """Protected-state rows closed by a record in ``lineage`` as of ``as_of_seq``."""
    cols = protected_state.c
    if lineage is None:
        return cols.closed_seq <= as_of_seq if as_of_seq is not None else cols.closed_seq.is_not(None)
    hops = []
    for hop in lineage:
        bounds = [b for b in (hop.max_seq, as_of_seq) if b is not None]
        cond = cols.closed_branch_id == hop.branch_id
        hops.append(and_(cond, cols.closed_seq <= min(bounds)) if bounds else cond)
    return or_(*hops)


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

    Every connection attempt gives up after ``connect_timeout`` seconds: the URL's query value
    (``…/db?connect_timeout=30``, passed to psycopg as written), else
    :data:`~ctxledger.store._migrate.DEFAULT_CONNECT_TIMEOUT` (10), so a wrong host fails instead of hanging.

    Raises:
        ConfigurationError: the driver is not installed (the message says which extra to install), or
            ``connect_timeout`` is not a whole number of seconds.
    """
    if url.drivername in ("postgresql", "postgres"):
        url = url.set(drivername="postgresql+psycopg")
    timeout = connect_timeout(url)
    connect_args = {} if "connect_timeout" in url.query else {"connect_timeout": timeout}
    try:
        return create_engine(url, pool_pre_ping=True, connect_args=connect_args)
    except ModuleNotFoundError as exc:
        raise ConfigurationError(f"{POSTGRES_HINT} (missing module {exc.name!r})") from exc


def _lineage_shape(lineage: Sequence[LineageHop] | None) -> tuple[bool, ...] | None:
    """Which hops of ``lineage`` have a ``max_seq``: the shape a :func:`_read_statement` select is built for."""
    return None if lineage is None else tuple(hop.max_seq is not None for hop in lineage)


def _lineage_params(lineage: Sequence[LineageHop] | None) -> dict[str, Any]:
    """The bound values of :func:`_read_statement`'s lineage filter: ``b<i>`` each hop's branch, ``m<i>`` its cap."""
    params: dict[str, Any] = {}
    for i, hop in enumerate(lineage or ()):
        params[f"b{i}"] = hop.branch_id
        if hop.max_seq is not None:
            params[f"m{i}"] = hop.max_seq
    return params


def _read_params(
    tenant_id: str, conversation_id: str, after_seq: int, as_of_seq: int | None, lineage: Sequence[LineageHop] | None
) -> dict[str, Any]:
    """The bound values of a :func:`_read_statement` select (``upto`` only when ``as_of_seq`` is set)."""
    params = {"t": tenant_id, "c": conversation_id, "after": after_seq}
    if as_of_seq is not None:
        params["upto"] = as_of_seq
    params.update(_lineage_params(lineage))
    return params


@functools.lru_cache(maxsize=256)
def _read_statement(what: str, shape: tuple[bool, ...] | None, capped: bool, outside: bool) -> Any:
    """The select of :meth:`SqlStore.records` (``what`` ``"records"``) or ``record_facts`` for one shape, built once.

    Args:
        what: ``"records"`` (the record columns, in ``seq`` order) or ``"facts"`` (id, stamp, body).
        shape: :func:`_lineage_shape` of the lineage (``None`` or empty: no lineage filter).
        capped: whether ``as_of_seq`` bounds ``seq``.
        outside: the lineage filter is negated (the records not on it).

    Bound parameters: ``t`` tenant, ``c`` conversation, ``after`` (``seq >``), ``upto`` (``seq <=``), and
    :func:`_lineage_params`. The statement is the one built with the values written in, so the SQL is the same.
    """
    table = records if what == "records" else record_facts
    cols = table.c
    columns = _READ if what == "records" else [cols.record_id, cols.stamp, cols.body]
    stmt = select(*columns).where(
        cols.tenant_id == bindparam("t"), cols.conversation_id == bindparam("c"), cols.seq > bindparam("after")
    )
    if capped:
        stmt = stmt.where(cols.seq <= bindparam("upto"))
    if shape:
        on = _lineage_filter(shape, table)
        stmt = stmt.where(not_(on) if outside else on)
    return stmt.order_by(cols.seq) if what == "records" else stmt


def _lineage_filter(shape: tuple[bool, ...], table: Any) -> ColumnElement[bool]:
    """``table``'s rows on a lineage of :func:`_lineage_shape` ``shape``, values bound by :func:`_lineage_params`.

    A row is on it when its branch is a hop's branch (``b<i>``) and, for a hop with a cap, its ``seq`` is at most
    that cap (``m<i>``).
    """
    hops = [
        and_(table.c.branch_id == bindparam(f"b{i}"), table.c.seq <= bindparam(f"m{i}"))
        if has_cap
        else table.c.branch_id == bindparam(f"b{i}")
        for i, has_cap in enumerate(shape)
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
        self._sqlite = engine.dialect.name == "sqlite"
        database = engine.url.database if engine.dialect.name == "sqlite" else None
        self._sqlite_path = database if database and database != ":memory:" else None
        self._sqlite_identity: tuple[int, int] | None = None
        if self._sqlite_path is not None and os.path.exists(self._sqlite_path):
            self._check_file()

    def __repr__(self) -> str:
        """Show the database (without password) and the blob store."""
        return f"SqlStore({self.engine.url.render_as_string(hide_password=True)!r}, {self.blobs!r})"

    def migrate(self) -> None:
        """Create or upgrade the schema to the newest revision (idempotent). Raises ``MigrationError``."""
        upgrade(self.engine, self.blobs.get)

    def check_schema(self) -> None:
        """Raise ``MigrationError`` unless the database is at the newest revision."""
        check_revision(self.engine)

    def _check_file(self) -> None:
        """Refuse to write when the SQLite file was deleted or replaced since this store first saw it.

        SQLite keeps writing to the open (deleted) file, acknowledging writes that vanish on reopen.

        Raises:
            StoreError: the file is gone or is another file now.
        """
        if self._sqlite_path is None:
            return
        try:
            found = os.stat(self._sqlite_path)
        except FileNotFoundError:
            found = None
        identity = (found.st_dev, found.st_ino) if found is not None else None
        if self._sqlite_identity is None:
            self._sqlite_identity = identity
            return
        if identity != self._sqlite_identity:
            what = "deleted" if identity is None else "replaced by another file"
            raise StoreError(
                f"the SQLite database {self._sqlite_path} was {what} while this store had it open; "
                "nothing more is written to it (writes would be lost): open the store again"
            )

    @contextmanager
    def _write(self) -> Iterator[Connection]:
        self._check_file()
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
        _rules.check_blobs(batch, self.blobs.exists, getattr(self.blobs, "existing", None))
        rows = [encode_record(r, i) for i, r in enumerate(batch)]
        # Facts are computed before the write lock is taken (they can take seconds for a large import, and
        # other appenders wait for the lock); they are computed on the records as they will read back, which
        # are also the records returned once their ``seq`` is assigned (:func:`_assign_seqs`).
        decoded = [decode_record(row) for row in rows]
        facts = compute_facts(
            decoded,
            self.blobs.get,
            self._find,
            read_blobs=getattr(self.blobs, "get_many", None),
        )
        try:
            with self._write() as conn:
                written, created = self._append_in(conn, batch, rows, decoded)
                self._write_facts(conn, written, facts)
                self._write_index(conn, written, created)
                return written
        except SqlIntegrityError as exc:
            raise self._conflict_error(batch) from exc

    def _find(self, tenant_id: str, record_id: str) -> Record | None:
        """A stored record of the tenant, or ``None`` (a derived record's sources are earlier records)."""
        try:
            return self.get(tenant_id, record_id)
        except RecordNotFound:
            return None

    def _write_facts(self, conn: Connection, written: Sequence[Record], facts: Sequence[RecordFacts]) -> None:
        rows = [_facts_row(rec, f) for rec, f in zip(written, facts, strict=True)]
        self._insert_rows(conn, record_facts, rows)

    def _write_index(self, conn: Connection, written: Sequence[Record], created: set[tuple[str, str]]) -> None:
        """Links and protected-state entries of the new records; close the open entries they answer.

        Open entries of earlier appends are read once for the subjects this batch can close (none for a
        conversation the batch creates), so an import costs no query per record.
        """
        links = [_link_row(r, link) for r in written for link in _index.links_of(r)]
        self._insert_rows(conn, record_links, links, skip_conflicts=True)
        index = _index.OpenEntries(self._stored_open(conn, written, created))
        for rec in written:
            index.append(rec)
        rows = [_entry_row(rec, entry) for rec, entry in index.new]
        self._insert_rows(conn, protected_state, rows)
        updates = [
            {
                "t": rec.tenant_id,
                "r": e.record_id,
                "st": e.state,
                "b": e.closed_by,
                "cb": e.closed_branch_id,
                "cs": e.closed_seq,
            }
            for rec, e in index.closed_stored
        ]
        if updates:
            conn.execute(_CLOSE, updates)

    def _stored_open(
        self, conn: Connection, written: Sequence[Record], created: set[tuple[str, str]]
    ) -> list[tuple[str, str, ProtectedEntry]]:
        wanted: dict[tuple[str, str], set[str]] = {}
        for rec in written:
            key = (rec.tenant_id, rec.conversation_id)
            if key not in created:
                wanted.setdefault(key, set()).update(subject for _, subject in _index.closers(rec))
        out: list[tuple[str, str, ProtectedEntry]] = []
        cols = protected_state.c
        for (tenant_id, conversation_id), subjects in wanted.items():
            for chunk in _chunks(sorted(subjects)):
                stmt = select(protected_state).where(
                    cols.tenant_id == tenant_id,
                    cols.conversation_id == conversation_id,
                    cols.closed_seq.is_(None),
                    cols.subject.in_(chunk),
                )
                out += [(tenant_id, conversation_id, _entry(row._mapping)) for row in conn.execute(stmt)]
        return out

    def _append_in(
        self, conn: Connection, batch: list[Record], rows: list[dict[str, Any]], decoded: list[Record]
    ) -> tuple[list[Record], set[tuple[str, str]]]:
        # The heads are locked first and the ids checked after: a concurrent writer of the same conversation has
        # committed by then, so its ids are seen here instead of failing the insert. The inserts skip conflicts
        # and count what they wrote, so a race the lock cannot order (two writers creating one conversation, or
        # one id in two conversations) is refused without a failed statement: psycopg runs executemany in
        # pipeline mode, and a statement failing inside a pipeline is reported on stderr when it is torn down.
        heads = self._lock_heads(conn, _rules.conversation_keys(batch))
        error = _rules.duplicate_error(batch, self._existing_keys(conn, batch))
        if error is not None:
            raise error
        plan = _rules.plan_append(batch, heads)
        created = {(c.tenant_id, c.conversation_id) for c in plan.created}
        if plan.created:
            new_heads = [self._head_row(c, plan) for c in plan.created]
            inserted = self._insert_new(conn, conversation_heads, new_heads, conversation_heads.c.conversation_id)
            if inserted < len(new_heads):
                raise self._conflict_error(batch)
        updates = [{"t": key[0], "c": key[1], "h": seq} for key, seq in plan.heads.items() if key not in created]
        if updates:
            conn.execute(_HEAD_UPDATE, updates)
        for row, seq in zip(rows, plan.seqs, strict=True):
            row["seq"] = seq
        if self._insert_new(conn, records, rows, records.c.id) < len(rows):
            raise self._conflict_error(batch)
        return _assign_seqs(decoded, plan.seqs), created

    def _insert_rows(
        self, conn: Connection, table: Any, rows: Sequence[Mapping[str, Any]], *, skip_conflicts: bool = False
    ) -> None:
        """Insert ``rows`` (``skip_conflicts``: skipping those whose key is taken).

        On PostgreSQL a chunk of rows per statement, on SQLite one ``executemany`` (:func:`_sqlite_insert`).
        """
        if self._sqlite:
            _sqlite_insert(conn, table, rows, skip_conflicts=skip_conflicts)
            return
        stmt = self._insert(table).on_conflict_do_nothing() if skip_conflicts else table.insert()
        for start in range(0, len(rows), CHUNK):
            conn.execute(stmt, rows[start : start + CHUNK])

    def _insert_new(self, conn: Connection, table: Any, rows: list[dict[str, Any]], key: Any) -> int:
        """Insert ``rows``, skipping those whose primary key is taken; how many were inserted."""
        if self._sqlite:
            return _sqlite_insert(conn, table, rows, skip_conflicts=True)
        stmt = self._insert(table).on_conflict_do_nothing().returning(key)
        return sum(len(conn.execute(stmt, rows[start : start + CHUNK]).all()) for start in range(0, len(rows), CHUNK))

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
        with self._read() as conn:
            return int(conn.scalar(_HEAD_SEQ, {"tenant_id": tenant_id, "conversation_id": conversation_id}) or 0)

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
        outside_lineage: bool = False,
    ) -> list[Record]:
        """Records of one conversation in ``seq`` order with ``after_seq < seq <= as_of_seq``.

        With ``lineage``, only records on those branches within each hop's ``max_seq`` (inclusive); with
        ``outside_lineage`` too, only the records not on it.
        """
        if lineage is not None and not lineage and not outside_lineage:
            return []
        stmt = _read_statement(
            "records", _lineage_shape(lineage or None), as_of_seq is not None, outside_lineage and bool(lineage)
        )
        params = _read_params(tenant_id, conversation_id, after_seq, as_of_seq, lineage)
        with self._read() as conn:
            rows = conn.execute(stmt, params).all()
        return [decode_row(row) for row in rows]

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
        if lineage is not None and not lineage:
            return {}
        stmt = _read_statement("facts", _lineage_shape(lineage), as_of_seq is not None, False)
        params = _read_params(tenant_id, conversation_id, after_seq, as_of_seq, lineage)
        with self._read() as conn:
            rows = conn.execute(stmt, params).all()
        return {rid: decode_facts(rid, stamp, body, terms=terms) for rid, stamp, body in rows}

    def put_facts(self, tenant_id: str, facts: Sequence[RecordFacts]) -> None:
        """Replace the stored facts of existing records of the tenant (recomputed after the detectors changed)."""
        cols = record_facts.c
        stmt = (
            update(record_facts)
            .where(cols.tenant_id == bindparam("t"), cols.record_id == bindparam("r"))
            .values(stamp=bindparam("s"), body=bindparam("bd"))
        )
        rows = [{"t": tenant_id, "r": f.record_id, "s": f.stamp, "bd": encode_facts(f).decode("utf-8")} for f in facts]
        if not rows:
            return
        with self._write() as conn:
            for start in range(0, len(rows), CHUNK):
                conn.execute(stmt, rows[start : start + CHUNK])

    def links(
        self,
        tenant_id: str,
        conversation_id: str,
        *,
        lineage: Sequence[LineageHop] | None = None,
        as_of_seq: int | None = None,
    ) -> list[RecordLink]:
        """Links held by the conversation's records in the lineage as of ``as_of_seq``, by ``seq``."""
        if lineage is not None and not lineage:
            return []
        cols = record_links.c
        stmt = select(record_links).where(cols.tenant_id == tenant_id, cols.conversation_id == conversation_id)
        if as_of_seq is not None:
            stmt = stmt.where(cols.seq <= as_of_seq)
        if lineage is not None:
            stmt = stmt.where(_lineage_filter(_lineage_shape(lineage) or (), record_links))
        stmt = stmt.order_by(cols.seq, cols.relation, cols.target_id)
        with self._read() as conn:
            return [_link(row._mapping) for row in conn.execute(stmt, _lineage_params(lineage))]

    def links_to(self, tenant_id: str, target_ids: Iterable[str]) -> list[RecordLink]:
        """Links of any record of the tenant pointing at ``target_ids`` (indexed by target), by ``seq``."""
        wanted = sorted(set(target_ids))
        found: list[RecordLink] = []
        cols = record_links.c
        with self._read() as conn:
            for chunk in _chunks(wanted):
                stmt = select(record_links).where(cols.tenant_id == tenant_id, cols.target_id.in_(chunk))
                found += [_link(row._mapping) for row in conn.execute(stmt)]
        return sorted(found, key=lambda link: (link.seq, link.source_id, link.relation, link.target_id))

    def protected(
        self,
        tenant_id: str,
        conversation_id: str,
        *,
        lineage: Sequence[LineageHop] | None = None,
        as_of_seq: int | None = None,
    ) -> list[ProtectedEntry]:
        """Protected-state entries open in the lineage as of ``as_of_seq``, by ``seq`` (see ``GraphStore.protected``).

        The query reads the entries not closed as of ``as_of_seq`` (indexed on ``closed_seq``); whether a
        closer on another branch counts is decided by the lineage.
        """
        if lineage is not None and not lineage:
            return []
        cols = protected_state.c
        stmt = select(protected_state).where(cols.tenant_id == tenant_id, cols.conversation_id == conversation_id)
        if as_of_seq is not None:
            stmt = stmt.where(cols.seq <= as_of_seq)
        if lineage is not None:
            stmt = stmt.where(_lineage_filter(_lineage_shape(lineage) or (), protected_state))
        stmt = stmt.where(or_(cols.closed_seq.is_(None), not_(_closed_in(lineage, as_of_seq))))
        with self._read() as conn:
            rows = conn.execute(stmt.order_by(cols.seq, cols.state), _lineage_params(lineage))
            entries = [_entry(row._mapping) for row in rows]
        return [e for e in entries if _index.open_in(e, lineage, as_of_seq)]

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

    def get_rungs(self, tenant_id: str, key: str) -> bytes | None:
        """The stored rungs under ``key`` (:mod:`ctxledger.assemble.rung_memo`), or ``None``."""
        cols = rung_memo.c
        with self._read() as conn:
            found = conn.execute(
                select(cols.body).where(cols.tenant_id == tenant_id, cols.memo_key == key)
            ).scalar_one_or_none()
        return None if found is None else bytes(found)

    def put_rungs(self, tenant_id: str, rows: Mapping[str, tuple[str, bytes]]) -> None:
        """Keep rungs: key → (conversation id, body), in one transaction; an existing key keeps its body."""
        values = [
            {"tenant_id": tenant_id, "memo_key": key, "conversation_id": conv, "body": body}
            for key, (conv, body) in rows.items()
        ]
        if not values:
            return
        stmt = self._insert(rung_memo).on_conflict_do_nothing()
        with self._write() as conn:
            for start in range(0, len(values), CHUNK):
                conn.execute(stmt, values[start : start + CHUNK])

    def get_token_counts(self, counter_id: str, hashes: Iterable[str]) -> dict[str, int]:
        """Cached token counts for ``(counter_id, content hash)``; missing hashes are absent."""
        wanted = sorted(set(hashes))
        found: dict[str, int] = {}
        with self._read() as conn:
            for chunk in _chunks(wanted):
                found.update({h: int(n) for h, n in conn.execute(_TOKEN_COUNTS, {"c": counter_id, "h": list(chunk)})})
        return found

    def put_token_counts(self, counter_id: str, counts: Mapping[str, int]) -> None:
        """Cache token counts (idempotent: ``ON CONFLICT DO NOTHING`` keeps the first count)."""
        rows = [{"counter_id": counter_id, "content_hash": h, "tokens": int(n)} for h, n in counts.items()]
        if not rows:
            return
        with self._write() as conn:
            self._insert_rows(conn, token_counts, rows, skip_conflicts=True)

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
        references any more (GC never removes what a live record references).
        """
        blob_column = records.c.blob_sha256
        with self._write() as conn:
            candidates = sorted(
                set(
                    conn.scalars(
                        select(blob_column).where(records.c.tenant_id == tenant_id, blob_column.is_not(None)).distinct()
                    )
                )
                | kept_raw_outputs(conn, tenant_id)
            )
            deleted = conn.execute(delete(records).where(records.c.tenant_id == tenant_id)).rowcount
            conn.execute(delete(conversation_heads).where(conversation_heads.c.tenant_id == tenant_id))
            conn.execute(delete(assemblies).where(assemblies.c.tenant_id == tenant_id))
            for table in (record_facts, record_links, protected_state):
                conn.execute(delete(table).where(table.c.tenant_id == tenant_id))
            live = referenced_in(conn, candidates)
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

    @staticmethod
    def _forget_rungs(conn: Connection, change: RetentionChange) -> None:
        """Drop the stored rungs of every conversation the change rewrites or removes a record of."""
        touched = {(r.tenant_id, r.conversation_id) for r in change.rewrite} | set(change.conversations)
        by_tenant: dict[str, list[str]] = {}
        for tenant_id, record_id in change.delete:
            by_tenant.setdefault(tenant_id, []).append(record_id)
        for tenant_id, ids in by_tenant.items():
            for start in range(0, len(ids), CHUNK):
                found = select(records.c.conversation_id).where(
                    records.c.tenant_id == tenant_id, records.c.id.in_(ids[start : start + CHUNK])
                )
                touched.update((tenant_id, conv) for conv in conn.execute(found.distinct()).scalars())
        cols = rung_memo.c
        for tenant_id, conversation_id in sorted(touched):
            conn.execute(delete(rung_memo).where(cols.tenant_id == tenant_id, cols.conversation_id == conversation_id))

    def apply_retention(self, change: RetentionChange) -> None:
        """Apply one retention batch in one transaction (see ``GraphStore.apply_retention``).

        A rewritten record keeps its id, envelope and ``seq``; its body is replaced and its blob reference
        (``blob_sha256``) cleared, so blob collection no longer counts it.
        """
        # A rewritten record's facts are those of its new content (its retention notice): computed first.
        fresh = compute_facts([decode_record(encode_record(r)) for r in change.rewrite], self.blobs.get, self._find)
        with self._write() as conn:
            self._forget_rungs(conn, change)
            if change.rewrite:
                bodies = [{"t": r.tenant_id, "i": r.id, "b": encode_record(r)["body"]} for r in change.rewrite]
                conn.execute(_REWRITE, bodies)
            for rec, facts in zip(change.rewrite, fresh, strict=True):
                conn.execute(
                    update(record_facts)
                    .where(record_facts.c.tenant_id == rec.tenant_id, record_facts.c.record_id == rec.id)
                    .values(stamp=facts.stamp, body=encode_facts(facts).decode("utf-8"))
                )
            if change.delete:
                conn.execute(_DELETE, [{"t": t, "i": i} for t, i in change.delete])
            for tenant_id, record_id in change.delete:
                for column in (record_facts.c.record_id, record_links.c.source_id, protected_state.c.record_id):
                    conn.execute(delete(column.table).where(column.table.c.tenant_id == tenant_id, column == record_id))
            for tenant_id, conversation_id in change.conversations:
                for table in (records, conversation_heads, assemblies, record_facts, record_links, protected_state):
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
        live = referenced_blobs(self, queued)
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
