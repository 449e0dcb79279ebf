"""``python -m ctxledger``: the same command line as the ``ctxledger`` script."""

from ctxledger.cli import app

app(prog_name="ctxledger")
