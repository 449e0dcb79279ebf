"""Server-side sessions of the web inspector: a browser logs in once with an API key and keeps a token.

A session token is 43 URL-safe base64 characters (256 bits from :func:`secrets.token_urlsafe`), prefixed
``ctxs_``; it is not the key and says nothing about it. Only its sha256 is stored
(``inspector_sessions.token_sha256``), with the tenant and id of the key it was opened with and an expiry,
so every service process on one store accepts it, and a stolen database row cannot be replayed as a cookie.
A session ends when it expires, when it is deleted (:func:`end_session`, the inspector's logout) and when
its key is revoked (:func:`ctxledger.store.keys.revoke_key` deletes its rows; a session of a revoked key is
refused even before that). Sessions need a SQL store (SQLite or PostgreSQL), as keys do.
"""

from __future__ import annotations

import hashlib
import re
import secrets
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from sqlalchemy import delete, select

from ctxledger.errors import ConfigurationError
from ctxledger.store.keys import find_key, sql_engine
from ctxledger.store.schema import api_keys, inspector_sessions

PREFIX = "ctxs_"
"""Every session token starts with this (a key starts with ``ctxl_``)."""

DEFAULT_TTL = timedelta(hours=8)
"""How long a session lasts after login."""

_TOKEN = re.compile(r"ctxs_[A-Za-z0-9_-]{43}")


@dataclass(frozen=True, slots=True)
class Session:
    """A stored session, without its token: the tenant, the key's id, creation and expiry times (ISO UTC)."""

    tenant_id: str
    key_id: str
    created_at: str
    expires_at: str


def _stamp(at: datetime) -> str:
    return at.astimezone(UTC).isoformat(timespec="microseconds")


def token_hash(token: str) -> str:
    """The sha256 (hex) under which a session token is stored."""
    return hashlib.sha256(token.encode("utf-8")).hexdigest()


def open_session(
    store: object, key: str, *, ttl: timedelta = DEFAULT_TTL, now: datetime | None = None
) -> tuple[str, Session] | None:
    """Open a session for a presented API key; return the token (for the cookie only) and the stored row.

    Sessions that expired before ``now`` are deleted on the way.

    Args:
        store: a SQL store.
        key: the API key the person logged in with.
        ttl: how long the session lasts (a positive timedelta).
        now: the current time (aware; default the clock).

    Returns:
        ``(token, session)``, or ``None`` when the key is malformed, unknown or revoked.

    Raises:
        ConfigurationError: ``store`` is not a SQL store, or ``ttl`` is not positive.
    """
    if not isinstance(ttl, timedelta) or ttl <= timedelta(0):
        raise ConfigurationError(f"a session's lifetime must be a positive timedelta, got {ttl!r}")
    found = find_key(store, key)
    if found is None:
        return None
    at = now or datetime.now(UTC)
    token = f"{PREFIX}{secrets.token_urlsafe(32)}"
    row = Session(found.tenant_id, found.id, _stamp(at), _stamp(at + ttl))
    with sql_engine(store).begin() as conn:
        conn.execute(delete(inspector_sessions).where(inspector_sessions.c.expires_at <= _stamp(at)))
        conn.execute(
            inspector_sessions.insert().values(
                token_sha256=token_hash(token),
                tenant_id=row.tenant_id,
                key_id=row.key_id,
                created_at=row.created_at,
                expires_at=row.expires_at,
            )
        )
    return token, row


def session_tenant(store: object, token: str, *, now: datetime | None = None) -> str | None:
    """The tenant of a presented session token, or ``None``: malformed, unknown, expired, or its key revoked."""
    if not isinstance(token, str) or not _TOKEN.fullmatch(token):
        return None
    s, k = inspector_sessions.c, api_keys.c
    stmt = (
        select(s.tenant_id)
        .join(api_keys, k.id == s.key_id)
        .where(s.token_sha256 == token_hash(token), s.expires_at > _stamp(now or datetime.now(UTC)))
        .where(k.revoked_at.is_(None), k.tenant_id == s.tenant_id)
    )
    with sql_engine(store).connect() as conn:
        tenant = conn.execute(stmt).scalar()
    return None if tenant is None else str(tenant)


def end_session(store: object, token: str) -> bool:
    """Delete the session of ``token``; ``False`` when there was none (or the token is malformed)."""
    if not isinstance(token, str) or not _TOKEN.fullmatch(token):
        return False
    with sql_engine(store).begin() as conn:
        done = conn.execute(delete(inspector_sessions).where(inspector_sessions.c.token_sha256 == token_hash(token)))
    return bool(done.rowcount)


def sessions_of_key(store: object, key_id: str) -> list[Session]:
    """The sessions opened with key ``key_id`` (expired ones too, until the next login deletes them), oldest first."""
    stmt = (
        select(inspector_sessions)
        .where(inspector_sessions.c.key_id == key_id)
        .order_by(inspector_sessions.c.created_at)
    )
    with sql_engine(store).connect() as conn:
        rows = conn.execute(stmt).all()
    return [Session(r.tenant_id, r.key_id, r.created_at, r.expires_at) for r in rows]
