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
    """Calls of ``uvicorn.run`` (recorded instead of serving)."""
    calls: list[Any] = []
    monkeypatch.setattr(uvicorn, "run", lambda *args, **kwargs: calls.append((args, kwargs)))
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


def test_serve_starts_on_a_free_port(tmp_path: Path, started: list[Any]) -> None:
    url = f"sqlite:///{tmp_path / 'ok.db'}"
    assert CliRunner().invoke(app, ["--db", url, "migrate"]).exit_code == 0
    result = CliRunner().invoke(app, ["--db", url, "serve", "--port", "0"])
    assert result.exit_code == 0, result.output
    assert len(started) == 1
