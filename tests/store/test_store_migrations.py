"""One Alembic history for both dialects: it builds exactly ``ctxledger.store.schema``, idempotently."""

from __future__ import annotations

from pathlib import Path

import pytest
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext
from sqlalchemy import create_engine, inspect

from ctxledger.errors import MigrationError
from ctxledger.store import migrate, open_store
from ctxledger.store._migrate import head_revision
from ctxledger.store.schema import VERSION_TABLE, metadata
from ctxledger.testing import every_record_type


def test_migrated_database_matches_the_schema_module(empty_sql_url: str) -> None:
    """After ``migrate`` the database has exactly the tables, columns and indexes of ``schema.py``."""
    assert migrate(empty_sql_url) == head_revision() == "0001_initial"
    engine = create_engine(empty_sql_url)
    with engine.connect() as conn:
        context = MigrationContext.configure(
            conn, opts={"compare_type": True, "version_table": VERSION_TABLE}
        )
        assert compare_metadata(context, metadata) == []
        names = set(inspect(conn).get_table_names())
        indexes = {ix["name"] for ix in inspect(conn).get_indexes("records")}
    engine.dispose()
    assert names == {"records", "conversation_heads", "token_counts", "assemblies", VERSION_TABLE}
    assert {"ix_records_tenant_id_conversation_id_branch_id_seq", "ix_records_blob_sha256"} <= indexes


def test_migrate_is_idempotent_and_records_the_revision(empty_sql_url: str) -> None:
    """Migrating twice is harmless and the version table names the head revision."""
    migrate(empty_sql_url)
    migrate(empty_sql_url)
    engine = create_engine(empty_sql_url)
    with engine.connect() as conn:
        current = MigrationContext.configure(
            conn, opts={"version_table": VERSION_TABLE}
        ).get_current_revision()
    engine.dispose()
    assert current == head_revision()


def test_open_without_migrating_refuses_an_unmigrated_database(empty_sql_url: str) -> None:
    """``open_store(url, migrate=False)`` on an empty database raises ``MigrationError`` naming the fix."""
    with pytest.raises(MigrationError, match="ctxledger migrate"):
        open_store(empty_sql_url, migrate=False)
    migrate(empty_sql_url)
    store = open_store(empty_sql_url, migrate=False)
    assert store.conversations("t") == []
    store.close()


def test_data_survives_reopening(empty_sql_url: str, tmp_path: Path) -> None:
    """Records and blobs written through one store are read back by a store opened later."""
    first = open_store(empty_sql_url, blobs_dir=tmp_path / "blobs")
    written = first.append(every_record_type("t", "persist"))
    ref = first.blobs.put(b"raw tool output")
    first.close()
    second = open_store(empty_sql_url, blobs_dir=tmp_path / "blobs")
    assert second.records("t", "persist") == written
    assert second.blobs.get(ref.sha256) == b"raw tool output"
    second.close()
