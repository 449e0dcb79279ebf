"""``ctxledger demo``: the main job on a bundled real trajectory."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console

from ctxledger.budget import Budget
from ctxledger.cli._app import app
from ctxledger.cli._common import (
    ApiFormat,
    _check_out,
    _command_prefix,
    _err,
    _handled,
    _is_stdout,
    _out,
    _records,
    _settings,
)
from ctxledger.cli._escape import escape
from ctxledger.cli._numbers import int_option
from ctxledger.cli._render import (
    _budget_table,
    _class_table,
    _included_table,
    _omitted_table,
    _payload_table,
    _saving_lines,
    _short,
)
from ctxledger.ledger import Ledger
from ctxledger.records import Record


@app.command()
def demo(
    ctx: typer.Context,
    budget: Annotated[
        int, int_option("--budget", unit="tokens", help="W: the context window to assemble for, in tokens.")
    ] = 8_000,
    output: Annotated[int, int_option("--output", unit="tokens", help="O: tokens reserved for the reply.")] = 1_000,
    margin: Annotated[int, int_option("--margin", unit="tokens", help="M: safety margin in tokens.")] = 200,
    api: Annotated[ApiFormat, typer.Option("--format", help="Provider payload format.")] = ApiFormat.OPENAI_CHAT,
    out: Annotated[
        Path | None,
        typer.Option(
            "--out",
            help="Where to write the payload JSON (default: next to the demo store; '-': stdout, the report then "
            "goes to stderr).",
        ),
    ] = None,
) -> None:
    """Run the main job on a real agent trajectory bundled with ctxledger.

    Imports tau-bench airline task 2 (trial 1, gpt-4o: 35 messages, 27 tool calls and their 27
    results; MIT, Copyright (c) 2024 Sierra) into the demo's own SQLite store (or --db), assembles the
    agent's next model call for a BUDGET-token window, and prints: the budget, the budget ledger per
    context class, the included items with the stage and reason that admitted them, the omitted items
    with their reason codes, a preview of the provider payload (the full JSON is written to a file),
    the token saving against replaying the whole history, and how many required items were kept.

    Without --db the store is kept in one folder reused by every run, $CTXLEDGER_CACHE_DIR/demo
    (default ~/.cache/ctxledger/demo), so the explain commands the demo prints keep working; the demo
    prints that folder and how to remove it.

    Example: [bold]ctxledger demo --budget 8000 --format anthropic-messages[/bold]
    """
    from ctxledger.demo import DEMO_ATTRIBUTION, demo_dir, run_demo

    settings = _settings(ctx)
    with _handled(window_option="--budget"):
        Budget(budget, output, margin)  # an impossible budget is refused before the demo's store is made
    folder = None if settings.db_given else demo_dir()
    if folder is not None:
        folder.mkdir(parents=True, exist_ok=True)
    url = settings.db if folder is None else f"sqlite:///{folder / 'demo.db'}"
    to_stdout = _is_stdout(out)
    if out is not None and not to_stdout:
        with _handled():
            _check_out(out, url, settings.blobs)
    payload_path = None if to_stdout else out or (folder or Path(".ctxledger")) / "demo-payload.json"
    console = _err() if to_stdout else _out()
    with _handled(window_option="--budget"), Ledger.open(url, blobs_dir=settings.blobs) as ledger:
        result = run_demo(
            ledger,
            tenant_id=settings.tenant,
            window_tokens=budget,
            output_tokens=output,
            margin_tokens=margin,
            api=api.value,
            payload_path=payload_path,
        )
        records = _records(ledger, settings, result.conversation_id)
    if to_stdout:
        typer.echo(json.dumps(result.assembly.payload, indent=2, ensure_ascii=False))
    prefix = _command_prefix(replace(settings, db=url, db_given=True))
    _print_demo(console, result, records, url, DEMO_ATTRIBUTION, kept_in=folder, prefix=prefix)


def _rule(console: Console, title: str) -> None:
    console.rule(f"[bold]{title}[/]", align="left")


def _print_demo(
    console: Console,
    result: Any,
    records: Mapping[str, Record],
    url: str,
    attribution: str,
    kept_in: Path | None = None,
    *,
    prefix: str,
) -> None:
    m = result.assembly.manifest
    h = result.history
    _rule(console, "1. The trajectory")
    verb = "imported" if result.imported else "already in the store:"
    console.print(
        f"{verb} {attribution}\nas [bold]{result.conversation_id}[/] into {escape(url)}:\n"
        f"{h.get('message', 0)} messages, {h.get('tool_call', 0)} tool calls and their {h.get('tool_artifact', 0)} "
        "raw results (stored whole, named by sha256).\n"
        "The run hit tau-bench's 30-step limit right after a tool result, with the agent still at work,\n"
        "so the model call it would make next never happened. That is the call assembled here."
    )
    _rule(console, "2. The budget")
    console.print(_budget_table(m))
    console.print(_class_table(m))
    _rule(console, "3. What the model sees, and why")
    console.print(_included_table(m, records, console))
    _rule(console, "4. What it does not see, and why")
    console.print(
        _omitted_table(m, records, console) if m["omitted"] else "nothing omitted: the whole history fits this budget."
    )
    _rule(console, "5. The provider payload")
    console.print(_payload_table(m["payload"], console))
    if result.payload_path:
        size, where = result.payload_path.stat().st_size, escape(str(result.payload_path))
    else:
        size = len((json.dumps(m["payload"], indent=2, ensure_ascii=False) + "\n").encode("utf-8"))
        where = "stdout"
    console.print(
        f"full {m['api']} request body ({size:,} bytes, {m['payload_hash'][:23]}…) written to {where}", soft_wrap=True
    )
    _rule(console, "6. Tokens against replaying the whole history")
    for line in _saving_lines(m):
        console.print(line)
    req = result.required
    colour = "green" if not req.lost else "red"
    kinds = ", ".join(dict.fromkeys(d["reason"] for d in m["decisions"] if d["outcome"] == "require"))
    console.print(f"[bold {colour}]required items kept: {len(req.kept)}/{len(req.required)}[/] ({kinds})")
    _rule(console, "Next")
    prefix = escape(prefix)  # the --db, --tenant and --blobs the demo ran with
    omitted = next((e["ref"] for e in m["omitted"]), None)
    steps = [("# the whole manifest", f"{prefix} explain {m['id']}")]
    if omitted:
        short = _short(omitted, m["conversation_id"])
        steps.append(("# why one item was left out", f"{prefix} explain {m['id']} {short}"))
    steps.append(("# a bigger window", f"{prefix} assemble {result.conversation_id} --window 16000 --out payload.json"))
    if kept_in is not None:
        note = f"# the demo store stays in {kept_in} for these commands (the next demo reuses it); to remove it"
        steps.append((note, escape(f"rm -r {kept_in}")))
    for comment, command in steps:
        console.print(f"[dim]{escape(comment)}[/]", soft_wrap=True)
        console.print(command, soft_wrap=True)
