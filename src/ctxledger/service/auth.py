"""Who is asking: the tenant of the request's API key (``Authorization: Bearer``) or of its session cookie.

The tenant always comes from the key (:func:`ctxledger.store.keys.tenant_for_key`), never from the body or
the path. A browser may log in once at ``/inspect/login`` with its key; the service then sets the
:data:`SESSION_COOKIE` (``HttpOnly``, ``SameSite=Strict``), which carries the key and is checked the same
way on every request. No key, or a key that names no tenant (unknown, revoked, malformed): 401.
"""

from __future__ import annotations

from fastapi import Request

from ctxledger.service.problems import Unauthorized
from ctxledger.store.keys import tenant_for_key

SESSION_COOKIE = "ctxledger_session"
"""Cookie the inspector's login sets."""


def presented_key(request: Request) -> str | None:
    """The key of the request: the Bearer token, else the session cookie, else ``None``."""
    header = request.headers.get("authorization", "")
    scheme, _, token = header.partition(" ")
    if scheme.lower() == "bearer" and token.strip():
        return token.strip()
    return request.cookies.get(SESSION_COOKIE) or None


def request_tenant(request: Request) -> str:
    """The tenant of the request's key.

    Raises:
        Unauthorized: no key, or one that names no tenant.
    """
    key = presented_key(request)
    if key is None:
        raise Unauthorized("send Authorization: Bearer <key> (create one with: ctxledger keys create --tenant T)")
    tenant = tenant_for_key(request.app.state.service.ledger.store, key)
    if tenant is None:
        raise Unauthorized("the key is unknown or revoked")
    return tenant
