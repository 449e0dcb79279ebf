"""The blob folder's pack: a batch of blobs goes into one SQLite file, and reads do not tell the difference."""

from __future__ import annotations

import sqlite3
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ctxledger.errors import BlobNotFound, IntegrityError, StoreError
from ctxledger.hashing import sha256_hex
from ctxledger.store import blobpack
from ctxledger.store.blobpack import FILENAME
from ctxledger.store.blobs import LocalBlobStore, ReadAhead
from ctxledger.testing import MemoryBlobStore


def _files(root: Path) -> list[Path]:
    return sorted(p for p in root.rglob("*") if p.is_file() and p.name != FILENAME)


def test_a_batch_writes_no_file_per_blob_and_reads_back_exactly(tmp_path: Path) -> None:
    """put_many puts every new blob into the pack; get, ranges, exists and the listing see them."""
    store = LocalBlobStore(tmp_path / "b")
    datas = [f"output {i}\n".encode() * (i + 1) for i in range(50)]
    refs = store.put_many([(d, "text/plain") for d in datas])
    assert _files(tmp_path / "b") == [] and (tmp_path / "b" / FILENAME).is_file()
    for data, ref in zip(datas, refs, strict=True):
        assert store.exists(ref.sha256) and store.get(ref.sha256) == data
        assert store.get_range(ref.sha256, 3, 11) == data[3:11]
        assert store.get_range(ref.sha256, 3, 11, verify=False) == data[3:11]
    assert [b.sha256 for b in store.stored()] == sorted(r.sha256 for r in refs)
    assert {b.sha256: b.size_bytes for b in store.stored()} == {r.sha256: r.size_bytes for r in refs}


def test_files_written_before_the_pack_still_read_and_are_listed_once(tmp_path: Path) -> None:
    """A folder of blob files (as every earlier version wrote) reads as before; a put_many of those bytes
    keeps the files and does not pack them again."""
    store = LocalBlobStore(tmp_path / "b")
    old = [store.put(f"old {i}".encode()) for i in range(5)]
    files = _files(tmp_path / "b")
    refs = store.put_many([(f"old {i}".encode(), "text/plain") for i in range(5)] + [(b"new", "text/plain")])
    assert _files(tmp_path / "b") == files
    assert [store.get(r.sha256) for r in refs] == [f"old {i}".encode() for i in range(5)] + [b"new"]
    assert store.pack.held([r.sha256 for r in old]) == {}
    assert len(list(store.stored())) == 6


def test_damaged_pack_bytes_are_an_integrity_error_and_a_put_heals_them(tmp_path: Path) -> None:
    """Bytes changed inside the pack are never returned; putting the blob again (alone or in a batch) heals it."""
    store = LocalBlobStore(tmp_path / "b")
    data = b"raw tool output\n" * 40
    (ref,) = store.put_many([(data, "text/plain")])
    with sqlite3.connect(tmp_path / "b" / FILENAME) as conn:
        conn.execute("UPDATE blobs SET data = ? WHERE sha256 = ?", (b"X" + data[1:], ref.sha256))
    with pytest.raises(IntegrityError, match=ref.sha256):
        store.get(ref.sha256)
    with pytest.raises(IntegrityError):
        store.get_range(ref.sha256, 0, 5)
    assert store.get_range(ref.sha256, 0, 5, verify=False) == b"Xaw t"
    store.put(data)
    assert store.get(ref.sha256) == data and _files(tmp_path / "b") == []
    with sqlite3.connect(tmp_path / "b" / FILENAME) as conn:
        conn.execute("UPDATE blobs SET data = ? WHERE sha256 = ?", (b"", ref.sha256))
    store.put_many([(data, "text/plain")])
    assert store.get(ref.sha256) == data


def test_a_file_put_over_a_packed_blob_is_read_first(tmp_path: Path) -> None:
    """A file at a blob's path is what a read checks (damage there is an error even when the pack is intact)."""
    store = LocalBlobStore(tmp_path / "b")
    (ref,) = store.put_many([(b"the bytes", "text/plain")])
    store.path(ref.sha256).parent.mkdir(parents=True)
    store.path(ref.sha256).write_bytes(b"other bytes")
    with pytest.raises(IntegrityError, match=str(store.path(ref.sha256))):
        store.get(ref.sha256)


def test_delete_removes_the_bytes_from_the_pack_file(tmp_path: Path) -> None:
    """Retention deletes blobs to forget them: the deleted bytes are not left in the pack's pages."""
    store = LocalBlobStore(tmp_path / "b")
    secret = b"password=hunter2-" + b"q" * 300
    keep = b"kept output " * 100
    refs = store.put_many([(secret, "text/plain"), (keep, "text/plain")])
    store.close()
    assert secret in (tmp_path / "b" / FILENAME).read_bytes()
    store.delete(refs[0].sha256)
    store.close()
    assert secret not in (tmp_path / "b" / FILENAME).read_bytes()
    assert not store.exists(refs[0].sha256) and store.get(refs[1].sha256) == keep
    with pytest.raises(BlobNotFound):
        store.get(refs[0].sha256)
    assert [b.sha256 for b in store.stored()] == [refs[1].sha256]


def test_a_pack_that_cannot_be_written_is_a_store_error(tmp_path: Path) -> None:
    """A pack the folder cannot hold (here a directory where the file should be) fails the batch, naming the folder."""
    store = LocalBlobStore(tmp_path / "b")
    (tmp_path / "b" / FILENAME).mkdir(parents=True)
    with pytest.raises(StoreError, match="cannot write a blob"):
        store.put_many([(b"data", "text/plain")])
    assert not store.exists(sha256_hex(b"data"))


def test_a_second_store_on_the_same_folder_sees_the_batch(tmp_path: Path) -> None:
    """Two stores (two processes' worth of connections) on one folder share the pack."""
    first, second = LocalBlobStore(tmp_path / "b"), LocalBlobStore(tmp_path / "b")
    assert not second.exists(sha256_hex(b"shared"))
    (ref,) = first.put_many([(b"shared", "text/plain")])
    assert second.get(ref.sha256) == b"shared"
    second.delete(ref.sha256)
    assert not first.exists(ref.sha256)


_OPS = st.lists(
    st.one_of(
        st.tuples(st.just("put"), st.integers(0, 7)),
        st.tuples(st.just("many"), st.lists(st.integers(0, 7), max_size=5)),
        st.tuples(st.just("delete"), st.integers(0, 7)),
    ),
    max_size=12,
)


@settings(max_examples=60, suppress_health_check=[HealthCheck.function_scoped_fixture], deadline=None)
@given(ops=_OPS, sizes=st.lists(st.integers(0, 600), min_size=8, max_size=8))
def test_files_and_pack_behave_as_the_in_memory_store(ops: list, sizes: list[int]) -> None:
    """Any mix of single puts, batches and deletes reads back as the in-memory reference store does."""
    datas = [bytes([i]) * size for i, size in enumerate(sizes)]
    with tempfile.TemporaryDirectory() as tmp:
        local, memory = LocalBlobStore(Path(tmp) / "b"), MemoryBlobStore()
        for op, arg in ops:
            if op == "put":
                assert local.put(datas[arg]) == memory.put(datas[arg])
            elif op == "many":
                items = [(datas[i], "text/plain") for i in arg]
                assert local.put_many(items) == [memory.put(d, m) for d, m in items]
            else:
                local.delete(sha256_hex(datas[arg]))
                memory.delete(sha256_hex(datas[arg]))
        names = [sha256_hex(d) for d in datas]
        assert local.existing(names) == {sha for sha in names if memory.exists(sha)}
        for data in datas:
            sha = sha256_hex(data)
            assert local.exists(sha) == memory.exists(sha)
            if memory.exists(sha):
                assert local.get(sha) == data and local.get_range(sha, 1, 9) == data[1:9]
        assert sorted(b.sha256 for b in local.stored()) == sorted(
            sha256_hex(d) for d in set(datas) if memory.exists(sha256_hex(d))
        )
        local.close()


_BLOB_STATES = st.sampled_from(["packed", "file", "missing", "damaged", "shadowed"])


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    states=st.lists(_BLOB_STATES, min_size=1, max_size=12),
    order=st.randoms(use_true_random=False),
    window=st.integers(1, 5),
    data=st.data(),
)
def test_read_ahead_reads_what_get_reads(states, order, window, data) -> None:
    """Blobs packed, as files, missing, damaged or shadowed by a changed file, asked in any order with repeats
    through :class:`ReadAhead`, give exactly the bytes or the error ``get`` gives; ``get_many`` holds exactly the
    readable ones."""
    with tempfile.TemporaryDirectory() as tmp:
        store = LocalBlobStore(Path(tmp) / "b")
        names = []
        for i, state in enumerate(states):
            blob = f"blob {i} {state}\n".encode() * (i + 1)
            sha = sha256_hex(blob)
            names.append(sha)
            if state in ("packed", "damaged", "shadowed"):
                store.put_many([(blob, "text/plain")])
            elif state == "file":
                store.put(blob)
            if state == "damaged":
                with sqlite3.connect(Path(tmp) / "b" / FILENAME) as conn:
                    conn.execute("UPDATE blobs SET data = ? WHERE sha256 = ?", (b"X" + blob[1:], sha))
            if state == "shadowed":  # a changed file in front of intact packed bytes: get reads the file
                store.path(sha).parent.mkdir(parents=True, exist_ok=True)
                store.path(sha).write_bytes(b"changed")
        readable = {sha for sha, state in zip(names, states, strict=True) if state in ("packed", "file")}
        assert set(store.get_many(names)) == readable
        asked = data.draw(st.lists(st.sampled_from(names), max_size=20)) + names
        order.shuffle(asked)
        reader = ReadAhead(store, names, window=window)
        for sha in asked:
            if sha in readable:
                assert reader(sha) == store.get(sha)
            else:
                with pytest.raises((BlobNotFound, IntegrityError)):
                    reader(sha)
        store.close()



@settings(max_examples=15, deadline=None)
@given(
    sizes=st.lists(st.integers(min_value=0, max_value=3000), min_size=1, max_size=30),
    asked=st.lists(st.integers(min_value=0, max_value=40), max_size=40),
    indexed_before=st.booleans(),
)
def test_held_answers_from_the_names_index_with_the_sizes_get_reads(
    sizes: list[int], asked: list[int], indexed_before: bool
) -> None:
    """``held`` lists exactly the asked names the pack holds, with their byte sizes, by the names index; a pack
    written without that index (an earlier version) gets it when opened."""
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "b"
        datas = [bytes([i % 251]) * n + str(i).encode() for i, n in enumerate(sizes)]
        refs = LocalBlobStore(root).put_many([(d, "text/plain") for d in datas])
        pack = root / FILENAME
        if not indexed_before:
            with sqlite3.connect(pack) as conn:
                conn.execute("DROP INDEX blobs_names")
        names = [refs[i].sha256 if i < len(refs) else sha256_hex(str(i).encode()) for i in asked]
        expected = {r.sha256: r.size_bytes for r in refs if r.sha256 in names}
        store = LocalBlobStore(root)
        assert store.pack.held(names) == expected
        assert all(len(store.get(sha)) == size for sha, size in expected.items())
        with sqlite3.connect(pack) as conn:
            indexes = [row[1] for row in conn.execute("PRAGMA index_list(blobs)")]
        assert "blobs_names" in indexes
        store.pack.close()


def test_held_answers_from_the_primary_key_when_the_index_cannot_be_made(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A pack this process cannot add the index to (the statement fails) still answers ``held``, by its key."""
    root = tmp_path / "b"
    refs = LocalBlobStore(root).put_many([(b"one", "text/plain"), (b"three", "text/plain")])
    with sqlite3.connect(root / FILENAME) as conn:
        conn.execute("DROP INDEX blobs_names")
    monkeypatch.setattr(blobpack, "_NAMES_INDEX", "CREATE INDEX blobs_names ON no_such_table (sha256)")
    store = LocalBlobStore(root)
    assert store.pack.held([r.sha256 for r in refs] + ["0" * 64]) == {r.sha256: r.size_bytes for r in refs}
