"""LocalBlobStore.put_many: the batch path importers use."""

from __future__ import annotations

from ctxledger.hashing import sha256_hex
from ctxledger.store.blobs import LocalBlobStore


def test_put_many_stores_every_blob_once_and_in_order(tmp_path):
    """Refs come back in input order, duplicates are idempotent, and every blob reads back exactly."""
    store = LocalBlobStore(tmp_path / "blobs")
    items = [(b"alpha", "text/plain"), (b'{"a": 1}', "application/json"), (b"alpha", "text/plain")]
    refs = store.put_many(items)
    assert [r.sha256 for r in refs] == [sha256_hex(d) for d, _ in items]
    assert [r.size_bytes for r in refs] == [5, 8, 5]
    assert all(store.get(r.sha256) == d for r, (d, _) in zip(refs, items, strict=True))
    assert len(list((tmp_path / "blobs").rglob("*.tmp"))) == 0


def test_put_many_writes_new_blobs_keeps_intact_ones_and_heals_the_rest(tmp_path):
    """New blobs in new and shared folders are written; an intact one is left alone; a damaged one and a
    directory in a blob's place are replaced, the directory kept beside it."""
    store = LocalBlobStore(tmp_path / "blobs")
    datas = [f"blob {i}".encode() * (i + 1) for i in range(40)]  # 40 blobs over 256 folders: some share one
    intact, damaged, blocked = datas[:3]
    store.put(intact)
    store.put(damaged)
    store.path(sha256_hex(damaged)).write_bytes(b"damage")
    store.path(sha256_hex(blocked)).mkdir(parents=True)
    before = store.path(sha256_hex(intact)).read_bytes()
    refs = store.put_many([(d, "text/plain") for d in datas])
    assert [store.get(r.sha256) for r in refs] == datas
    assert store.path(sha256_hex(intact)).read_bytes() == before
    folder = store.path(sha256_hex(blocked)).parent
    assert any(p.name.startswith(f"{sha256_hex(blocked)}.displaced") and p.is_dir() for p in folder.iterdir())
    assert not list((tmp_path / "blobs").rglob("*.tmp"))
