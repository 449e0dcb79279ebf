"""Who is asking: the tenant of the request's API key (``Authorization: Bearer``) or of its session cookie.

The tenant always comes from the key (:func:`ctxledger.store.keys.tenant_for_key`), never from the body or
the path. A browser may log in once at ``/inspect/login`` with its key; the service then opens a server-side
session (:mod:`ctxledger.store.sessions`: a random token whose sha256 is stored with the key's tenant and an
expiry) and sets the :data:`SESSION_COOKIE` to the token, never to the key (``HttpOnly``, ``SameSite=Strict``,
``Secure`` when served over https). A Bearer header wins over the cookie. No key, or a key or session that
names no tenant (unknown, revoked, expired, logged out, malformed): 401.
"""

from __future__ import annotations

from fastapi import Request

from ctxledger.service.problems import Unauthorized
from ctxledger.store.keys import tenant_for_key
from ctxledger.store.sessions import session_tenant

SESSION_COOKIE = "ctxledger_session"
"""Cookie the inspector's login sets (it holds the session token)."""


def bearer_key(request: Request) -> str | None:
    """The Bearer token of the request's ``Authorization`` header, else ``None``."""
    header = request.headers.get("authorization", "")
    scheme, _, token = header.partition(" ")
    if scheme.lower() == "bearer" and token.strip():
        return token.strip()
    return None


def presented_tenant(request: Request) -> tuple[str | None, bool]:
    """``(tenant or None, whether the request presented a key or a session at all)``."""
    store = request.app.state.service.ledger.store
    key = bearer_key(request)
    if key is not None:
        return tenant_for_key(store, key), True
    token = request.cookies.get(SESSION_COOKIE)
    if token:
        return session_tenant(store, token), True
    return None, False


def request_tenant(request: Request) -> str:
    """The tenant of the request's key or session.

    Raises:
        Unauthorized: no key, or one (or a session) that names no tenant.
    """
    tenant, presented = presented_tenant(request)
    if not presented:
        raise Unauthorized("send Authorization: Bearer <key> (create one with: ctxledger keys create --tenant T)")
    if tenant is None:
        raise Unauthorized("the key is unknown or revoked, or the session ended")
    return tenant
