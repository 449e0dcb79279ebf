"""One Alembic history for both dialects: it builds exactly ``ctxledger.store.schema``, idempotently."""

from __future__ import annotations

from pathlib import Path

import pytest
from alembic import command
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext
from sqlalchemy import create_engine, inspect
from sqlalchemy.exc import SQLAlchemyError

from ctxledger.errors import MigrationError
from ctxledger.store import _engine as store_engine
from ctxledger.store import migrate, open_store, schema
from ctxledger.store._migrate import alembic_config, head_revision
from ctxledger.store.codec import assembly_row, decode_record, encode_record
from ctxledger.store.schema import VERSION_TABLE, metadata
from ctxledger.testing import EVERY_RECORD_BLOB, every_record_type


def test_migrated_database_matches_the_schema_module(empty_sql_url: str) -> None:
    """After ``migrate`` the database has exactly the tables, columns and indexes of ``schema.py``."""
    assert migrate(empty_sql_url) == head_revision() == "0003_w15_retention"
    engine = create_engine(empty_sql_url)
    with engine.connect() as conn:
        context = MigrationContext.configure(conn, opts={"compare_type": True, "version_table": VERSION_TABLE})
        assert compare_metadata(context, metadata) == []
        names = set(inspect(conn).get_table_names())
        indexes = {ix["name"] for ix in inspect(conn).get_indexes("records")}
        primary_keys = {t: inspect(conn).get_pk_constraint(t) for t in ("records", "assemblies")}
    engine.dispose()
    assert names == {
        "records", "conversation_heads", "token_counts", "assemblies", "api_keys", "blobs", "blob_chunks",
        "retention_audit", "retention_blob_queue", VERSION_TABLE,
    }  # fmt: skip
    assert {"ix_records_tenant_id_conversation_id_branch_id_seq", "ix_records_blob_sha256"} <= indexes
    for table in ("records", "assemblies"):
        assert (primary_keys[table]["name"], primary_keys[table]["constrained_columns"]) == (
            f"pk_{table}",
            ["tenant_id", "id"],
        )


def test_migrate_is_idempotent_and_records_the_revision(empty_sql_url: str) -> None:
    """Migrating twice is harmless and the version table names the head revision."""
    migrate(empty_sql_url)
    migrate(empty_sql_url)
    engine = create_engine(empty_sql_url)
    with engine.connect() as conn:
        current = MigrationContext.configure(conn, opts={"version_table": VERSION_TABLE}).get_current_revision()
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
    ref = first.blobs.put(EVERY_RECORD_BLOB)
    written = first.append(every_record_type("t", "persist"))
    first.close()
    second = open_store(empty_sql_url, blobs_dir=tmp_path / "blobs")
    assert second.records("t", "persist") == written
    assert second.blobs.get(ref.sha256) == EVERY_RECORD_BLOB
    second.close()


def _at_revision(url: str, revision: str) -> None:
    """Migrate an empty database to ``revision`` (not the head), as an older ctxledger left it."""
    engine, _ = store_engine(url)
    config = alembic_config()
    with engine.begin() as conn:
        config.attributes["connection"] = conn
        command.upgrade(config, revision)
    engine.dispose()


def test_upgrading_a_0001_database_keeps_every_row_and_frees_ids_per_tenant(empty_sql_url: str, tmp_path: Path) -> None:
    """Rows written at 0001 (ids globally unique) read back after upgrading; then a second tenant may reuse them."""
    _at_revision(empty_sql_url, "0001_initial")
    records = every_record_type("ta", "old")
    rows = [{**encode_record(r, i), "seq": i + 1} for i, r in enumerate(records)]
    manifest = {"id": "asm-old", "tenant_id": "ta", "conversation_id": "old", "snapshot_seq": 3}
    engine = create_engine(empty_sql_url)
    with engine.begin() as conn:
        assert MigrationContext.configure(conn, opts={"version_table": VERSION_TABLE}).get_current_revision() == (
            "0001_initial"
        )
        conn.execute(schema.records.insert(), rows)
        conn.execute(
            schema.conversation_heads.insert(),
            {
                "tenant_id": "ta",
                "conversation_id": "old",
                "head_seq": len(rows),
                "main_branch_id": records[0].branch_id,
                "created_at": rows[0]["created_at"],
            },
        )
        conn.execute(schema.assemblies.insert(), assembly_row(manifest))
    engine.dispose()

    store = open_store(empty_sql_url, blobs_dir=tmp_path / "blobs")
    try:
        expected = [decode_record(row) for row in rows]
        assert store.records("ta", "old") == expected
        assert [store.get("ta", r.id) for r in expected] == expected
        assert store.get_assembly("ta", "asm-old")["snapshot_seq"] == 3
        store.blobs.put(EVERY_RECORD_BLOB)
        again = store.append(every_record_type("tb", "old"))
        assert [r.id for r in again] == [r.id for r in expected]
        assert store.records("ta", "old") == expected
        assert all(r.tenant_id == "tb" for r in store.records("tb", "old"))
        store.put_assembly({**manifest, "tenant_id": "tb"})
        assert store.get_assembly("tb", "asm-old")["tenant_id"] == "tb"
    finally:
        store.close()


def test_downgrade_to_0001_refuses_ids_two_tenants_share(empty_sql_url: str, tmp_path: Path) -> None:
    """Going back to globally unique ids fails while two tenants hold one id, and leaves the data at head."""
    store = open_store(empty_sql_url, blobs_dir=tmp_path / "blobs")
    store.blobs.put(EVERY_RECORD_BLOB)
    store.append(every_record_type("ta", "both"))
    store.append(every_record_type("tb", "both"))
    store.close()
    engine, _ = store_engine(empty_sql_url)
    config = alembic_config()
    with pytest.raises(SQLAlchemyError), engine.begin() as conn:
        config.attributes["connection"] = conn
        command.downgrade(config, "0001_initial")
    engine.dispose()
    reopened = open_store(empty_sql_url, migrate=False)
    expected = len(every_record_type("t", "c"))
    assert len(reopened.records("ta", "both")) == len(reopened.records("tb", "both")) == expected
    reopened.close()
