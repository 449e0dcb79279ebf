"""The ASGI application: the ``/v1`` JSON API, ``/healthz``, ``/openapi.json`` and the ``/inspect`` pages.

``create_app(url)`` opens one :class:`~ctxledger.Ledger` for the process; ``ctxledger serve`` runs it with
uvicorn. Several processes (on several hosts) may serve one PostgreSQL store: records, blobs and inspector
sessions all live in the database. Errors are problem+json, except that an ``/inspect`` page a browser asks
for (``Accept: text/html``) gets an HTML error page.
"""

from __future__ import annotations

import json
import os
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from datetime import timedelta
from typing import Any

from fastapi import FastAPI, Request, Response
from fastapi.exceptions import RequestValidationError
from starlette.exceptions import HTTPException as StarletteHTTPException

from ctxledger import __version__
from ctxledger.errors import ConfigurationError, CtxledgerError
from ctxledger.ledger import Ledger
from ctxledger.service import api, inspector, retention
from ctxledger.service.body_limit import BodyLimit
from ctxledger.service.limits import DEFAULT_MAX_BODY_BYTES
from ctxledger.service.models import Problem
from ctxledger.service.problems import (
    MEDIA_TYPE,
    Unauthorized,
    ctxledger_exception,
    http_problem,
    unauthorized,
    validation_problem,
)
from ctxledger.service.state import Service
from ctxledger.store.sessions import DEFAULT_TTL

Handler = Callable[[Request, Exception], Awaitable[Response]]

PROBLEMS: dict[int | str, dict[str, Any]] = {
    status: {"model": Problem, "description": text, "content": {MEDIA_TYPE: {}}}
    for status, text in (
        (401, "No key, or a key that names no tenant"),
        (404, "No such id in the key's tenant (another tenant's ids answer the same)"),
        (409, "Conflict (usage already recorded)"),
        (422, "Invalid request; the problem names the field"),
    )
}
"""Problem answers every ``/v1`` route may give, as documented in the OpenAPI schema."""


def _negotiated(handler: Handler) -> Handler:
    """``handler``, answering an ``/inspect`` page a browser asked for with an HTML page instead of problem+json."""

    async def handle(request: Request, exc: Exception) -> Response:
        answer = await handler(request, exc)
        if not inspector.wants_html(request):
            return answer
        body = json.loads(bytes(answer.body))
        return inspector.error_page(request, answer.status_code, str(body["title"]), str(body["detail"]))

    return handle


def create_app(
    url: str | None = None,
    *,
    blobs: str | os.PathLike[str] | None = None,
    ledger: Ledger | None = None,
    session_ttl: timedelta = DEFAULT_TTL,
    max_body_bytes: int = DEFAULT_MAX_BODY_BYTES,
) -> FastAPI:
    """The service for the store at ``url`` (default ``CTXLEDGER_URL``, as the CLI), or for an open ``ledger``.

    Args:
        url: store URL (``sqlite:///…``, ``postgresql+psycopg://…``).
        blobs: where blobs live (see :func:`ctxledger.store.open_blobs`); default the store's own.
        ledger: an open ledger to serve instead of opening ``url`` (it is not closed on shutdown).
        session_ttl: how long an inspector login lasts (default 8 hours).
        max_body_bytes: the largest request body accepted, in bytes (default 32 MiB); a larger one is answered
            413 problem+json before it is read whole (:mod:`ctxledger.service.body_limit`).

    Raises:
        ConfigurationError, StoreConnectionError, MigrationError: the store cannot be opened (bad URL, no database
            reachable there, schema refused), or ``session_ttl`` is not positive.
    """
    if not isinstance(session_ttl, timedelta) or session_ttl <= timedelta(0):
        raise ConfigurationError(f"session_ttl must be a positive timedelta, got {session_ttl!r}")
    if isinstance(max_body_bytes, bool) or not isinstance(max_body_bytes, int) or max_body_bytes < 1:
        raise ConfigurationError(f"max_body_bytes must be a positive number of bytes, got {max_body_bytes!r}")
    own = ledger is None
    service = Service(ledger if ledger is not None else Ledger.open(url, blobs_dir=blobs))

    @asynccontextmanager
    async def lifespan(_app: FastAPI) -> AsyncIterator[None]:
        yield
        if own:
            service.ledger.close()

    app = FastAPI(
        title="ctxledger",
        version=__version__,
        summary="Policy-governed context assembly: append history, assemble budgeted contexts, explain them.",
        description="Every /v1 route needs `Authorization: Bearer <key>` (`ctxledger keys create --tenant T`); "
        "the tenant comes from the key. Errors are application/problem+json naming the field at fault.",
        lifespan=lifespan,
        responses=PROBLEMS,
    )
    app.state.service = service
    app.state.session_ttl = session_ttl
    app.add_exception_handler(RequestValidationError, _negotiated(validation_problem))
    app.add_exception_handler(StarletteHTTPException, _negotiated(http_problem))
    app.add_exception_handler(CtxledgerError, _negotiated(ctxledger_exception))
    app.add_exception_handler(Unauthorized, _negotiated(unauthorized))

    @app.get("/healthz", summary="Liveness", responses={})
    def healthz() -> dict[str, str]:
        """``{"status": "ok"}`` while the process serves."""
        return {"status": "ok"}

    app.add_middleware(BodyLimit, max_bytes=max_body_bytes)
    app.include_router(api.router)
    app.include_router(retention.router)
    app.include_router(inspector.router)
    return app
