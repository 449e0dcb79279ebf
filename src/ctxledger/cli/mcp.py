"""``ctxledger mcp``: the read-only MCP server over stdio (extra ``mcp``)."""

from __future__ import annotations

from typing import Annotated

import typer

from ctxledger.cli._app import app
from ctxledger.cli._common import _handled, _open, _settings
from ctxledger.errors import ConfigurationError

MCP_HINT = "ctxledger mcp needs the mcp extra: pip install 'ctxledger[mcp]'"


@app.command()
def mcp(
    ctx: typer.Context,
    key: Annotated[
        str | None,
        typer.Option(
            "--key",
            envvar="CTXLEDGER_KEY",
            help="An API key: its tenant is the server's (else --tenant).",
            show_default=False,
        ),
    ] = None,
    participant: Annotated[
        str | None,
        typer.Option(
            "--participant",
            help="The participant the answers are for (id or name); without it no private or shared state.",
            show_default=False,
        ),
    ] = None,
    provider: Annotated[
        str | None,
        typer.Option(
            "--provider",
            help="The provider the answers go to (privacy classes, provider scopes); default that of openai-chat.",
            show_default=False,
        ),
    ] = None,
) -> None:
    """Serve read-only MCP tools over stdio: explain, rehydrate, search_history, last_assembly.

    The tenant is fixed at start: the tenant of --key (env CTXLEDGER_KEY) if given, else --tenant; so is
    the reader (--participant, --provider). Search and rehydration show nothing an assembly for that
    reader would withhold (another branch, another participant's private state, a privacy class or
    provider scope the provider may not receive, secrets); secrets in what is shown are redacted.

    Example: [bold]ctxledger --db sqlite:///agent.db mcp --key ctxl_…[/bold]
    """
    settings = _settings(ctx)
    with _handled():
        try:
            from ctxledger.mcp_server import build_server
        except ModuleNotFoundError as exc:
            raise ConfigurationError(f"{MCP_HINT} (missing module {exc.name!r})") from None
        with _open(settings) as ledger:
            tenant = settings.tenant
            if key is not None:
                from ctxledger.store.keys import tenant_for_key

                found = tenant_for_key(ledger.store, key)
                if found is None:
                    raise ConfigurationError("the --key is unknown or revoked")
                tenant = found
            from ctxledger.service.withheld import Reader

            build_server(ledger, tenant, Reader(participant, provider)).run("stdio")
