"""The content-addressed blob stores keep real tool outputs whole, verified, and write them atomically."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from store_realdata import tool_outputs, trajectory_files

from ctxledger.errors import BlobNotFound, InputError, IntegrityError, RecordNotFound
from ctxledger.hashing import sha256_hex
from ctxledger.store import BlobStore, LocalBlobStore
from ctxledger.testing import MemoryBlobStore


@pytest.fixture(params=["local", "memory"])
def blobs(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[BlobStore]:
    """A fresh blob store of each kind."""
    yield LocalBlobStore(tmp_path / "blobs") if request.param == "local" else MemoryBlobStore()


def _tamper(blobs: BlobStore, sha: str, data: bytes) -> None:
    if isinstance(blobs, LocalBlobStore):
        blobs.path(sha).write_bytes(data)
    else:
        assert isinstance(blobs, MemoryBlobStore)
        blobs.tamper(sha, data)


def test_real_tool_outputs_round_trip_exactly(blobs: BlobStore, data_dir: Path) -> None:
    """Every raw tool output of a real SWE trajectory comes back byte for byte under its sha256."""
    outputs = tool_outputs(trajectory_files(data_dir)[0])
    refs = [blobs.put(o, "text/plain; charset=utf-8") for o in outputs]
    assert len(outputs) > 50
    for output, ref in zip(outputs, refs, strict=True):
        assert ref.sha256 == sha256_hex(output) and ref.size_bytes == len(output)
        assert blobs.exists(ref.sha256)
        assert blobs.get(ref.sha256) == output


def test_corrupted_bytes_raise_integrity_error_for_whole_reads_and_ranges(blobs: BlobStore) -> None:
    """A blob whose bytes no longer match its name is never returned, whole or as a range."""
    ref = blobs.put(b"<returncode>0</returncode><output>ok</output>")
    _tamper(blobs, ref.sha256, b"<returncode>0</returncode><output>OK</output>")
    with pytest.raises(IntegrityError, match=ref.sha256):
        blobs.get(ref.sha256)
    with pytest.raises(IntegrityError):
        blobs.get_range(ref.sha256, 0, 12)


def test_missing_blob_is_record_not_found_and_bad_names_are_input_errors(blobs: BlobStore) -> None:
    """Unknown digests raise ``BlobNotFound`` (a ``RecordNotFound``); non-digests raise ``InputError``."""
    with pytest.raises(BlobNotFound) as caught:
        blobs.get("f" * 64)
    assert isinstance(caught.value, RecordNotFound) and caught.value.sha256 == "f" * 64
    with pytest.raises(RecordNotFound):
        blobs.get_range("f" * 64, 0, 1)
    for bad in ("sha256:" + "f" * 64, "F" * 64, "../" * 21 + "x", ""):
        with pytest.raises(InputError) as bad_name:
            blobs.get(bad)
        assert bad_name.value.field == "sha256"


def test_bad_ranges_are_refused(blobs: BlobStore) -> None:
    """Negative, reversed or non-integer byte ranges raise ``InputError`` naming the bound."""
    ref = blobs.put(b"0123456789")
    for start, end, field in ((-1, 3, "start"), (5, 2, "end"), (0, 2.5, "end"), (True, 3, "start")):
        with pytest.raises(InputError) as caught:
            blobs.get_range(ref.sha256, start, end)  # type: ignore[arg-type]
        assert caught.value.field == field


@settings(max_examples=60, suppress_health_check=[HealthCheck.function_scoped_fixture], deadline=None)
@given(data=st.binary(max_size=3000), start=st.integers(0, 3200), length=st.integers(0, 3200))
def test_ranges_equal_python_slices(blobs: BlobStore, data: bytes, start: int, length: int) -> None:
    """``get_range(sha, start, end)`` is ``data[start:end]`` for any bounds, end past the size included."""
    ref = blobs.put(data)
    assert blobs.get_range(ref.sha256, start, start + length) == data[start : start + length]


def test_local_layout_is_sharded_and_leaves_no_temporary_files(tmp_path: Path, data_dir: Path) -> None:
    """Blobs live at ``<root>/<sha[:2]>/<sha>``; a re-put does not rewrite the file (same inode), only touches it."""
    store = LocalBlobStore(tmp_path / "b")
    outputs = tool_outputs(trajectory_files(data_dir)[1])[:30]
    refs = [store.put(o) for o in outputs]
    files = sorted(p for p in (tmp_path / "b").rglob("*") if p.is_file())
    assert files == sorted({store.root / r.sha256[:2] / r.sha256 for r in refs})
    before = os.stat(files[0])
    store.put(files[0].read_bytes())
    after = os.stat(files[0])
    assert (after.st_ino, after.st_size) == (before.st_ino, before.st_size)
    assert after.st_mtime_ns >= before.st_mtime_ns  # refreshed: gc's grace period counts from the last put


def test_a_failed_write_leaves_neither_a_partial_blob_nor_a_temp_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """If the final rename fails, the blob is absent and its temporary file is removed."""
    store = LocalBlobStore(tmp_path / "b")

    def fail(src: str, dst: str) -> None:
        raise OSError("disk full")

    monkeypatch.setattr(os, "replace", fail)
    with pytest.raises(OSError, match="disk full"):
        store.put(b"half written?")
    monkeypatch.undo()
    assert [p for p in (tmp_path / "b").rglob("*") if p.is_file()] == []
    assert not store.exists(sha256_hex(b"half written?"))


def test_unverified_range_reads_only_the_range(tmp_path: Path) -> None:
    """``verify=False`` returns the range without hashing the whole blob (so it skips the check)."""
    store = LocalBlobStore(tmp_path / "b")
    ref = store.put(b"abcdefghij")
    store.path(ref.sha256).write_bytes(b"abcdeXghij")
    assert store.get_range(ref.sha256, 4, 7, verify=False) == b"eXg"
    with pytest.raises(IntegrityError):
        store.get_range(ref.sha256, 4, 7)
