"""LocalBlobStore.put_many: the batch path importers use."""

from __future__ import annotations

from ctxledger.hashing import sha256_hex
from ctxledger.store.blobs import LocalBlobStore


def test_put_many_stores_every_blob_once_and_in_order(tmp_path):
    """Refs come back in input order, duplicates are idempotent, and every blob reads back exactly."""
    store = LocalBlobStore(tmp_path / "blobs")
    items = [(b"alpha", "text/plain"), (b"{\"a\": 1}", "application/json"), (b"alpha", "text/plain")]
    refs = store.put_many(items)
    assert [r.sha256 for r in refs] == [sha256_hex(d) for d, _ in items]
    assert [r.size_bytes for r in refs] == [5, 8, 5]
    assert all(store.get(r.sha256) == d for r, (d, _) in zip(refs, items, strict=True))
    assert len(list((tmp_path / "blobs").rglob("*.tmp"))) == 0
