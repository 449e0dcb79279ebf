"""``ctxledger serve``: the HTTP service and the web inspector (extra ``serve``)."""

from __future__ import annotations

import errno
import socket
from datetime import timedelta
from typing import Annotated

import typer

from ctxledger.cli._app import app
from ctxledger.cli._common import _err, _handled, _require_store, _settings
from ctxledger.cli._escape import escape
from ctxledger.cli._numbers import float_option, int_option
from ctxledger.errors import ConfigurationError
from ctxledger.service.limits import DEFAULT_MAX_BODY_BYTES

SERVE_HINT = "ctxledger serve needs the serve extra: pip install 'ctxledger[serve]'"
BACKLOG = 2048
"""Connections the listening socket queues before the server accepts them (uvicorn's own default)."""


@app.command()
def serve(
    ctx: typer.Context,
    host: Annotated[str, typer.Option("--host", help="Address to listen on (0.0.0.0: every interface).")] = "127.0.0.1",
    port: Annotated[int, int_option("--port", minimum=0, maximum=65535, help="TCP port (0: any free one).")] = 8321,
    log_level: Annotated[str, typer.Option("--log-level", help="uvicorn log level.")] = "info",
    session_hours: Annotated[
        float,
        float_option(
            "--session-hours", unit="hours", minimum=0.01, help="How long an inspector login lasts, in hours."
        ),
    ] = 8.0,
    max_body_mb: Annotated[
        float,
        float_option(
            "--max-body-mb",
            unit="MiB",
            minimum=0.001,
            help="The largest request body accepted, in MiB; a larger one is answered 413 before it is read whole.",
        ),
    ] = DEFAULT_MAX_BODY_BYTES / 2**20,
) -> None:
    """Serve the JSON API (/v1), its OpenAPI schema (/openapi.json), /healthz and the web inspector (/inspect).

    Every /v1 request sends [bold]Authorization: Bearer <key>[/bold] (create one with
    [bold]ctxledger keys create --tenant T[/bold]); the tenant comes from the key. A browser logs in to
    /inspect with the key once and keeps a server-side session for --session-hours. Several processes or
    hosts can serve one PostgreSQL store (--db): records, blobs and sessions all live in the database.

    Example: [bold]ctxledger serve --db postgresql+psycopg://postgres@127.0.0.1/test --port 8321[/bold]
    """
    settings = _settings(ctx)
    with _handled():
        _require_store(settings)
        try:
            import uvicorn

            from ctxledger.service import create_app
            from ctxledger.service.access_log import install as install_log_filter
        except ModuleNotFoundError as exc:
            raise ConfigurationError(f"{SERVE_HINT} (missing module {exc.name!r})") from None
        listening = listen(host, port)
    with listening:
        with _handled():
            application = create_app(
                settings.db,
                blobs=settings.blobs,
                session_ttl=timedelta(hours=session_hours),
                max_body_bytes=max(1, int(max_body_mb * 2**20)),
            )
        bound = listening.getsockname()[1]
        where = f"http://{f'[{host}]' if ':' in host else host}:{bound}"
        _err().print(f"serving {escape(settings.db)} on {where} (inspector: /inspect)", soft_wrap=True)
        config = uvicorn.Config(application, host=host, port=bound, log_level=log_level)
        install_log_filter()  # after uvicorn configured its loggers
        uvicorn.Server(config).run(sockets=[listening])


def listen(host: str, port: int) -> socket.socket:
    """A socket bound to ``host:port`` and listening, for the server to serve on (``port`` 0: any free one).

    The server is handed this socket rather than binding again, so the port printed is the one served on
    (``getsockname()``) and no other process can take it in between.

    Raises:
        ConfigurationError: ``host`` is no address of this machine (names --host), or ``port`` is taken or not
            allowed (names --port).
    """
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    except socket.gaierror as exc:
        raise ConfigurationError(f"--host {host}: not an address ({exc.strerror})") from None
    family, kind, proto, _name, address = infos[0]
    sock = socket.socket(family, kind, proto)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as uvicorn binds
        sock.bind(address)
        sock.listen(BACKLOG)
    except OSError as exc:
        sock.close()
        if exc.errno == errno.EADDRNOTAVAIL:
            raise ConfigurationError(f"--host {host}: not an address of this machine") from None
        fix = "choose another --port (0: any free one)"
        if exc.errno == errno.EADDRINUSE:
            raise ConfigurationError(f"--port {port}: {host}:{port} is already in use; {fix}") from None
        raise ConfigurationError(f"--port {port}: cannot listen on {host}:{port} ({exc.strerror}); {fix}") from None
    return sock
