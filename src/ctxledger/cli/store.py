"""``ctxledger migrate`` and ``ctxledger gc``: the store's schema and its unreferenced blobs."""

from __future__ import annotations

from datetime import timedelta
from typing import Annotated

import typer

from ctxledger.cli._app import app
from ctxledger.cli._common import _handled, _open, _out, _settings
from ctxledger.cli._escape import escape
from ctxledger.errors import InputError


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
        revision = run_migrate(settings.db, blobs_dir=settings.blobs)
    _out().print(f"schema of {escape(settings.db)} is at revision [bold]{revision}[/]")


def _grace(text: str) -> timedelta:
    """``90s``, ``30m``, ``1h``, ``2d`` or plain seconds as a duration."""
    units = {"s": 1, "m": 60, "h": 3600, "d": 86400}
    value, unit = (text[:-1], text[-1]) if text and text[-1] in units else (text, "s")
    try:
        seconds = float(value) * units[unit]
    except ValueError:
        raise InputError(
            f"not a duration: {text!r} (e.g. 90s, 30m, 1h, 2d)", source="<command line>", field="--grace"
        ) from None
    if seconds < 0:
        raise InputError(f"the grace period must be >= 0, got {text!r}", source="<command line>", field="--grace")
    return timedelta(seconds=seconds)


@app.command()
def gc(
    ctx: typer.Context,
    grace: Annotated[
        str, typer.Option("--grace", help="Keep unreferenced blobs younger than this (90s, 30m, 1h, 2d).")
    ] = "1h",
    dry_run: Annotated[bool, typer.Option("--dry-run", help="Only report what would be removed.")] = False,
) -> None:
    """Remove raw-output blobs that no record references (of any tenant), once older than --grace.

    An import writes its blobs first and its records after them in one transaction; an import that
    was killed in between leaves orphan blobs. The grace period (default one hour, counted from the
    blob's last write) keeps the blobs of an import still running. Works on blob folders and on blobs
    inside the database.

    Example: [bold]ctxledger gc --grace 30m --dry-run[/bold]
    """
    from ctxledger.store.gc import collect_garbage

    settings = _settings(ctx)
    with _handled():
        span = _grace(grace)
        with _open(settings) as ledger:
            report = collect_garbage(ledger.store, grace=span, dry_run=dry_run)
    verb = "would remove" if dry_run else "removed"
    _out().print(
        f"{report.stored:,} blobs: {report.referenced:,} referenced, {report.young:,} unreferenced but younger than "
        f"{grace}; {verb} [bold]{len(report.removed):,}[/] ({report.removed_bytes:,} bytes)"
    )
