"""``ctxledger conversations``: the tenant's conversations."""

from __future__ import annotations

import os
from collections.abc import Sequence

import typer
from rich.table import Table

from ctxledger.cli._app import app
from ctxledger.cli._common import _handled, _open, _out, _settings
from ctxledger.cli._escape import escape


def _conversations_table(rows: Sequence[tuple[str, str, str]], tenant: str, width: int) -> Table:
    """Conversation id, events and title per row; ids are never cut (users copy them into other commands).

    The title gives way first (ellipsis); an id wider than the whole line folds onto the next line
    rather than losing characters.
    """
    events = max([len("events"), *(len(r[1]) for r in rows)])
    room = max(width - events - 10, 20)  # 4 borders + 2 spaces of padding per column
    longest_id = max([len("conversation"), *(len(r[0]) for r in rows)])
    longest_title = max([len("title"), *(len(r[2]) for r in rows)])
    id_width = min(longest_id, room - min(longest_title, 12))
    title_width = max(min(longest_title, room - id_width), 5)
    table = Table(title=f"Conversations of tenant {escape(tenant)}", title_justify="left")
    table.add_column("conversation", width=id_width, overflow="fold")
    table.add_column("events", justify="right", no_wrap=True)
    table.add_column("title", width=title_width, no_wrap=True, overflow="ellipsis")
    for cid, count, title in rows:
        table.add_row(escape(cid), count, escape(title))
    table.caption = "events: records written to the conversation (its last seq); records retention deleted still count"
    return table


@app.command()
def conversations(ctx: typer.Context) -> None:
    """List the tenant's conversations with their number of events (records written), oldest first.

    The count is the conversation's last seq: records that retention deleted keep their numbers and still count.

    Example: [bold]ctxledger conversations[/bold]
    """
    settings = _settings(ctx)
    console = _out()
    with _handled(), _open(settings) as ledger:
        rows = [(c.id, f"{c.events:,}", c.title) for c in ledger.conversations(settings.tenant)]
    if not console.is_terminal and "COLUMNS" not in os.environ:  # piped: one line per id, for grep and scripts
        console.width = max(console.width, max((len(r[0]) for r in rows), default=0) + 40)
    table = _conversations_table(rows, settings.tenant, console.width)
    console.print(
        table if rows else "no conversations yet: try [bold]ctxledger import PATH[/] or [bold]ctxledger demo[/]"
    )
