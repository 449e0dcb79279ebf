"""``open_store(url)``: URL dispatch, SQLite settings, blob folders, and clear configuration errors."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from store_backends import POSTGRES_URL

from ctxledger.errors import ConfigurationError, StoreConnectionError
from ctxledger.store import GraphStore, LocalBlobStore, migrate, open_store
from ctxledger.store.dbblobs import DatabaseBlobStore
from ctxledger.store.sql import SqlStore
from ctxledger.testing import MemoryBlobStore, MemoryStore


def test_sqlite_store_creates_its_folder_and_keeps_blobs_beside_the_file(tmp_path: Path) -> None:
    """``sqlite:///…/x.db`` creates missing parent folders and puts blobs in ``x.db.blobs/``."""
    db = tmp_path / "deep" / "er" / "x.db"
    store = open_store(f"sqlite:///{db}")
    assert isinstance(store, SqlStore) and isinstance(store, GraphStore)
    ref = store.blobs.put(b"hello")
    assert db.is_file()
    assert (tmp_path / "deep" / "er" / "x.db.blobs" / ref.sha256[:2] / ref.sha256).read_bytes() == b"hello"
    store.close()


def test_sqlite_connections_use_wal_normal_sync_foreign_keys_and_busy_timeout(tmp_path: Path) -> None:
    """Every pooled SQLite connection is configured for concurrent embedded use."""
    store = open_store(f"sqlite:///{tmp_path}/x.db")
    assert isinstance(store, SqlStore)
    with store.engine.connect() as conn:
        pragmas = {
            name: conn.exec_driver_sql(f"PRAGMA {name}").scalar()
            for name in ("journal_mode", "synchronous", "foreign_keys", "busy_timeout")
        }
    store.close()
    assert pragmas == {"journal_mode": "wal", "synchronous": 1, "foreign_keys": 1, "busy_timeout": 10000}


def test_blobs_dir_argument_overrides_the_default(tmp_path: Path) -> None:
    """``blobs_dir=`` puts the blob folder where the caller says, for SQL and memory stores."""
    sql = open_store(f"sqlite:///{tmp_path}/x.db", blobs_dir=tmp_path / "elsewhere")
    assert isinstance(sql.blobs, LocalBlobStore) and sql.blobs.root == tmp_path / "elsewhere"
    sql.close()
    mem = open_store("memory://", blobs_dir=tmp_path / "mem-blobs")
    assert isinstance(mem, MemoryStore) and isinstance(mem.blobs, LocalBlobStore)
    assert isinstance(open_store("memory://").blobs, MemoryBlobStore)
    assert migrate("memory://") == "memory"


def test_unsupported_and_incomplete_urls_raise_configuration_error() -> None:
    """Unknown schemes, malformed URLs and in-memory SQLite are refused with the supported forms."""
    for url in ("mysql://u@h/db", "not a url", "sqlite://", "sqlite:///:memory:"):
        with pytest.raises(ConfigurationError, match=r"sqlite:///path/to\.db"):
            open_store(url)


def test_missing_postgres_driver_names_the_extra(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """Without psycopg, a PostgreSQL URL fails with a hint to install ``ctxledger[postgres]``."""
    monkeypatch.setitem(sys.modules, "psycopg", None)
    with pytest.raises(ConfigurationError, match=r"pip install 'ctxledger\[postgres\]'"):
        open_store("postgresql://user:s3cret@db.invalid/app", blobs_dir=tmp_path)


def test_postgres_error_messages_hide_the_password(tmp_path: Path) -> None:
    """A database that cannot be reached is named without its password."""
    with pytest.raises(StoreConnectionError) as caught:
        open_store("postgresql://user:s3cret@127.0.0.1:1/app", blobs_dir=tmp_path)
    assert "s3cret" not in str(caught.value) and "127.0.0.1" in str(caught.value)


if POSTGRES_URL:

    def test_postgres_blobs_default_to_the_database_itself(
        postgres_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """A PostgreSQL store keeps blobs inside the database: every host that reaches it sees them."""
        monkeypatch.chdir(tmp_path)
        store = open_store(postgres_url)
        ref = store.blobs.put(b"pg blob")
        store.close()
        assert isinstance(store.blobs, DatabaseBlobStore)
        assert list(tmp_path.iterdir()) == []
        again = open_store(postgres_url)
        try:
            assert again.blobs.get(ref.sha256) == b"pg blob"
        finally:
            again.close()
