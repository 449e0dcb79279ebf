"""One Alembic history for both dialects: it builds exactly ``ctxledger.store.schema``, idempotently."""

from __future__ import annotations

from pathlib import Path

import pytest
import sqlalchemy
from alembic import command
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext
from sqlalchemy import create_engine, inspect
from sqlalchemy.exc import SQLAlchemyError

from ctxledger.errors import MigrationError
from ctxledger.ledger import Ledger
from ctxledger.records import ToolArtifact
from ctxledger.scenarios._graph import GraphBuilder
from ctxledger.scenarios.catalog import SCENARIOS
from ctxledger.store import _engine as store_engine
from ctxledger.store import migrate, open_store, schema
from ctxledger.store._migrate import LEGACY_REVISIONS, alembic_config, current_revision, head_revision
from ctxledger.store.blobs import LocalBlobStore
from ctxledger.store.codec import assembly_row, decode_record, encode_record
from ctxledger.store.schema import VERSION_TABLE, metadata
from ctxledger.testing import EVERY_RECORD_BLOB, MemoryStore, every_record_type


def test_migrated_database_matches_the_schema_module(empty_sql_url: str) -> None:
    """After ``migrate`` the database has exactly the tables, columns and indexes of ``schema.py``."""
    assert migrate(empty_sql_url) == head_revision() == "0007_rung_memo"
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
        "retention_audit", "retention_blob_queue", "record_facts", "record_links", "protected_state",
        "inspector_sessions", "rung_memo", VERSION_TABLE,
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


def _scenario_graph(name: str) -> tuple[MemoryStore, str]:
    """A scenario's graph written through the in-memory store (facts computed on append there)."""
    scenario = next(s for s in SCENARIOS if s.name == name)
    ledger = Ledger(MemoryStore(), policy=scenario.policy() if scenario.policy else None)
    builder = GraphBuilder(ledger, scenario.name)
    scenario.build(builder)
    return ledger.store, builder.conversation_id  # type: ignore[return-value]


def _written_before_facts(url: str, blobs_dir: Path, name: str) -> tuple[MemoryStore, str, list]:
    """A scenario's records and blobs as a ctxledger at ``0004_retention`` wrote them (no write-path facts)."""
    reference, conv = _scenario_graph(name)
    records = reference.records("default", conv)
    _at_revision(url, "0004_retention")
    blobs = LocalBlobStore(blobs_dir)
    for rec in records:
        if isinstance(rec, ToolArtifact):
            blobs.put(reference.blobs.get(rec.sha256))
    engine = create_engine(url)
    with engine.begin() as conn:
        conn.execute(schema.records.insert(), [encode_record(r, i) for i, r in enumerate(records)])
        head = {"tenant_id": "default", "conversation_id": conv, "head_seq": records[-1].seq}
        created = encode_record(records[0])["created_at"]
        conn.execute(
            schema.conversation_heads.insert(), {**head, "main_branch_id": records[0].branch_id, "created_at": created}
        )
    engine.dispose()
    return reference, conv, records


@pytest.mark.parametrize(
    "name", ["secrets-withheld", "contradiction-and-supersession", "participant-visibility", "multi-skill-run-state"]
)
def test_upgrading_a_0002_database_computes_the_facts_an_append_would(
    empty_sql_url: str, tmp_path: Path, name: str
) -> None:
    """Records written at 0002 get, on upgrade, exactly the facts, links and protected entries of an append."""
    assert any(s.name == name for s in SCENARIOS), f"no scenario {name}"
    reference, conv, records = _written_before_facts(empty_sql_url, tmp_path / "blobs", name)
    store = open_store(empty_sql_url, blobs_dir=tmp_path / "blobs")
    try:
        assert store.records("default", conv) == records
        assert store.record_facts("default", conv) == reference.record_facts("default", conv)
        assert store.links("default", conv) == reference.links("default", conv)
        assert store.protected("default", conv) == reference.protected("default", conv)
        assert any(f.text_findings() or f.block for f in store.record_facts("default", conv).values()) or (
            name != "secrets-withheld"
        )
    finally:
        store.close()


@pytest.mark.parametrize("given_blobs", [True, False])
def test_the_backfill_reads_tool_results_from_the_blob_folder_it_is_given(
    empty_sql_url: str, tmp_path: Path, given_blobs: bool
) -> None:
    """``migrate(url, blobs_dir=…)`` computes a result's facts from its bytes; without them, the first snapshot does."""
    from ctxledger.assemble.snapshot import SnapshotLoader

    reference, conv, records = _written_before_facts(empty_sql_url, tmp_path / "blobs", "secrets-withheld")
    migrate(empty_sql_url, blobs_dir=tmp_path / ("blobs" if given_blobs else "elsewhere"))
    store = open_store(empty_sql_url, blobs_dir=tmp_path / "blobs", migrate=False)
    try:
        artifacts = [r.id for r in records if isinstance(r, ToolArtifact)]
        assert artifacts
        stored = store.record_facts("default", conv)
        assert all(stored[a].raw_readable is given_blobs for a in artifacts)
        SnapshotLoader(store).load("default", conv, records[0].branch_id)
        assert store.record_facts("default", conv) == reference.record_facts("default", conv)
    finally:
        store.close()


@pytest.mark.parametrize("legacy, current", sorted(LEGACY_REVISIONS.items()))
def test_a_store_at_an_earlier_name_of_a_revision_upgrades_from_it(
    empty_sql_url: str, legacy: str, current: str
) -> None:
    """A version row holding a revision's earlier name is read as that revision and upgraded to the head."""
    _at_revision(empty_sql_url, current)
    engine = create_engine(empty_sql_url)
    with engine.begin() as conn:
        conn.execute(sqlalchemy.text(f"UPDATE {VERSION_TABLE} SET version_num = :old"), {"old": legacy})
    engine.dispose()
    assert migrate(empty_sql_url) == head_revision()
    engine = create_engine(empty_sql_url)
    assert current_revision(engine) == head_revision()
    engine.dispose()
