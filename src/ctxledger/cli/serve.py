"""``ctxledger serve``: the HTTP service and the web inspector (extra ``serve``)."""

from __future__ import annotations

from datetime import timedelta
from typing import Annotated

import typer
from rich.markup import escape

from ctxledger.cli._app import app
from ctxledger.cli._common import _err, _handled, _settings
from ctxledger.errors import ConfigurationError

SERVE_HINT = "ctxledger serve needs the serve extra: pip install 'ctxledger[serve]'"


@app.command()
def serve(
    ctx: typer.Context,
    host: Annotated[str, typer.Option("--host", help="Address to listen on (0.0.0.0: every interface).")] = "127.0.0.1",
    port: Annotated[int, typer.Option("--port", min=0, max=65535, help="TCP port (0: any free one).")] = 8321,
    log_level: Annotated[str, typer.Option("--log-level", help="uvicorn log level.")] = "info",
    session_hours: Annotated[
        float, typer.Option("--session-hours", min=0.01, help="How long an inspector login lasts, in hours.")
    ] = 8.0,
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
        try:
            import uvicorn

            from ctxledger.service import create_app
        except ModuleNotFoundError as exc:
            raise ConfigurationError(f"{SERVE_HINT} (missing module {exc.name!r})") from None
        application = create_app(settings.db, blobs=settings.blobs, session_ttl=timedelta(hours=session_hours))
    _err().print(f"serving {escape(settings.db)} on http://{host}:{port} (inspector: /inspect)", soft_wrap=True)
    uvicorn.run(application, host=host, port=port, log_level=log_level)
