"""The ASGI application: the ``/v1`` JSON API, ``/healthz``, ``/openapi.json`` and the ``/inspect`` pages.

``create_app(url)`` opens one :class:`~ctxledger.Ledger` for the process; ``ctxledger serve`` runs it with
uvicorn. Several processes (on several hosts) may serve one PostgreSQL store: records and blobs both live
in the database.
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from fastapi import FastAPI
from fastapi.exceptions import RequestValidationError
from starlette.exceptions import HTTPException as StarletteHTTPException

from ctxledger import __version__
from ctxledger.errors import CtxledgerError
from ctxledger.ledger import Ledger
from ctxledger.service import api, inspector
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


def create_app(
    url: str | None = None, *, blobs: str | os.PathLike[str] | None = None, ledger: Ledger | None = None
) -> FastAPI:
    """The service for the store at ``url`` (default ``CTXLEDGER_URL``, as the CLI), or for an open ``ledger``.

    Args:
        url: store URL (``sqlite:///…``, ``postgresql+psycopg://…``).
        blobs: where blobs live (see :func:`ctxledger.store.open_blobs`); default the store's own.
        ledger: an open ledger to serve instead of opening ``url`` (it is not closed on shutdown).

    Raises:
        ConfigurationError, MigrationError: the store cannot be opened.
    """
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
    app.add_exception_handler(RequestValidationError, validation_problem)
    app.add_exception_handler(StarletteHTTPException, http_problem)
    app.add_exception_handler(CtxledgerError, ctxledger_exception)
    app.add_exception_handler(Unauthorized, unauthorized)

    @app.get("/healthz", summary="Liveness", responses={})
    def healthz() -> dict[str, str]:
        """``{"status": "ok"}`` while the process serves."""
        return {"status": "ok"}

    app.include_router(api.router)
    app.include_router(inspector.router)
    return app
