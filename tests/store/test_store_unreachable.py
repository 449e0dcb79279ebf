"""A store URL that reaches no database is a connection error naming where it looked, never the password."""

from __future__ import annotations

import socket
from urllib.parse import quote

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from ctxledger.cli import app
from ctxledger.errors import MigrationError, StoreConnectionError
from ctxledger.ledger import Ledger
from ctxledger.store import migrate, open_store

pytest.importorskip("psycopg")


def _closed_port() -> int:
    """A loopback TCP port nothing listens on (bound, then released)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


PORT = _closed_port()


def _url(password: str, port: int = PORT) -> str:
    return f"postgresql+psycopg://bob:{quote(password, safe='')}@127.0.0.1:{port}/ledger"


@settings(max_examples=15, deadline=None)
@given(password=st.text(st.characters(codec="utf-8", exclude_categories=("Cs",)), min_size=6, max_size=24))
def test_an_unreachable_server_names_host_and_port_and_never_the_password(password: str) -> None:
    password = f"pw-{password}"
    for opening in (open_store, migrate, Ledger.open, lambda url: open_store(url, migrate=False)):
        with pytest.raises(StoreConnectionError) as caught:
            opening(_url(password))
        error = caught.value
        assert not isinstance(error, MigrationError)
        assert (error.backend, error.host, error.port, error.database) == ("postgresql", "127.0.0.1", PORT, "ledger")
        assert f"127.0.0.1:{PORT}" in str(error) and "database ledger" in str(error)
        assert password not in str(error) and quote(password, safe="") not in str(error)


def test_the_cli_exits_2_with_the_connection_error() -> None:
    result = CliRunner().invoke(app, ["--db", _url("s3cret-pw"), "conversations"])
    flat = " ".join(result.stderr.split())
    assert result.exit_code == 2, result.output
    assert f"cannot connect to PostgreSQL at 127.0.0.1:{PORT}" in flat and "MigrationError" not in flat
    assert "s3cret" not in result.output
