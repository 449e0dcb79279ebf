"""``ctxledger migrate``: the store's schema."""

from __future__ import annotations

import typer
from rich.markup import escape

from ctxledger.cli._app import app
from ctxledger.cli._common import _handled, _out, _settings


@app.command()
def migrate(ctx: typer.Context) -> None:
    """Create the store's schema, or upgrade it to the newest revision (safe to repeat).

    SQLite and PostgreSQL share one schema and one migration history. Other commands migrate on
    open too; run this once when a deployment wants the schema change to be an explicit step.

    Example: [bold]ctxledger --db postgresql+psycopg://postgres@127.0.0.1/test migrate[/bold]
    """
    from ctxledger.store import migrate as run_migrate

    settings = _settings(ctx)
    with _handled():
        revision = run_migrate(settings.db)
    _out().print(f"schema of {escape(settings.db)} is at revision [bold]{revision}[/]")
