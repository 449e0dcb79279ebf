"""``ctxledger serve`` refuses what it could not serve before it starts: a missing store, a taken port."""

from __future__ import annotations

import socket
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from ctxledger.cli import app

uvicorn = pytest.importorskip("uvicorn")


@pytest.fixture
def started(monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    """Calls of ``uvicorn.Server.run``: ``(server, sockets, their (host, port))``, recorded instead of serving."""
    calls: list[Any] = []

    def record(server: Any, sockets: Any = None) -> None:
        assert sockets, "the server is handed the socket the command bound"
        host, port = sockets[0].getsockname()[:2]
        calls.append((server, sockets, (host, port)))
        with socket.create_connection((host, port), timeout=5):  # it listens already: the port is served
            pass

    monkeypatch.setattr(uvicorn.Server, "run", record)
    return calls


def test_serve_refuses_a_store_that_does_not_exist(tmp_path: Path, started: list[Any]) -> None:
    typo = tmp_path / "typo" / "dmeo.db"
    result = CliRunner().invoke(app, ["--db", f"sqlite:///{typo}", "serve", "--port", "0"])
    assert result.exit_code == 2, result.output
    assert "no store at" in " ".join(result.stderr.split())
    assert not started and not typo.exists() and not typo.parent.exists()


def test_serve_refuses_a_port_in_use_naming_the_option(tmp_path: Path, started: list[Any]) -> None:
    url = f"sqlite:///{tmp_path / 'ok.db'}"
    assert CliRunner().invoke(app, ["--db", url, "migrate"]).exit_code == 0
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        result = CliRunner().invoke(app, ["--db", url, "serve", "--port", str(port)])
    flat = " ".join(result.stderr.split())
    assert result.exit_code == 2, result.output
    assert f"--port {port}" in flat and "already in use" in flat
    assert not started


@pytest.mark.parametrize("given", ["0", "free"])
def test_serve_prints_the_port_it_serves_on(tmp_path: Path, started: list[Any], given: str) -> None:
    """--port 0 prints the port the system chose (never :0); a port given is served and printed as given."""
    url = f"sqlite:///{tmp_path / 'ok.db'}"
    assert CliRunner().invoke(app, ["--db", url, "migrate"]).exit_code == 0
    if given == "free":
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            given = str(probe.getsockname()[1])
    result = CliRunner().invoke(app, ["--db", url, "serve", "--port", given])
    assert result.exit_code == 0, result.output
    ((server, sockets, (_host, bound)),) = started
    assert bound != 0 and (given == "0" or bound == int(given))
    assert f"on http://127.0.0.1:{bound} " in " ".join(result.stderr.split())
    assert server.config.port == bound and sockets[0].fileno() == -1  # closed once the server stopped
