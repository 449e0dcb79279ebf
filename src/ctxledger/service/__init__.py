"""The ctxledger HTTP service (``pip install 'ctxledger[serve]'``; run it with ``ctxledger serve``).

:func:`create_app` builds the ASGI application: the JSON API under ``/v1`` (append messages, import a
file, assemble, get and explain assemblies, rehydrate, record usage, list conversations and assemblies),
``/healthz``, the OpenAPI schema at ``/openapi.json`` and the web inspector at ``/inspect``.

``create_app`` is imported when first used, so the modules the MCP server shares with the service
(``manifest_view``, ``withheld``) import without the ``serve`` extra.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ctxledger.service.app import create_app

__all__ = ["create_app"]


def __getattr__(name: str) -> Any:
    """``create_app``, imported on first use (it needs FastAPI)."""
    if name == "create_app":
        from ctxledger.service.app import create_app

        return create_app
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
