"""The pack of a local blob folder: many blobs in one SQLite file, ``<root>/pack.sqlite3``.

One file per blob costs a file creation, a write and a rename per tool output; an import of thousands of
outputs spends seconds of kernel time on that alone. :meth:`ctxledger.store.blobs.LocalBlobStore.put_many`
(the batch path importers use) therefore writes new blobs into this pack, all of a batch in one SQLite
transaction, while single puts and blobs written before stay files. The pack keeps the blob folder's rules:

* a blob is named by the sha256 of its exact bytes and written once; a later put only refreshes its write time
  (``written_at``), which garbage collection's grace period counts from;
* a batch is committed whole or not at all, so a reader never sees a partial blob;
* reads return the stored bytes; the folder's store re-hashes them as it does a file's;
* a deleted blob's bytes are overwritten in the file (``secure_delete``), since retention deletes blobs to
  forget what they held.

Several processes may share one folder: SQLite's locking orders their writes (a writer waits up to
:data:`BUSY_SECONDS` for another). A process opens its own connection (one per process, shared by its threads
under a lock).
"""

from __future__ import annotations

import os
import sqlite3
import threading
from collections.abc import Iterable, Iterator, Sequence
from datetime import UTC, datetime
from pathlib import Path

FILENAME = "pack.sqlite3"
"""The pack's file name inside the blob folder (no blob file has that name: theirs are 64 hex digits)."""

BUSY_SECONDS = 60.0
"""How long a writer waits for another process's write to finish."""

_SCHEMA = (
    "CREATE TABLE IF NOT EXISTS blobs ("
    " sha256 TEXT PRIMARY KEY, size_bytes INTEGER NOT NULL, written_at TEXT NOT NULL, data BLOB NOT NULL"
    ") WITHOUT ROWID"
)

_NAMES_INDEX = "CREATE INDEX IF NOT EXISTS blobs_names ON blobs (sha256, size_bytes)"
"""The names and sizes apart from the bytes. A row of ``blobs`` holds its bytes, so a leaf page of the table holds
about one blob and asking which of many names are held reads a page per name; this index answers from pages of
a hundred names each (on 55,000 blobs, 0.2 s instead of 1.4 s). SQLite prefers the primary key, so :meth:`held`
names the index."""


def now() -> str:
    """The current UTC time as the pack stores it (ISO 8601, microseconds)."""
    return datetime.now(UTC).isoformat(timespec="microseconds")


class BlobPack:
    """The pack file of one blob folder (see the module docstring); created on the first write.

    Args:
        root: the blob folder.
    """

    def __init__(self, root: Path) -> None:
        self.path = root / FILENAME
        self._lock = threading.Lock()
        self._conn: sqlite3.Connection | None = None
        self._pid = 0
        self._indexed = False

    def _connect(self, *, create: bool) -> sqlite3.Connection | None:
        """The process's connection; ``None`` when the pack does not exist and ``create`` is false."""
        if self._conn is not None and self._pid == os.getpid():
            return self._conn
        if not create and not self.path.is_file():
            return None
        if create:
            self.path.parent.mkdir(parents=True, exist_ok=True)
        conn = sqlite3.connect(self.path, timeout=BUSY_SECONDS, isolation_level=None, check_same_thread=False)
        conn.execute("PRAGMA secure_delete = ON")
        conn.execute(_SCHEMA)
        try:
            conn.execute(_NAMES_INDEX)  # a pack written before the index gets it once (a pass over the names)
            self._indexed = True
        except sqlite3.OperationalError:  # a pack this process cannot write: the primary key answers
            self._indexed = False
        self._conn, self._pid = conn, os.getpid()
        return conn

    def close(self) -> None:
        """Close this process's connection (the next use opens another)."""
        with self._lock:
            if self._conn is not None and self._pid == os.getpid():
                self._conn.close()
            self._conn = None

    def get(self, sha256: str) -> bytes | None:
        """The stored bytes named ``sha256``, or ``None`` when the pack does not hold them."""
        with self._lock:
            conn = self._connect(create=False)
            if conn is None:
                return None
            row = conn.execute("SELECT data FROM blobs WHERE sha256 = ?", (sha256,)).fetchone()
        return None if row is None else bytes(row[0])

    def get_many(self, names: Sequence[str]) -> dict[str, bytes]:
        """The stored bytes of those of ``names`` the pack holds (one query per few hundred names)."""
        found: dict[str, bytes] = {}
        with self._lock:
            conn = self._connect(create=False)
            if conn is None:
                return found
            for start in range(0, len(names), 500):
                chunk = list(names[start : start + 500])
                marks = ",".join("?" * len(chunk))
                rows = conn.execute(f"SELECT sha256, data FROM blobs WHERE sha256 IN ({marks})", chunk)
                found.update((sha, bytes(data)) for sha, data in rows)
        return found

    def range(self, sha256: str, start: int, end: int) -> bytes | None:
        """Bytes ``[start, end)`` of a stored blob without reading the rest; ``None`` when not held."""
        with self._lock:
            conn = self._connect(create=False)
            if conn is None:
                return None
            row = conn.execute(
                "SELECT substr(data, ?, ?) FROM blobs WHERE sha256 = ?", (start + 1, max(end - start, 0), sha256)
            ).fetchone()
        return None if row is None else bytes(row[0])

    def held(self, names: Sequence[str]) -> dict[str, int]:
        """Which of ``names`` the pack holds, with their sizes in bytes."""
        found: dict[str, int] = {}
        with self._lock:
            conn = self._connect(create=False)
            if conn is None:
                return found
            for start in range(0, len(names), 500):
                chunk = list(names[start : start + 500])
                marks = ",".join("?" * len(chunk))
                source = "blobs INDEXED BY blobs_names" if self._indexed else "blobs"
                query = f"SELECT sha256, size_bytes FROM {source} WHERE sha256 IN ({marks})"
                found.update(conn.execute(query, chunk))
        return found

    def write(self, blobs: Iterable[tuple[str, bytes]]) -> None:
        """Store ``blobs`` (``(sha256, bytes)``, each hashing to its name) in one transaction, written now.

        A blob the pack holds already gets these bytes again and a new write time: a put refreshes the grace
        period, and bytes damaged in the file are healed.

        Raises:
            sqlite3.Error: the pack cannot be written (the caller names the folder and the reason).
        """
        stamp = now()
        rows = [(sha, len(data), stamp, data) for sha, data in blobs]
        if not rows:
            return
        with self._lock:
            conn = self._connect(create=True)
            assert conn is not None
            conn.execute("BEGIN IMMEDIATE")
            try:
                conn.executemany(
                    "INSERT INTO blobs (sha256, size_bytes, written_at, data) VALUES (?, ?, ?, ?)"
                    " ON CONFLICT (sha256) DO UPDATE SET"
                    " size_bytes = excluded.size_bytes, written_at = excluded.written_at, data = excluded.data",
                    rows,
                )
                conn.execute("COMMIT")
            except BaseException:
                conn.execute("ROLLBACK")
                raise

    def delete(self, sha256: str) -> None:
        """Remove a blob if the pack holds it (its bytes are overwritten in the file)."""
        with self._lock:
            conn = self._connect(create=False)
            if conn is not None:
                conn.execute("DELETE FROM blobs WHERE sha256 = ?", (sha256,))

    def listing(self) -> Iterator[tuple[str, int, datetime]]:
        """``(sha256, size in bytes, write time)`` of every blob the pack holds, by sha256."""
        with self._lock:
            conn = self._connect(create=False)
            rows = (
                []
                if conn is None
                else conn.execute("SELECT sha256, size_bytes, written_at FROM blobs ORDER BY sha256").fetchall()
            )
        for sha, size, written in rows:
            yield sha, int(size), datetime.fromisoformat(written)
