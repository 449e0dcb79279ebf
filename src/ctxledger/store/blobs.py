"""The local content-addressed blob store (seed 004 "artefactos en bruto").

Raw tool results are captured whole, before any truncation, and named by the sha256 of their exact
bytes. :class:`LocalBlobStore` keeps a blob put alone in ``<root>/<sha[:2]>/<sha>``, and the blobs of a batch
(:meth:`LocalBlobStore.put_many`, what an import writes) in the folder's pack, one SQLite file
(:mod:`ctxledger.store.blobpack`), so an import does not create a file per tool output. A read looks for the
file first and then in the pack, so folders written before the pack existed read as they did:

* writes go to a temporary file in the same folder, are flushed to disk, then renamed into place
  (``os.replace`` is atomic), so a reader never sees a half-written blob and a crash leaves at most a
  stray ``.tmp`` file; a batch goes into the pack in one SQLite transaction;
* a blob is write-once: putting the same bytes again only refreshes its write time (the file's mtime),
  which garbage collection's grace period counts from; when the stored file no longer holds those bytes
  (corrupted, truncated, replaced by a directory), putting them again rewrites it: ``put`` heals;
* every read re-hashes the bytes and raises :class:`~ctxledger.errors.IntegrityError` on a mismatch; a
  blob that cannot be read (a directory or an unreadable file in its place) is
  :class:`~ctxledger.errors.BlobNotFound` naming why, so an assembly shows its reference instead;
* a write the file system refuses (disk full, read-only folder, no permission) raises
  :class:`~ctxledger.errors.StoreError` naming the folder and the reason.

The media type is *not* stored with the bytes: the same bytes may be referenced by several records, and
the record that references a blob (``ToolArtifact.media_type``) is the authority on how to read it.
``put`` returns it in the :class:`~ctxledger.store.base.BlobRef` for the caller's convenience.
"""

from __future__ import annotations

import hashlib
import os
import re
import sqlite3
import stat
import tempfile
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, BinaryIO

from ctxledger.errors import BlobNotFound, InputError, IntegrityError, StoreError
from ctxledger.hashing import sha256_hex
from ctxledger.store.base import BlobRef
from ctxledger.store.blobpack import BlobPack

_SHA256 = re.compile(r"[0-9a-f]{64}")
_CHUNK = 1 << 20


@dataclass(frozen=True, slots=True)
class StoredBlob:
    """One stored blob as garbage collection sees it: name, size in bytes, when it was written (UTC)."""

    sha256: str
    size_bytes: int
    written_at: datetime


def check_sha256(sha256: str) -> str:
    """Return ``sha256`` if it is a bare lowercase hex sha256 digest (64 characters).

    Raises:
        InputError: anything else (a tagged ``sha256:…`` form, a path, uppercase …).
    """
    if not isinstance(sha256, str) or not _SHA256.fullmatch(sha256):
        raise InputError(
            f"{sha256!r} is not a bare sha256 (64 lowercase hex characters)", source="<blobs>", field="sha256"
        )
    return sha256


def check_range(start: int, end: int) -> None:
    """Check a byte range ``[start, end)``: integers with ``0 <= start <= end``.

    Raises:
        InputError: a negative, reversed or non-integer bound.
    """
    for name, value in (("start", start), ("end", end)):
        if not isinstance(value, int) or isinstance(value, bool) or value < 0:
            raise InputError(f"byte offset must be an integer >= 0, got {value!r}", source="<blobs>", field=name)
    if end < start:
        raise InputError(f"end {end} is before start {start}", source="<blobs>", field="end")


def _touch(path: Path, blob: bytes) -> bool:
    """Refresh an intact blob's write time (so garbage collection's grace period covers a new reference).

    Returns whether ``path`` is a file holding exactly ``blob``; ``False`` (to be rewritten) when it is
    missing, differs (corruption), or is not a readable file. Whatever is in the way is moved aside.
    A missing blob costs one ``stat``.
    """
    try:
        info = path.stat()
    except OSError:
        return False  # nothing there (or nothing readable): written anew
    if stat.S_ISDIR(info.st_mode):  # never delete what a person put there: keep it beside the blob
        path.rename(path.with_name(f"{path.name}.displaced-{os.getpid()}-{id(blob):x}"))
        return False
    try:
        intact = stat.S_ISREG(info.st_mode) and info.st_size == len(blob) and path.read_bytes() == blob
    except OSError:
        intact = False
    if intact:
        try:
            os.utime(path)
        except OSError:
            return False
        return True
    return False


def _write_error(root: Path, exc: OSError | sqlite3.Error) -> StoreError:
    import errno

    why = {errno.ENOSPC: "the disk is full", errno.EROFS: "the file system is read-only", errno.EDQUOT: "over quota"}
    reason = str(exc) if isinstance(exc, sqlite3.Error) else why.get(exc.errno or 0) or exc.strerror or str(exc)
    return StoreError(f"cannot write a blob to {root}: {reason} ({type(exc).__name__}); nothing was stored")


def _occupied(path: Path) -> bool:
    """Whether anything (a blob file, damage, a directory) is at ``path``."""
    try:
        path.lstat()
    except FileNotFoundError:
        return False
    except OSError:
        return True
    return True


class LocalBlobStore:
    """Blobs as files in a local folder (see the module docstring).

    Args:
        root: the folder; created on first write.
    """

    def __init__(self, root: str | os.PathLike[str]) -> None:
        """Use ``root`` as the blob folder."""
        self.root = Path(root)
        self.pack = BlobPack(self.root)

    def close(self) -> None:
        """Close the pack's connection (the store stays usable: the next use opens another)."""
        self.pack.close()

    def __repr__(self) -> str:
        """Show the folder."""
        return f"LocalBlobStore({str(self.root)!r})"

    def path(self, sha256: str) -> Path:
        """Where the blob named ``sha256`` lives (it may not exist). Raises ``InputError`` for a bad name."""
        check_sha256(sha256)
        return self.root / sha256[:2] / sha256

    def put(self, data: bytes, media_type: str = "application/octet-stream") -> BlobRef:
        """Store ``data`` (idempotent) and return its reference (``size_bytes`` in bytes)."""
        blob = bytes(data)
        sha = sha256_hex(blob)
        target = self.path(sha)
        if not _occupied(target) and self.pack.held([sha]):
            self._write_pack([(sha, blob)])
        elif not _touch(target, blob):
            self._write_atomically(target, blob)
        return BlobRef(sha256=sha, size_bytes=len(blob), media_type=media_type)

    def put_many(self, items: Iterable[tuple[bytes, str]]) -> list[BlobRef]:
        """Store many blobs (idempotent): into the pack, in one transaction, unless a file is in a blob's place.

        A blob whose file exists (or something else at its path) is handled as :meth:`put` does (an intact file
        is touched, a damaged one rewritten, a directory moved aside), then made durable with one ``os.sync()``
        at the end; every other blob goes into the pack, whose commit makes the batch durable at once.

        Args:
            items: ``(data, media_type)`` pairs.

        Returns:
            Their references, in input order.
        """
        refs = []
        wrote = False
        packed: dict[str, bytes] = {}
        folders: set[Path] = set()  # made once per batch, not once per blob
        for data, media_type in items:
            blob = bytes(data)
            sha = sha256_hex(blob)
            target = self.path(sha)
            if not _occupied(target):
                packed[sha] = blob
            elif not _touch(target, blob):
                self._write_atomically(target, blob, fsync=False, made=target.parent in folders)
                folders.add(target.parent)
                wrote = True
            refs.append(BlobRef(sha256=sha, size_bytes=len(blob), media_type=media_type))
        self._write_pack(packed.items())
        if wrote:
            os.sync()
        return refs

    def _write_pack(self, blobs: Iterable[tuple[str, bytes]]) -> None:
        try:
            self.pack.write(blobs)
        except (OSError, sqlite3.Error) as exc:
            raise _write_error(self.root, exc) from exc

    def _write_atomically(self, target: Path, blob: bytes, *, fsync: bool = True, made: bool = False) -> None:
        """Write ``blob`` to a temporary file beside ``target`` and rename it into place.

        ``made``: the folder is known to exist (created earlier in the same batch).

        Raises:
            StoreError: the file system refused (disk full, read-only folder, no permission …).
        """
        try:
            if not made:
                target.parent.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".tmp")
        except OSError as exc:
            raise _write_error(self.root, exc) from exc
        try:
            with os.fdopen(fd, "wb") as handle:
                handle.write(blob)
                handle.flush()
                if fsync:
                    os.fsync(handle.fileno())
            os.replace(tmp, target)
        except OSError as exc:
            Path(tmp).unlink(missing_ok=True)
            raise _write_error(self.root, exc) from exc
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise

    def get(self, sha256: str) -> bytes:
        """Return the exact bytes named ``sha256``.

        Raises:
            BlobNotFound: no such blob (a :class:`~ctxledger.errors.RecordNotFound`).
            IntegrityError: the stored bytes no longer hash to ``sha256``.
            InputError: ``sha256`` is not a bare hex digest.
        """
        path = self.path(sha256)
        where: Path = path
        try:
            data = path.read_bytes()
        except FileNotFoundError:
            data = self._packed(sha256)
            where = self.pack.path
        except OSError as exc:  # a directory or an unreadable file where the blob should be
            raise BlobNotFound(sha256, f"{self.root} (unreadable: {exc.strerror or exc})") from None
        if sha256_hex(data) != sha256:
            name = where if where == path else f"{sha256} in {where}"
            raise IntegrityError(f"blob {name} does not hash to its name {sha256}")
        return data

    def get_many(self, names: Sequence[str]) -> dict[str, bytes]:
        """The exact bytes of each of ``names`` that is stored and intact, by name.

        As :meth:`get`, a blob file is read before the pack; the pack is read in a few queries. A name that
        :meth:`get` would refuse (missing, corrupted) is left out, so a caller that needs it calls :meth:`get`
        for the error.

        Raises:
            InputError: a name is not a bare hex digest.
        """
        for sha in names:
            check_sha256(sha)
        try:
            folders = set(os.listdir(self.root))
        except OSError:
            folders = set()
        filed = {sha for sha in names if sha[:2] in folders and os.path.isfile(os.path.join(self.root, sha[:2], sha))}
        try:
            packed = self.pack.get_many([sha for sha in names if sha not in filed])
        except sqlite3.Error:
            packed = {}
        found: dict[str, bytes] = {}
        for sha in names:
            data = packed.get(sha)
            if data is not None and sha256_hex(data) == sha:
                found[sha] = data
                continue
            try:
                found[sha] = self.get(sha)
            except (BlobNotFound, IntegrityError):
                continue
        return found

    def _packed(self, sha256: str) -> bytes:
        """The pack's bytes of a blob that has no file (:class:`BlobNotFound` when the pack lacks it too)."""
        try:
            data = self.pack.get(sha256)
        except sqlite3.Error as exc:
            raise BlobNotFound(sha256, f"{self.root} (unreadable pack: {exc})") from None
        if data is None:
            raise BlobNotFound(sha256, str(self.root))
        return data

    def get_range(self, sha256: str, start: int, end: int, *, verify: bool = True) -> bytes:
        """Return bytes ``[start, end)`` of a blob (byte offsets; ``end`` past the size is clamped).

        With ``verify`` (the default) the whole blob is re-hashed while the range is read, so a range
        of a corrupted blob is never returned.

        Raises:
            BlobNotFound: no such blob.
            IntegrityError: ``verify`` and the stored bytes no longer hash to ``sha256``.
            InputError: a bad name or range.
        """
        check_range(start, end)
        path = self.path(sha256)
        try:
            handle = path.open("rb")
        except FileNotFoundError:
            return self._packed_range(sha256, start, end, verify=verify)
        except OSError as exc:
            raise BlobNotFound(sha256, f"{self.root} (unreadable: {exc.strerror or exc})") from None
        with handle:
            if not verify:
                handle.seek(start)
                return handle.read(end - start)
            return self._read_verified_range(handle, path, sha256, start, end)

    def _packed_range(self, sha256: str, start: int, end: int, *, verify: bool) -> bytes:
        if verify:
            data = self._packed(sha256)
            if sha256_hex(data) != sha256:
                raise IntegrityError(f"blob {sha256} in {self.pack.path} does not hash to its name {sha256}")
            return data[start:end]
        try:
            part = self.pack.range(sha256, start, end)
        except sqlite3.Error as exc:
            raise BlobNotFound(sha256, f"{self.root} (unreadable pack: {exc})") from None
        if part is None:
            raise BlobNotFound(sha256, str(self.root))
        return part

    def _read_verified_range(self, handle: BinaryIO, path: Path, sha256: str, start: int, end: int) -> bytes:
        digest = hashlib.sha256()
        parts: list[bytes] = []
        offset = 0
        while chunk := handle.read(_CHUNK):
            digest.update(chunk)
            lo, hi = max(start - offset, 0), min(end - offset, len(chunk))
            if lo < hi:
                parts.append(chunk[lo:hi])
            offset += len(chunk)
        if digest.hexdigest() != sha256:
            raise IntegrityError(f"blob {path} does not hash to its name {sha256}")
        return b"".join(parts)

    def exists(self, sha256: str) -> bool:
        """Whether a blob named ``sha256`` is stored (as a file or in the pack)."""
        path = self.path(sha256)
        if path.is_file():
            return True
        try:
            return bool(self.pack.held([sha256]))
        except sqlite3.Error:
            return False

    def existing(self, names: Sequence[str]) -> set[str]:
        """The names of ``names`` that are stored (:meth:`exists` of many: one pack query per few hundred)."""
        for sha in names:
            check_sha256(sha)
        try:
            found = set(self.pack.held(names))
        except sqlite3.Error:
            found = set()
        return found | {sha for sha in names if sha not in found and self.path(sha).is_file()}

    def deferrable(self, names: Sequence[str]) -> set[str]:
        """The names of ``names`` whose bytes a later :meth:`get` will find in the pack: held there, no file in the way.

        One pack query per few hundred names and no read of the bytes, so a reader can leave those reads until
        it needs them (:func:`ctxledger.units.build_units`); :meth:`get` still re-hashes the bytes then. A name
        with a file (or anything else) at its path is not listed: a read finds that first, so it is read now.

        Raises:
            InputError: a name is not a bare hex digest.
        """
        for sha in names:
            check_sha256(sha)
        try:
            held = self.pack.held(names)
        except sqlite3.Error:
            return set()
        try:
            folders = set(os.listdir(self.root))
        except OSError:
            return set()
        return {sha for sha in held if sha[:2] not in folders or not _occupied(self.root / sha[:2] / sha)}

    def delete(self, sha256: str) -> None:
        """Remove a blob if present, file and pack (retention/GC only; callers check nothing live references it).

        Raises:
            StoreError: the pack could not be written (the blob may still be there).
        """
        self.path(sha256).unlink(missing_ok=True)
        try:
            self.pack.delete(sha256)
        except sqlite3.Error as exc:
            raise StoreError(f"cannot delete blob {sha256} from {self.pack.path}: {exc}") from exc

    def stored(self) -> Iterator[StoredBlob]:
        """Every stored blob with its size and write time, by sha256; stray ``.tmp`` files skipped.

        A blob held as a file and in the pack is listed once, with the later write time (the file's mtime or
        the pack's ``written_at``).
        """
        files = {blob.sha256: blob for blob in self._files()}
        packed = {sha: StoredBlob(sha, size, written) for sha, size, written in self.pack.listing()}
        for sha in sorted(files.keys() | packed.keys()):
            both = [b for b in (files.get(sha), packed.get(sha)) if b is not None]
            yield max(both, key=lambda b: b.written_at)

    def _files(self) -> Iterator[StoredBlob]:
        if not self.root.is_dir():
            return
        for folder in sorted(p for p in self.root.iterdir() if p.is_dir() and len(p.name) == 2):
            for path in sorted(folder.iterdir()):
                if not _SHA256.fullmatch(path.name):
                    continue
                try:
                    info = path.stat()
                except FileNotFoundError:
                    continue
                yield StoredBlob(path.name, info.st_size, datetime.fromtimestamp(info.st_mtime, UTC))


class ReadAhead:
    """A blob reader for names asked in about a known order, fetching them a block at a time.

    ``ReadAhead(blobs, names)(sha)`` returns ``blobs.get(sha)``. The names are cut into blocks of ``window``;
    the first ask of a name fetches its whole block with ``blobs.get_many`` (when the store has it), and the
    last two blocks fetched are kept, so a reader walking many small blobs in about this order makes a few
    queries instead of one per blob while holding at most ``2 × window`` blobs. A name not listed, or one the
    batch left out (missing, corrupted), is read with ``blobs.get``, which raises what it raises.

    Args:
        blobs: the blob store (``get``, optionally ``get_many``).
        names: the names in the order they will be asked (repeats allowed).
        window: names per block.
    """

    def __init__(self, blobs: Any, names: Sequence[str], window: int = 256) -> None:
        self._blobs = blobs
        self._many = getattr(blobs, "get_many", None)
        self._names = list(dict.fromkeys(names))
        self._block = {name: i // window for i, name in enumerate(self._names)}
        self._window = window
        self._held: dict[int, dict[str, bytes]] = {}

    def __call__(self, sha256: str) -> bytes:
        """The bytes named ``sha256`` (``BlobStore.get``'s errors)."""
        block = self._block.get(sha256)
        if block is None or self._many is None:
            return self._blobs.get(sha256)  # type: ignore[no-any-return]
        held = self._held.get(block)
        if held is None:
            start = block * self._window
            held = self._held[block] = self._many(self._names[start : start + self._window])
            while len(self._held) > 2:
                del self._held[next(iter(self._held))]
        found = held.get(sha256)
        return found if found is not None else self._blobs.get(sha256)  # type: ignore[no-any-return]
