"""``ctxledger rehydrate``: the exact raw bytes of a tool result."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated

import typer

from ctxledger.assemble.record import policy_scanner
from ctxledger.cli._app import app
from ctxledger.cli._common import _check_out, _err, _handled, _is_stdout, _open, _settings
from ctxledger.cli._escape import escape
from ctxledger.errors import InputError
from ctxledger.policy.secrets_in_bytes import found_in_bytes, secrets_in_range


@app.command()
def rehydrate(
    ctx: typer.Context,
    artifact: Annotated[
        str,
        typer.Argument(
            help="A tool artifact's record id, a blob's sha256:<hex>, or a message id (its text, as excerpts "
            "locate it).",
            show_default=False,
        ),
    ],
    byte_range: Annotated[
        str | None,
        typer.Option(
            "--bytes",
            help="Only bytes START:END (0-based, end exclusive); START: reads to the end, :END from the start.",
        ),
    ] = None,
    out: Annotated[
        Path | None, typer.Option("--out", help="Write the bytes to this file instead of stdout ('-': stdout).")
    ] = None,
    reveal_secrets: Annotated[
        bool,
        typer.Option(
            "--reveal-secrets",
            help="Give the exact bytes even when the lines asked for hold a secret (refused without it, as the "
            "HTTP service refuses them).",
        ),
    ] = False,
) -> None:
    """Print the exact raw bytes of a tool result (or a message's text), checked against its sha256.

    Tool results are stored whole, before any truncation, in a content-addressed blob store; this
    gives them back byte for byte (or a range of them), refusing bytes that no longer match their hash.
    Every excerpt and reference in a manifest names the command that fetches the rest.

    Bytes whose lines hold a secret (a key, a password in a .env line …; the policy's secret scanner) are
    refused, exit code 2, naming the secrets' types and lines: assemblies show those lines withheld. Pass
    --reveal-secrets to get them anyway, or --bytes for a range that avoids those lines.

    Example: [bold]ctxledger rehydrate tau-bench-airline-task2-trial1/31 --bytes 0:200[/bold]
    """
    from ctxledger.represent.rehydrate import as_given, parse_byte_range

    settings = _settings(ctx)
    with _handled():
        if out is not None and not _is_stdout(out):
            _check_out(out, settings.db, settings.blobs)
    with _handled(), _open(settings) as ledger:
        try:
            span = parse_byte_range(byte_range, source="--bytes") if byte_range else None
        except InputError as exc:
            raise as_given(exc, (None, None), source="--bytes", names=None) from None
        try:
            data = ledger.rehydrate(artifact, span, tenant_id=settings.tenant)
        except InputError as exc:
            raise as_given(exc, span, source="--bytes", names=None) from None  # the option typed is named
        if not reveal_secrets:
            whole = data if span is None else ledger.rehydrate(artifact, None, tenant_id=settings.tenant)
            found = secrets_in_range(whole, span, policy_scanner(ledger.policy))
            if found:
                _err().print(
                    f"[red]error:[/] the bytes hold a secret: {escape(found_in_bytes(found))}; assemblies show "
                    "those lines withheld. Pass --reveal-secrets to get the exact bytes anyway"
                    + ("" if span is not None else ", or --bytes START:END for a range that avoids those lines")
                )
                raise typer.Exit(2)
    if out is None or _is_stdout(out):
        sys.stdout.buffer.write(data)
        sys.stdout.flush()
    else:
        out.write_bytes(data)
        _err().print(f"{len(data):,} bytes written to {escape(str(out))}")
