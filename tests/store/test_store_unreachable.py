"""A store URL that reaches no database is a connection error naming where it looked, never the password."""

from __future__ import annotations

import socket
from collections.abc import Iterator
from urllib.parse import quote

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from ctxledger.cli import app
from ctxledger.errors import ConfigurationError, MigrationError, StoreConnectionError
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


@pytest.fixture
def silent_server() -> Iterator[int]:
    """A loopback port that accepts TCP connections and never answers (a server that hangs, a black hole)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen(16)
        yield int(s.getsockname()[1])


def test_a_server_that_never_answers_is_a_connection_error_naming_the_wait(silent_server: int) -> None:
    """A host that takes the connection and says nothing fails after connect_timeout instead of hanging."""
    url = f"postgresql+psycopg://bob:s3cret@127.0.0.1:{silent_server}/ledger?connect_timeout=2"
    for opening in (open_store, migrate):
        with pytest.raises(StoreConnectionError) as caught:
            opening(url)
        message = " ".join(str(caught.value).split())
        assert (caught.value.host, caught.value.port) == ("127.0.0.1", silent_server)
        assert f"PostgreSQL at 127.0.0.1:{silent_server}" in message and "no answer within 2 s" in message
        assert "connect_timeout" in message and "s3cret" not in message


@pytest.mark.parametrize(("query", "sent", "said"), [("", 10, "10 s"), ("?connect_timeout=30", "30", "30 s")])
def test_every_connection_has_a_timeout_the_url_can_change(
    monkeypatch: pytest.MonkeyPatch, query: str, sent: object, said: str
) -> None:
    """psycopg is asked for connect_timeout 10 s unless the URL's query names its own; a timeout says which."""
    import psycopg

    asked: list[dict[str, object]] = []

    def connect(*args: object, **kwargs: object) -> None:
        asked.append(kwargs)
        raise psycopg.errors.ConnectionTimeout("connection timeout expired")

    monkeypatch.setattr(psycopg, "connect", connect)
    with pytest.raises(StoreConnectionError) as caught:
        open_store(f"postgresql+psycopg://bob@db.example:5433/ledger{query}")
    assert asked and all(kwargs["connect_timeout"] == sent for kwargs in asked)
    assert "PostgreSQL at db.example:5433" in str(caught.value) and f"no answer within {said}" in str(caught.value)


@pytest.mark.parametrize("value", ["abc", "-1", "1.5", "ten"])
def test_a_connect_timeout_that_is_no_whole_number_is_refused(value: str) -> None:
    with pytest.raises(ConfigurationError, match="connect_timeout"):
        open_store(f"postgresql+psycopg://bob@127.0.0.1:{PORT}/ledger?connect_timeout={value}")
