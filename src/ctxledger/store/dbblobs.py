"""A content-addressed blob store inside the SQL database (PostgreSQL; SQLite works too).

Several service processes on several hosts share one PostgreSQL store without a shared folder when
their blobs live in it. The bytes of a blob are kept in ``blob_chunks`` rows of at most
:data:`CHUNK_BYTES` (1 MiB), in order, and one ``blobs`` row names the blob by the sha256 of its exact
bytes, with its size and when it was written:

* writes stream: :meth:`DatabaseBlobStore.put_stream` reads its input a chunk at a time, hashing as it
  goes, and never holds the whole blob. The chunks go in under a provisional name; the ``blobs`` row is
  inserted with ``ON CONFLICT DO NOTHING`` and only then are the chunks renamed to the sha256, all in
  one transaction, so a reader never sees a partial blob and two writers of the same bytes do not
  collide (the second one's chunks are dropped);
* a blob is write-once: putting the same bytes again only refreshes its write time, which garbage
  collection's grace period counts from;
* every read re-hashes the bytes and raises :class:`~ctxledger.errors.IntegrityError` on a mismatch;
  :meth:`DatabaseBlobStore.iter_chunks` streams a blob out a chunk at a time and checks the hash after
  the last one.

As in :mod:`ctxledger.store.blobs`, the media type belongs to the record that references a blob and
is not stored with the bytes.
"""

from __future__ import annotations

import hashlib
import uuid
from collections.abc import Iterable, Iterator
from datetime import UTC, datetime
from typing import BinaryIO

from sqlalchemy import delete, select, update
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.engine import Connection, Engine

from ctxledger.errors import BlobNotFound, IntegrityError
from ctxledger.store.base import BlobRef
from ctxledger.store.blobs import StoredBlob, check_range, check_sha256
from ctxledger.store.schema import blob_chunks, blobs

CHUNK_BYTES = 1 << 20
"""Largest chunk row, in bytes."""


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="microseconds")


def _pieces(source: bytes | BinaryIO | Iterable[bytes]) -> Iterator[bytes]:
    """``source`` cut into pieces of at most :data:`CHUNK_BYTES` (a file object is read a chunk at a time)."""
    if isinstance(source, bytes | bytearray | memoryview):
        data = bytes(source)
        for start in range(0, len(data), CHUNK_BYTES):
            yield data[start : start + CHUNK_BYTES]
        return
    read = getattr(source, "read", None)
    parts: Iterable[bytes] = iter(lambda: read(CHUNK_BYTES), b"") if read is not None else source
    for part in parts:
        for start in range(0, len(part), CHUNK_BYTES):
            yield bytes(part[start : start + CHUNK_BYTES])


class DatabaseBlobStore:
    """Blobs in the ``blobs``/``blob_chunks`` tables of a migrated database (see the module docstring).

    Args:
        engine: a SQLAlchemy engine on a database migrated to revision ``0003_keys_blobs`` or later.
        owns_engine: dispose the engine on :meth:`close` (when the store was opened for its own URL).
    """

    def __init__(self, engine: Engine, *, owns_engine: bool = False) -> None:
        """Use the database behind ``engine``."""
        self.engine = engine
        self._owns_engine = owns_engine
        self._insert = postgresql.insert if engine.dialect.name == "postgresql" else sqlite.insert

    def __repr__(self) -> str:
        """Show the database (without password)."""
        return f"DatabaseBlobStore({self.engine.url.render_as_string(hide_password=True)!r})"

    def close(self) -> None:
        """Release the engine if this store opened it."""
        if self._owns_engine:
            self.engine.dispose()

    # -- writing -------------------------------------------------------------------------------------

    def put(self, data: bytes, media_type: str = "application/octet-stream") -> BlobRef:
        """Store ``data`` (idempotent) and return its reference (``size_bytes`` in bytes)."""
        return self.put_stream(bytes(data), media_type)

    def put_many(self, items: Iterable[tuple[bytes, str]]) -> list[BlobRef]:
        """Store many blobs (idempotent), each in its own transaction; references in input order."""
        return [self.put(data, media_type) for data, media_type in items]

    def put_stream(
        self, source: bytes | BinaryIO | Iterable[bytes], media_type: str = "application/octet-stream"
    ) -> BlobRef:
        """Store the bytes read from ``source`` (bytes, a binary file object or an iterable of bytes).

        The input is read and written a chunk at a time; the whole blob is never held in memory.

        Returns:
            Its reference (sha256 of the exact bytes, size in bytes, ``media_type``).
        """
        provisional = f"tmp-{uuid.uuid4().hex}"
        digest = hashlib.sha256()
        size = 0
        count = 0
        with self.engine.begin() as conn:
            for piece in _pieces(source):
                digest.update(piece)
                conn.execute(blob_chunks.insert().values(sha256=provisional, chunk=count, data=piece))
                size += len(piece)
                count += 1
            sha = digest.hexdigest()
            row = {"sha256": sha, "size_bytes": size, "chunks": count, "created_at": _now()}
            claim = self._insert(blobs).values(**row).on_conflict_do_nothing().returning(blobs.c.sha256)
            inserted = conn.execute(claim).first() is not None
            mine = blob_chunks.c.sha256 == provisional
            if inserted:
                conn.execute(update(blob_chunks).where(mine).values(sha256=sha))
            else:
                conn.execute(delete(blob_chunks).where(mine))
                conn.execute(update(blobs).where(blobs.c.sha256 == sha).values(created_at=row["created_at"]))
        return BlobRef(sha256=sha, size_bytes=size, media_type=media_type)

    # -- reading -------------------------------------------------------------------------------------

    def _count(self, conn: Connection, sha256: str) -> int:
        chunks = conn.scalar(select(blobs.c.chunks).where(blobs.c.sha256 == check_sha256(sha256)))
        if chunks is None:
            raise BlobNotFound(sha256, repr(self))
        return int(chunks)

    def iter_chunks(self, sha256: str) -> Iterator[bytes]:
        """Stream a blob's bytes a chunk at a time; the hash is checked after the last chunk.

        Raises:
            BlobNotFound: no such blob (raised before the first chunk).
            IntegrityError: the chunks do not hash to ``sha256`` (raised after the last one: a consumer
                that must not act on bad bytes reads them all first, as :meth:`get` does).
            InputError: ``sha256`` is not a bare hex digest.
        """
        with self.engine.connect() as conn:
            expected = self._count(conn, sha256)
            digest = hashlib.sha256()
            seen = 0
            rows = conn.execution_options(stream_results=True, yield_per=4).execute(
                select(blob_chunks.c.data).where(blob_chunks.c.sha256 == sha256).order_by(blob_chunks.c.chunk)
            )
            for (data,) in rows:
                digest.update(data)
                seen += 1
                yield bytes(data)
        if seen != expected or digest.hexdigest() != sha256:
            raise IntegrityError(f"database blob {sha256} does not hash to its name ({seen}/{expected} chunks)")

    def get(self, sha256: str) -> bytes:
        """Return the exact bytes named ``sha256``.

        Raises:
            BlobNotFound: no such blob (a :class:`~ctxledger.errors.RecordNotFound`).
            IntegrityError: the stored bytes no longer hash to ``sha256``.
            InputError: ``sha256`` is not a bare hex digest.
        """
        return b"".join(self.iter_chunks(sha256))

    def get_range(self, sha256: str, start: int, end: int, *, verify: bool = True) -> bytes:
        """Return bytes ``[start, end)`` of a blob (``end`` past the size is clamped).

        With ``verify`` (the default) every chunk is read and the whole blob re-hashed, so a range of a
        corrupted blob is never returned; without it only the chunks the range touches are read.

        Raises:
            BlobNotFound, IntegrityError, InputError: as :meth:`get`, or a bad range.
        """
        check_range(start, end)
        if not verify:
            return self._unverified_range(sha256, start, end)
        parts: list[bytes] = []
        offset = 0
        for chunk in self.iter_chunks(sha256):
            lo, hi = max(start - offset, 0), min(end - offset, len(chunk))
            if lo < hi:
                parts.append(chunk[lo:hi])
            offset += len(chunk)
        return b"".join(parts)

    def _unverified_range(self, sha256: str, start: int, end: int) -> bytes:
        first, last = start // CHUNK_BYTES, max(end - 1, start) // CHUNK_BYTES
        with self.engine.connect() as conn:
            self._count(conn, sha256)
            rows = conn.execute(
                select(blob_chunks.c.chunk, blob_chunks.c.data)
                .where(blob_chunks.c.sha256 == sha256, blob_chunks.c.chunk.between(first, last))
                .order_by(blob_chunks.c.chunk)
            ).all()
        data = b"".join(bytes(d) for _, d in rows)
        base = first * CHUNK_BYTES
        return data[start - base : end - base]

    def exists(self, sha256: str) -> bool:
        """Whether a blob named ``sha256`` is stored."""
        with self.engine.connect() as conn:
            return conn.scalar(select(blobs.c.sha256).where(blobs.c.sha256 == check_sha256(sha256))) is not None

    def delete(self, sha256: str) -> None:
        """Remove a blob if present (retention/GC only; callers check nothing live references it)."""
        with self.engine.begin() as conn:
            conn.execute(delete(blobs).where(blobs.c.sha256 == check_sha256(sha256)))
            conn.execute(delete(blob_chunks).where(blob_chunks.c.sha256 == sha256))

    def stored(self) -> Iterator[StoredBlob]:
        """Every stored blob with its size and write time (for garbage collection), by sha256."""
        with self.engine.connect() as conn:
            rows = conn.execute(
                select(blobs.c.sha256, blobs.c.size_bytes, blobs.c.created_at).order_by(blobs.c.sha256)
            ).all()
        for sha, size, created in rows:
            yield StoredBlob(sha, int(size), datetime.fromisoformat(created))
