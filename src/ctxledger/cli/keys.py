"""``ctxledger keys``: API keys of the service (a key names its tenant; only its hash is stored)."""

from __future__ import annotations

from typing import Annotated

import typer
from rich.table import Table

from ctxledger.cli._app import app
from ctxledger.cli._common import _err, _handled, _open, _out, _require_store, _settings
from ctxledger.cli._escape import escape
from ctxledger.errors import InputError, RecordNotFound

keys_app = typer.Typer(
    help=(
        "API keys for the HTTP service and the MCP server (ctxledger serve, ctxledger mcp). A key names its "
        "tenant; only its sha256 is stored, so the key is printed once, when it is created.\n\n"
        "Example: [bold]ctxledger --db postgresql+psycopg://postgres@127.0.0.1/test keys create --tenant acme[/bold]"
    ),
    no_args_is_help=True,
    rich_markup_mode="rich",
)
app.add_typer(keys_app, name="keys")


@keys_app.command("create")
def create(
    ctx: typer.Context,
    name: Annotated[str | None, typer.Option("--name", help="A label to tell keys apart (e.g. ci, alice).")] = None,
) -> None:
    """Create a key for the tenant given with --tenant and print it once (stdout); keep it secret.

    Every request to the service sends it as [bold]Authorization: Bearer <key>[/bold]; the request's
    tenant comes from the key, never from the request.

    Example: [bold]ctxledger keys create --tenant acme --name ci[/bold]
    """
    from ctxledger.store.keys import create_key

    settings = _settings(ctx)
    with _handled(), _open(settings, create=True) as ledger:
        key, row = create_key(ledger.store, settings.tenant, name)
    typer.echo(key)
    _err().print(
        f"key [bold]{row.id}[/] for tenant [bold]{escape(row.tenant_id)}[/] created; it is shown only this once "
        "(only its sha256 is stored).",
        soft_wrap=True,
    )


@keys_app.command("list")
def list_(ctx: typer.Context) -> None:
    """List the tenant's keys (ids, names, dates; never the keys themselves).

    Listing only reads: a database without ctxledger's tables yet is left as it is (no keys).

    Example: [bold]ctxledger keys list --tenant acme[/bold]
    """
    from ctxledger.store.keys import stored_keys

    settings = _settings(ctx)
    with _handled():
        _require_store(settings)
        rows = stored_keys(settings.db, settings.tenant)
    if rows is None:
        _out().print(
            "no keys: the database holds no API key table yet (nothing was created; "
            "ctxledger keys create --tenant T makes it)",
            soft_wrap=True,
        )
        return
    table = Table(title=f"API keys of tenant {escape(settings.tenant)}", title_justify="left")
    for column in ("id", "name", "created", "revoked"):
        table.add_column(column)
    for r in rows:
        table.add_row(r.id, escape(r.name or ""), r.created_at, r.revoked_at or "")
    _out().print(
        table if rows else f"no keys for tenant {escape(settings.tenant)} (another tenant's: keys list --tenant T)"
    )


@keys_app.command("revoke")
def revoke(
    ctx: typer.Context,
    key_id: Annotated[str, typer.Argument(help="The key's id (see keys list).", show_default=False)],
) -> None:
    """Revoke a key: requests with it answer 401 from then on, and the inspector sessions opened with it end.

    Example: [bold]ctxledger keys revoke 3f9a1c2b7d4e[/bold]
    """
    from ctxledger.store.keys import revoke_key

    settings = _settings(ctx)
    with _handled(), _open(settings) as ledger:
        try:
            revoke_key(ledger.store, key_id)
        except RecordNotFound:
            raise InputError(
                f"API key {key_id!r} not found among the active keys (it does not exist or is already revoked); "
                "ctxledger keys list --tenant T shows a tenant's key ids",
                source="<command line>",
                field="KEY_ID",
            ) from None
    _out().print(f"key {escape(key_id)} revoked; its inspector sessions ended")
