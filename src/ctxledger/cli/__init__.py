"""The ``ctxledger`` command line.

Commands: ``migrate``, ``import``, ``conversations``, ``assemble``, ``explain``, ``usage``, ``demo``,
``rehydrate``, ``retain``, ``forget``, ``retention-audit``, ``gc``, ``serve``, ``mcp`` and the ``eval`` and ``keys``
groups; each
``--help`` explains what it does with an example. Global options choose the store (``--db``, env
``CTXLEDGER_URL``, default the embedded SQLite file ``.ctxledger/ctxledger.db``), the tenant
(``--tenant``) and the blob folder (``--blobs``); they may be given before or after the command
(``ctxledger --db X demo`` and ``ctxledger demo --db X`` are the same).

Exit codes: ``0`` success; ``2`` a user error (bad input, an unknown id, a budget the required items do
not fit, a bad option), printed as one clear message, never a traceback; ``1`` any other ctxledger
error (a store or integrity failure), also without a traceback.

One module per command group; :mod:`ctxledger.cli._common` holds the plumbing they share and
:mod:`ctxledger.cli._render` the rich tables. The package is presentation only: it calls the
:class:`~ctxledger.ledger.Ledger` facade. The core never imports it.
"""

from __future__ import annotations

from ctxledger.cli import (
    assembly,
    conversations,
    demo,
    evaluate,
    importing,
    keys,
    mcp,
    rehydrate,
    retention,
    serve,
    store,
)
from ctxledger.cli._app import app
from ctxledger.cli._render import REASONS

COMMAND_MODULES = (store, importing, conversations, assembly, rehydrate, retention, demo, evaluate, serve, keys, mcp)
"""Modules whose import registers their commands on :data:`app` (in ``ctxledger --help`` order)."""

__all__ = ["COMMAND_MODULES", "REASONS", "app", "run"]


def run() -> None:
    """Entry point for ``python -m ctxledger.cli``."""
    app()
