"""Service API keys: create one for a tenant, resolve a presented key to its tenant, revoke.

A key looks like ``ctxl_<id>_<secret>`` (the id is 12 hex characters, the secret 43 URL-safe base64
characters: 256 bits from :func:`secrets.token_urlsafe`). Only the sha256 of the whole key is stored
(``api_keys.key_sha256``), with its tenant: the key is shown once, when it is created, and cannot be
read back. A presented key is looked up by its hash; the tenant of every request comes from that row,
never from the request.
"""

from __future__ import annotations

import hashlib
import re
import secrets
from dataclasses import dataclass
from datetime import UTC, datetime

from sqlalchemy import delete, inspect, select, update
from sqlalchemy.engine import Connection, Engine

from ctxledger.errors import ConfigurationError, InputError, RecordNotFound
from ctxledger.store.schema import api_keys, inspector_sessions

PREFIX = "ctxl_"
"""Every key starts with this, so leaked keys are easy to find with secret scanners."""

NEEDS_SQL = "API keys and sessions need a SQL store (sqlite:///… or postgresql://…)"
"""Why a store without a database (``memory://``) cannot keep keys."""

_KEY = re.compile(r"ctxl_([0-9a-f]{12})_[A-Za-z0-9_-]{43}")
_TENANT = re.compile(r"[A-Za-z0-9][A-Za-z0-9._:@-]{0,127}")


@dataclass(frozen=True, slots=True)
class ApiKey:
    """A stored key, without its secret: id, tenant, optional name, creation and revocation times (ISO UTC)."""

    id: str
    tenant_id: str
    name: str | None
    created_at: str
    revoked_at: str | None = None


def sql_engine(store: object) -> Engine:
    """The SQLAlchemy engine of a SQL store (keys and inspector sessions live in its database).

    Raises:
        ConfigurationError: ``store`` is not a SQL store.
    """
    engine = getattr(store, "engine", None)
    if engine is None:
        raise ConfigurationError(NEEDS_SQL)
    return engine


def key_hash(key: str) -> str:
    """The sha256 (hex) under which ``key`` is stored."""
    return hashlib.sha256(key.encode("utf-8")).hexdigest()


def check_tenant(tenant_id: str) -> str:
    """Return ``tenant_id`` if it is 1-128 characters of letters, digits and ``._:@-`` (not starting with one).

    Raises:
        InputError: anything else (names the field ``tenant``).
    """
    if not isinstance(tenant_id, str) or not _TENANT.fullmatch(tenant_id):
        raise InputError(
            f"a tenant id is 1-128 letters, digits or ._:@- starting with a letter or digit, got {tenant_id!r}",
            source="<keys>",
            field="tenant",
        )
    return tenant_id


def create_key(store: object, tenant_id: str, name: str | None = None) -> tuple[str, ApiKey]:
    """Create a key for ``tenant_id``; return the key itself (shown once) and its stored row.

    Raises:
        InputError: a malformed tenant id.
        ConfigurationError: ``store`` is not a SQL store.
    """
    check_tenant(tenant_id)
    key_id = secrets.token_hex(6)
    key = f"{PREFIX}{key_id}_{secrets.token_urlsafe(32)}"
    row = ApiKey(key_id, tenant_id, name, datetime.now(UTC).isoformat(timespec="microseconds"))
    with sql_engine(store).begin() as conn:
        conn.execute(
            api_keys.insert().values(
                id=row.id, tenant_id=tenant_id, key_sha256=key_hash(key), name=name, created_at=row.created_at
            )
        )
    return key, row


def find_key(store: object, key: str) -> ApiKey | None:
    """The stored row of a presented key, or ``None`` for a malformed, unknown or revoked key."""
    if not isinstance(key, str) or not _KEY.fullmatch(key):
        return None
    with sql_engine(store).connect() as conn:
        row = conn.execute(select(api_keys).where(api_keys.c.key_sha256 == key_hash(key))).first()
    if row is None or row.revoked_at is not None:
        return None
    return ApiKey(row.id, row.tenant_id, row.name, row.created_at, row.revoked_at)


def tenant_for_key(store: object, key: str) -> str | None:
    """The tenant of a presented key, or ``None`` for a malformed, unknown or revoked key."""
    found = find_key(store, key)
    return None if found is None else found.tenant_id


def list_keys(store: object, tenant_id: str | None = None) -> list[ApiKey]:
    """Stored keys (never their secrets), oldest first; only ``tenant_id``'s when given."""
    with sql_engine(store).connect() as conn:
        return _rows(conn, tenant_id)


def stored_keys(url: str, tenant_id: str | None = None) -> list[ApiKey] | None:
    """The keys stored in the database at ``url``, read without creating, migrating or writing anything.

    Unlike opening the store (which migrates it), this is for a listing that must leave an empty database empty.

    Returns:
        The keys as :func:`list_keys` gives them, or ``None`` when the database has no API key table yet (no
        ctxledger schema, or one from before keys), or ``url`` names a SQLite file that does not exist.

    Raises:
        ConfigurationError: ``url`` names no SQL store (``memory://`` keeps no keys) or is malformed.
        StoreConnectionError: the database cannot be reached.
    """
    from ctxledger.store import _engine, missing_sqlite_file
    from ctxledger.store._migrate import connect

    if url.split(":", 1)[0].lower() == "memory":
        raise ConfigurationError(NEEDS_SQL)
    if missing_sqlite_file(url) is not None:
        return None
    engine, _blobs = _engine(url)
    try:
        with connect(engine) as conn:
            return _rows(conn, tenant_id) if inspect(conn).has_table(api_keys.name) else None
    finally:
        engine.dispose()


def _rows(conn: Connection, tenant_id: str | None) -> list[ApiKey]:
    stmt = select(api_keys).order_by(api_keys.c.created_at, api_keys.c.id)
    if tenant_id is not None:
        stmt = stmt.where(api_keys.c.tenant_id == tenant_id)
    return [ApiKey(r.id, r.tenant_id, r.name, r.created_at, r.revoked_at) for r in conn.execute(stmt).all()]


def revoke_key(store: object, key_id: str) -> None:
    """Revoke the key with id ``key_id``; requests with it answer 401 from then on.

    The inspector sessions opened with the key are deleted in the same transaction.

    Raises:
        RecordNotFound: no such key (or it is already revoked).
    """
    now = datetime.now(UTC).isoformat(timespec="microseconds")
    with sql_engine(store).begin() as conn:
        done = conn.execute(
            update(api_keys).where(api_keys.c.id == key_id, api_keys.c.revoked_at.is_(None)).values(revoked_at=now)
        ).rowcount
        conn.execute(delete(inspector_sessions).where(inspector_sessions.c.key_id == key_id))
    if not done:
        raise RecordNotFound("*", key_id, what="active API key")
