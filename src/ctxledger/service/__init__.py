"""The ctxledger HTTP service (``pip install 'ctxledger[serve]'``; run it with ``ctxledger serve``).

:func:`create_app` builds the ASGI application: the JSON API under ``/v1`` (append messages, import a
file, assemble, get and explain assemblies, rehydrate, record usage, list conversations and assemblies),
``/healthz``, the OpenAPI schema at ``/openapi.json`` and the web inspector at ``/inspect``.
"""

from __future__ import annotations

from ctxledger.service.app import create_app

__all__ = ["create_app"]
