"""Store faults are clear errors or heal, never lost writes or crashes (one test per fault)."""

from __future__ import annotations

import errno
import json
import os
from datetime import UTC, datetime
from pathlib import Path

import pytest

from ctxledger import Ledger
from ctxledger.errors import BlobNotFound, StoreError
from ctxledger.hashing import sha256_hex
from ctxledger.store.blobs import LocalBlobStore

T0 = datetime(2026, 9, 1, tzinfo=UTC)


def test_a_sqlite_file_deleted_while_open_refuses_further_writes(tmp_path: Path):
    """SQLite would acknowledge writes to the unlinked file; they would vanish on reopen."""
    db = tmp_path / "ctx.db"
    ledger = Ledger.open(f"sqlite:///{db}")
    r = ledger.recorder("c", clock=T0)
    r.system("Be brief.")
    r.user("one")
    db.unlink()
    with pytest.raises(StoreError, match="deleted"):
        r.user("two")
    ledger.close()


def test_a_sqlite_file_replaced_while_open_refuses_further_writes(tmp_path: Path):
    db = tmp_path / "ctx.db"
    ledger = Ledger.open(f"sqlite:///{db}")
    r = ledger.recorder("c", clock=T0)
    r.system("Be brief.")
    os.replace(db, tmp_path / "moved.db")
    db.write_bytes(b"")
    with pytest.raises(StoreError, match="replaced"):
        r.user("two")
    ledger.close()


@pytest.mark.parametrize("damage", ["flip", "truncate", "empty"])
def test_putting_the_same_bytes_again_heals_a_corrupted_blob(tmp_path: Path, damage: str):
    blobs = LocalBlobStore(tmp_path)
    data = b"raw tool output\n" * 50
    ref = blobs.put(data)
    path = blobs.path(ref.sha256)
    broken = {"flip": b"X" + data[1:], "truncate": data[:10], "empty": b""}[damage]
    path.write_bytes(broken)
    blobs.put(data)
    assert blobs.get(ref.sha256) == data
    blobs.put_many([(data, "text/plain")])
    assert blobs.get(ref.sha256) == data


def test_a_directory_in_place_of_a_blob_is_moved_aside_by_put_and_is_not_found_on_read(tmp_path: Path):
    blobs = LocalBlobStore(tmp_path)
    data = b"bytes"
    sha = sha256_hex(data)
    blobs.path(sha).mkdir(parents=True)
    with pytest.raises(BlobNotFound, match="unreadable"):
        blobs.get(sha)
    with pytest.raises(BlobNotFound):
        blobs.get_range(sha, 0, 2)
    blobs.put(data)
    assert blobs.get(sha) == data
    assert any(p.name.startswith(f"{sha}.displaced") for p in blobs.path(sha).parent.iterdir())


@pytest.mark.parametrize("obstacle", ["directory", "unreadable"])
def test_an_unreadable_blob_is_a_reference_in_the_payload_not_a_crash(tmp_path: Path, monkeypatch, obstacle: str):
    ledger = Ledger.open(f"sqlite:///{tmp_path / 'ctx.db'}")
    r = ledger.recorder("c", clock=T0)
    r.system("Be brief.")
    r.user("Read it.")
    ex = r.tool_call("read_file", {"path": "a"}, output="the file body " * 20)
    r.user("What does it say?")
    art = next(rec for rec in ledger.store.records("default", "c") if getattr(rec, "sha256", None))
    path = ledger.store.blobs.path(art.sha256)
    if obstacle == "directory":
        path.unlink()
        path.mkdir()
    else:
        path.chmod(0)
        if os.geteuid() == 0:  # root reads whatever the mode: the file system's refusal is simulated
            _refuse(monkeypatch, path)
    asm = ledger.assemble("c", window_tokens=8000, output_tokens=500, now=T0)
    assert "the file body" not in json.dumps(asm.payload)
    assert ex
    ledger.close()


def test_a_read_only_blob_folder_is_a_store_error(tmp_path: Path, monkeypatch):
    root = tmp_path / "blobs"
    root.mkdir()
    root.chmod(0o500)
    if os.geteuid() == 0:  # root writes whatever the mode: the refusal to create a file there is simulated
        monkeypatch.setattr("tempfile.mkstemp", _denied)
    try:
        with pytest.raises(StoreError, match="cannot write a blob"):
            LocalBlobStore(root).put(b"data")
    finally:
        root.chmod(0o700)


@pytest.mark.parametrize("errno_name", ["ENOSPC", "EROFS", "EACCES"])
def test_disk_full_and_read_only_file_systems_are_store_errors(tmp_path: Path, monkeypatch, errno_name: str):
    """The file system's refusal (simulated at the write call) surfaces as a StoreError, no temp file left."""
    import errno

    code = getattr(errno, errno_name)

    blobs = LocalBlobStore(tmp_path)
    monkeypatch.setattr("os.fdopen", lambda fd, mode: _Refusing(fd, code))
    with pytest.raises(StoreError, match="cannot write a blob") as caught:
        blobs.put(b"some data")
    assert {"ENOSPC": "disk is full", "EROFS": "read-only", "EACCES": "ermission"}[errno_name] in str(caught.value)
    assert not [p for p in tmp_path.rglob("*.tmp")]


def _denied(*args, **kwargs):
    raise PermissionError(errno.EACCES, os.strerror(errno.EACCES))


def _refuse(monkeypatch, path: Path) -> None:
    """Make reading ``path`` fail as a mode-0 file does for a user who is not root."""
    read_bytes, open_ = Path.read_bytes, Path.open

    def refused_read(self, *args, **kwargs):
        return _denied() if self == path else read_bytes(self, *args, **kwargs)

    def refused_open(self, *args, **kwargs):
        return _denied() if self == path else open_(self, *args, **kwargs)

    monkeypatch.setattr(Path, "read_bytes", refused_read)
    monkeypatch.setattr(Path, "open", refused_open)


class _Refusing:
    def __init__(self, fd: int, code: int) -> None:
        self.fd, self.code = fd, code

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        os.close(self.fd)
        return False

    def write(self, data):
        raise OSError(self.code, os.strerror(self.code))
