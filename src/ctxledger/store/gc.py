"""Blob garbage collection: remove blobs that no record references, after a grace period.

An import puts its blobs first and appends the records that reference them afterwards, in one
transaction (:func:`ctxledger.ingest.write_batch`); an import killed in between leaves orphan blobs
behind. :func:`collect_garbage` removes a blob only when

* no record of any tenant references it (``records.blob_sha256``, an indexed column, or a kept raw output named in
  a record's ``meta``: :func:`referenced_in`), and
* it was written longer than ``grace`` ago, so the blobs of an import still running, whose records
  are not yet committed, are never taken.

The referenced set is read *after* the stored blobs are listed, so a blob whose record commits while
the collector runs is seen as referenced. It is the library function behind ``ctxledger gc`` and what
retention calls to drop blobs after it deletes records.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from sqlalchemy import select
from sqlalchemy.engine import Connection

from ctxledger.errors import ConfigurationError
from ctxledger.records import RAW_OUTPUT_META, is_bare_sha256
from ctxledger.store.blobs import StoredBlob
from ctxledger.store.schema import records

DEFAULT_GRACE = timedelta(hours=1)
"""Blobs younger than this are kept even when nothing references them (an import may be running)."""

_CHUNK = 500


@dataclass(frozen=True, slots=True)
class GcReport:
    """What :func:`collect_garbage` found and did (sizes in bytes).

    Attributes:
        stored: blobs in the blob store.
        referenced: of them, those a record references.
        young: unreferenced blobs kept because they are younger than the grace period.
        removed: sha256 of the unreferenced blobs removed (or, on a dry run, that would be).
        removed_bytes: their total size.
        dry_run: nothing was removed.
    """

    stored: int
    referenced: int
    young: int
    removed: list[str] = field(default_factory=list)
    removed_bytes: int = 0
    dry_run: bool = False


def referenced_blobs(store: Any, candidates: Iterable[str]) -> set[str]:
    """Those of ``candidates`` (sha256) that a record of any tenant references.

    Raises:
        ConfigurationError: the store has no SQL engine (``memory://``).
    """
    engine = getattr(store, "engine", None)
    if engine is None:
        raise ConfigurationError("blob garbage collection needs a SQL store (sqlite:///… or postgresql://…)")
    with engine.connect() as conn:
        return referenced_in(conn, candidates)


def referenced_in(conn: Connection, candidates: Iterable[str]) -> set[str]:
    """:func:`referenced_blobs` on an open connection (inside a transaction, it sees that transaction's rows).

    A record references its artifact's bytes (the indexed ``records.blob_sha256``) and the raw output an importer
    kept beside it (``meta["raw_output_sha256"]``, :func:`ctxledger.records.blob_references`), found by one scan
    of the bodies that name one.
    """
    names = sorted(set(candidates))
    live: set[str] = set()
    for start in range(0, len(names), _CHUNK):
        chunk = names[start : start + _CHUNK]
        live.update(conn.scalars(select(records.c.blob_sha256).where(records.c.blob_sha256.in_(chunk)).distinct()))
    if len(live) < len(names):
        live.update(set(names) & kept_raw_outputs(conn))
    return live


def kept_raw_outputs(conn: Connection, tenant_id: str | None = None) -> set[str]:
    """Every blob a record's ``meta`` names as its kept raw output (optionally one tenant's records)."""
    stmt = select(records.c.body).where(records.c.body.like(f"%{RAW_OUTPUT_META}%"))
    if tenant_id is not None:
        stmt = stmt.where(records.c.tenant_id == tenant_id)
    found: set[str] = set()
    for body in conn.scalars(stmt):
        meta = json.loads(body).get("meta")
        raw = meta.get(RAW_OUTPUT_META) if isinstance(meta, dict) else None
        if is_bare_sha256(raw):
            found.add(raw)
    return found


def collect_garbage(
    store: Any,
    *,
    grace: timedelta = DEFAULT_GRACE,
    now: datetime | None = None,
    dry_run: bool = False,
    on_progress: Callable[[int, int], None] | None = None,
) -> GcReport:
    """Remove the blobs of ``store`` that no record references and that are older than ``grace``.

    Args:
        store: an open SQL :class:`~ctxledger.store.base.GraphStore` whose blob store can list its blobs
            (a folder or the database).
        grace: minimum age of a blob that may be removed (default :data:`DEFAULT_GRACE`, one hour).
        now: the clock (aware UTC; default the current time).
        dry_run: only report what would be removed.
        on_progress: called with ``(done, total)`` as blobs are removed.

    Returns:
        A :class:`GcReport`.

    Raises:
        ConfigurationError: a negative grace, a non-SQL store, or a blob store that cannot list its blobs.
    """
    if grace < timedelta(0):
        raise ConfigurationError(f"the grace period must be >= 0, got {grace}")
    listing = getattr(store.blobs, "stored", None)
    if listing is None:
        raise ConfigurationError(f"blob store {store.blobs!r} cannot list its blobs for garbage collection")
    moment = now or datetime.now(UTC)
    blobs: list[StoredBlob] = list(listing())
    live = referenced_blobs(store, (b.sha256 for b in blobs))
    orphans = [b for b in blobs if b.sha256 not in live]
    old = [b for b in orphans if moment - b.written_at >= grace]
    if not dry_run:
        for i, blob in enumerate(old, 1):
            store.blobs.delete(blob.sha256)
            if on_progress is not None:
                on_progress(i, len(old))
    return GcReport(
        stored=len(blobs),
        referenced=len(blobs) - len(orphans),
        young=len(orphans) - len(old),
        removed=[b.sha256 for b in old],
        removed_bytes=sum(b.size_bytes for b in old),
        dry_run=dry_run,
    )
