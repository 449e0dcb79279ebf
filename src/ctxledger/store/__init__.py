"""Graph stores: open one by URL (STYLE "Storage").

``open_store(url)`` dispatches on the URL scheme and imports the backend lazily:

* ``sqlite:///path/to.db`` (the embedded default): a file that does not exist is created with its missing
  folders, unless ``create=False`` (then it is refused: a mistyped path must not become a new, empty store);
  blobs go to ``<db>.blobs/`` next to the file unless ``blobs_dir`` says otherwise;
* ``postgresql+psycopg://user@host/db`` (``postgresql://`` and ``postgres://`` mean the same): needs
  ``pip install 'ctxledger[postgres]'``; blobs are kept inside the database unless ``blobs_dir`` says otherwise;
* ``memory://``: the in-memory reference store (``ctxledger.store.memory``) (blobs in memory unless
  ``blobs_dir`` is given).

SQLite and PostgreSQL share one schema and one Alembic history; ``open_store`` migrates to the newest
revision by default, and :func:`migrate` does only that (the ``ctxledger migrate`` command).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING

from sqlalchemy.engine import URL, make_url
from sqlalchemy.exc import ArgumentError

from ctxledger.errors import ConfigurationError
from ctxledger.store.base import BlobRef, BlobStore, GraphStore, LineageHop
from ctxledger.store.blobs import LocalBlobStore, StoredBlob

if TYPE_CHECKING:
    from sqlalchemy.engine import Engine

__all__ = [
    "IN_DATABASE",
    "BlobRef",
    "BlobStore",
    "GraphStore",
    "LineageHop",
    "LocalBlobStore",
    "StoredBlob",
    "migrate",
    "missing_sqlite_file",
    "open_blobs",
    "open_store",
]

IN_DATABASE = "database"
"""``blobs_dir`` value that keeps blobs inside the store's own database (the default for PostgreSQL)."""

_SUPPORTED = "sqlite:///path/to.db, postgresql+psycopg://user@host/db, memory://"


def _parse(url: str) -> URL:
    try:
        return make_url(url)
    except ArgumentError as exc:
        raise ConfigurationError(f"not a store URL: {url!r} (expected {_SUPPORTED})") from exc


def _sqlite_path(url: URL) -> Path:
    if url.database in (None, "", ":memory:"):
        raise ConfigurationError("an SQLite store needs a file (sqlite:///path/to.db); use memory:// in memory")
    return Path(url.database).expanduser()


def _engine(url: str) -> tuple[Engine, Path | str]:
    """The engine for a SQL URL and the default blob location of that backend (a folder or :data:`IN_DATABASE`)."""
    from ctxledger.store import sql

    parsed = _parse(url)
    backend = parsed.get_backend_name()
    if backend == "sqlite":
        path = _sqlite_path(parsed).resolve()
        return sql.sqlite_engine(path), Path(f"{path}.blobs")
    if backend in ("postgresql", "postgres"):
        return sql.postgres_engine(parsed), IN_DATABASE
    raise ConfigurationError(f"unsupported store URL scheme {parsed.drivername!r} (expected {_SUPPORTED})")


def missing_sqlite_file(url: str) -> Path | None:
    """The file a ``sqlite:///`` URL names when it does not exist yet, else ``None`` (in-memory, other backends)."""
    try:
        parsed = make_url(url)
    except ArgumentError:  # a malformed URL is reported when it is opened
        return None
    if not parsed.drivername.startswith("sqlite") or parsed.database in (None, "", ":memory:"):
        return None
    path = Path(parsed.database).expanduser()
    return None if path.exists() else path


def open_store(
    url: str, *, blobs_dir: str | os.PathLike[str] | None = None, migrate: bool = True, create: bool = True
) -> GraphStore:
    """Open the graph store at ``url`` (see the module docstring for the URL forms and blob folders).

    Args:
        url: ``sqlite:///…``, ``postgresql+psycopg://…`` or ``memory://``.
        blobs_dir: folder of the content-addressed blob store (overrides the default).
        migrate: upgrade the schema to the newest revision first (default); with ``False`` the schema
            is only checked.
        create: make a SQLite file that does not exist, with its missing folders (default); with ``False``
            such a URL is refused and nothing is created (what the CLI's reading commands do).

    Raises:
        ConfigurationError: an unsupported or malformed URL, a missing PostgreSQL driver, or (``create=False``)
            a SQLite file that does not exist.
        StoreConnectionError: the database cannot be reached (the message names host and port, never the
            password).
        MigrationError: the schema could not be migrated, or (``migrate=False``) is not current.
    """
    if url.split(":", 1)[0].lower() == "memory":
        from ctxledger.store.memory import MemoryStore

        return MemoryStore(LocalBlobStore(blobs_dir) if blobs_dir is not None else None)
    from ctxledger.store.sql import SqlStore

    if not create and (missing := missing_sqlite_file(url)) is not None:
        raise ConfigurationError(f"no store at {missing}: check the path, or open it with create=True to make one")
    engine, default_blobs = _engine(url)
    try:
        store = SqlStore(engine, open_blobs(blobs_dir if blobs_dir is not None else default_blobs, engine))
    except BaseException:
        engine.dispose()
        raise
    try:
        if migrate:
            store.migrate()
        else:
            store.check_schema()
    except BaseException:
        store.close()
        raise
    return store


def open_blobs(location: str | os.PathLike[str], engine: Engine | None = None) -> BlobStore:
    """The blob store at ``location``: a folder, :data:`IN_DATABASE` (``engine``'s own database) or a SQL URL.

    A SQL URL (``postgresql+psycopg://…``, or ``sqlite:///…``) is migrated first and opened on its
    own engine, so the blobs may live in another database than the records.

    Raises:
        ConfigurationError: :data:`IN_DATABASE` without an engine (the memory store), or a bad URL.
        MigrationError: the blob database could not be migrated.
    """
    from ctxledger.store.dbblobs import DatabaseBlobStore

    text = os.fspath(location)
    if text == IN_DATABASE:
        if engine is None:
            raise ConfigurationError(f"blobs {IN_DATABASE!r} need a SQL store (sqlite:///… or postgresql://…)")
        return DatabaseBlobStore(engine)
    if "://" in text and not text.startswith("file://"):
        from ctxledger.store._migrate import upgrade

        own, _ = _engine(text)
        try:
            upgrade(own)
        except BaseException:
            own.dispose()
            raise
        return DatabaseBlobStore(own, owns_engine=True)
    return LocalBlobStore(Path(text.removeprefix("file://")).expanduser().resolve())


def migrate(url: str, *, blobs_dir: str | os.PathLike[str] | None = None) -> str:
    """Create or upgrade the schema at ``url`` to the newest revision; return that revision id.

    ``memory://`` has no schema and returns ``"memory"``. ``blobs_dir`` is the blob location (default: the
    backend's, as in :func:`open_store`): a revision that computes facts from tool results reads their raw
    bytes there.

    Raises:
        ConfigurationError: an unsupported URL or a missing driver.
        StoreConnectionError: the database cannot be reached.
        MigrationError: the database refused the migration.
    """
    if url.split(":", 1)[0].lower() == "memory":
        return "memory"
    from ctxledger.store._migrate import upgrade

    engine, default_blobs = _engine(url)
    try:
        blobs = open_blobs(blobs_dir if blobs_dir is not None else default_blobs, engine)
        try:
            return upgrade(engine, blobs.get)
        finally:
            close = getattr(blobs, "close", None)
            if close is not None:
                close()
    finally:
        engine.dispose()
