"""Blobs inside the database, blob garbage collection with a grace period, and service API keys."""

from __future__ import annotations

import io
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sqlalchemy import update

from ctxledger.errors import BlobNotFound, IntegrityError, RecordNotFound
from ctxledger.hashing import sha256_hex
from ctxledger.ledger import Ledger
from ctxledger.store import IN_DATABASE, LocalBlobStore, open_store
from ctxledger.store.dbblobs import CHUNK_BYTES, DatabaseBlobStore
from ctxledger.store.gc import collect_garbage
from ctxledger.store.keys import create_key, list_keys, revoke_key, tenant_for_key
from ctxledger.store.schema import blob_chunks


@pytest.fixture
def sql_store(empty_sql_url: str):
    opened = open_store(empty_sql_url, blobs_dir=IN_DATABASE)
    yield opened
    opened.close()


@settings(max_examples=25, suppress_health_check=[HealthCheck.function_scoped_fixture], deadline=None)
@given(data=st.binary(max_size=3 * 1024), start=st.integers(0, 4000), length=st.integers(0, 4000))
def test_database_blobs_round_trip_by_hash_and_range(sql_store, data: bytes, start: int, length: int) -> None:
    blobs = sql_store.blobs
    assert isinstance(blobs, DatabaseBlobStore)
    ref = blobs.put(data, "text/plain")
    assert ref.sha256 == sha256_hex(data) and ref.size_bytes == len(data)
    assert blobs.put(data).sha256 == ref.sha256  # idempotent
    assert blobs.get(ref.sha256) == data
    assert blobs.get_range(ref.sha256, start, start + length) == data[start : start + length]
    assert blobs.get_range(ref.sha256, start, start + length, verify=False) == data[start : start + length]


def test_a_blob_larger_than_a_chunk_streams_in_and_out(sql_store) -> None:
    data = bytes(range(256)) * (CHUNK_BYTES // 256 * 2 + 3)
    ref = sql_store.blobs.put_stream(io.BytesIO(data))
    chunks = list(sql_store.blobs.iter_chunks(ref.sha256))
    assert len(chunks) == 3 and max(map(len, chunks)) == CHUNK_BYTES
    assert b"".join(chunks) == data
    edge = CHUNK_BYTES - 5
    assert sql_store.blobs.get_range(ref.sha256, edge, edge + 10, verify=False) == data[edge : edge + 10]


def test_tampered_database_bytes_are_refused_and_missing_blobs_named(sql_store) -> None:
    ref = sql_store.blobs.put(b"exact tool output")
    with sql_store.engine.begin() as conn:
        conn.execute(update(blob_chunks).where(blob_chunks.c.sha256 == ref.sha256).values(data=b"changed"))
    with pytest.raises(IntegrityError):
        sql_store.blobs.get(ref.sha256)
    with pytest.raises(BlobNotFound):
        sql_store.blobs.get("0" * 64)


TOOL_EXCHANGE = [
    {"role": "user", "content": "weather in Oslo?"},
    {
        "role": "assistant",
        "content": None,
        "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "weather", "arguments": "{}"}}],
    },
    {"role": "tool", "tool_call_id": "c1", "content": '{"referenced": true}'},
]


def _store_with_orphans(store) -> tuple[str, list[str]]:
    Ledger(store).import_messages(TOOL_EXCHANGE, conversation_id="c")
    referenced = next(r.sha256 for r in store.records("default", "c") if getattr(r, "sha256", None))
    orphans = [store.blobs.put(f"orphan {i}".encode()).sha256 for i in range(5)]
    return referenced, orphans


@pytest.mark.parametrize("where", ["folder", "database"])
def test_gc_removes_only_unreferenced_blobs_past_the_grace_period(
    empty_sql_url: str, tmp_path: Path, where: str
) -> None:
    store = open_store(empty_sql_url, blobs_dir=tmp_path / "blobs" if where == "folder" else IN_DATABASE)
    try:
        referenced, orphans = _store_with_orphans(store)
        young = collect_garbage(store)  # just written: the grace period protects them
        assert young.removed == [] and young.young == len(orphans) and young.referenced == 1
        later = datetime.now(UTC) + timedelta(hours=2)
        dry = collect_garbage(store, now=later, dry_run=True)
        assert sorted(dry.removed) == sorted(orphans) and all(store.blobs.exists(s) for s in orphans)
        done = collect_garbage(store, now=later)
        assert sorted(done.removed) == sorted(orphans) and done.removed_bytes == sum(
            len(f"orphan {i}") for i in range(5)
        )
        assert not any(store.blobs.exists(s) for s in orphans)
        assert store.blobs.exists(referenced)
        assert collect_garbage(store, now=later).removed == []
    finally:
        store.close()


def test_sqlite_blobs_sit_next_to_the_database_file_whatever_the_working_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    store = open_store("sqlite:///rel/ctx.db")
    monkeypatch.chdir("/")
    try:
        assert isinstance(store.blobs, LocalBlobStore)
        assert store.blobs.root == tmp_path / "rel" / "ctx.db.blobs"
        ref = store.blobs.put(b"x")
        assert (tmp_path / "rel" / "ctx.db.blobs" / ref.sha256[:2] / ref.sha256).read_bytes() == b"x"
    finally:
        store.close()


def test_a_key_is_stored_only_as_its_hash_and_names_its_tenant(sql_store) -> None:
    key, row = create_key(sql_store, "acme", name="ci")
    assert key.startswith("ctxl_") and row.tenant_id == "acme"
    with sql_store.engine.connect() as conn:
        dump = " ".join(str(v) for r in conn.exec_driver_sql("SELECT * FROM api_keys") for v in r)
    assert key not in dump and key.split("_", 2)[-1] not in dump
    assert tenant_for_key(sql_store, key) == "acme"
    assert tenant_for_key(sql_store, key[:-1] + ("A" if key[-1] != "A" else "B")) is None
    assert tenant_for_key(sql_store, "") is None
    assert [k.id for k in list_keys(sql_store, "acme")] == [row.id]
    revoke_key(sql_store, row.id)
    assert tenant_for_key(sql_store, key) is None
    with pytest.raises(RecordNotFound):
        revoke_key(sql_store, row.id)
