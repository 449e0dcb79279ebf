"""A bound on the size of a request body, so one request cannot hold the server's memory.

:class:`BodyLimit` is ASGI middleware: a request whose ``Content-Length`` exceeds the bound is answered 413 before
any of its body is read; a body sent without a length (chunked) is counted as it arrives and refused the moment it
exceeds the bound. Either way the answer is problem+json (RFC 9457) naming the bound, like every other error.
"""

from __future__ import annotations

from typing import Any

from starlette.exceptions import HTTPException
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from ctxledger.service.limits import DEFAULT_MAX_BODY_BYTES
from ctxledger.service.problems import problem


def too_large(limit: int) -> str:
    """The problem's detail for a body over ``limit`` bytes."""
    return f"request body over {limit:,} bytes (the server's --max-body-mb); send less per request"


class BodyLimit:
    """ASGI middleware refusing request bodies over ``max_bytes`` with 413.

    Args:
        app: the application it wraps.
        max_bytes: the largest body accepted, in bytes (> 0).
    """

    def __init__(self, app: ASGIApp, max_bytes: int = DEFAULT_MAX_BODY_BYTES) -> None:
        self.app = app
        self.max_bytes = max_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Pass the request on with its body counted; answer 413 instead when it is too large."""
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        declared = _content_length(scope)
        if declared is not None and declared > self.max_bytes:
            await problem(413, "body-too-large", "Request body too large", too_large(self.max_bytes))(
                scope, receive, send
            )
            return
        seen = 0

        async def counted() -> Message:
            nonlocal seen
            message = await receive()
            if message["type"] == "http.request":
                seen += len(message.get("body", b""))
                if seen > self.max_bytes:
                    raise HTTPException(413, too_large(self.max_bytes))
            return message

        await self.app(scope, counted, send)


def _content_length(scope: Scope) -> int | None:
    """The request's ``Content-Length`` in bytes, or ``None`` when absent or not a number (the server refuses it)."""
    headers: Any = scope.get("headers") or ()
    for name, value in headers:
        if name == b"content-length":
            text = value.decode("latin-1").strip()
            return int(text) if text.isdigit() else None
    return None
