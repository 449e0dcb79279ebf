"""Fixtures for the CLI tests: a runner, and one SQLite store on which the demo has run."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from ctxledger.cli import app
from ctxledger.ledger import Ledger


@pytest.fixture(autouse=True)
def _no_env_store(monkeypatch: pytest.MonkeyPatch) -> None:
    """Keep CTXLEDGER_URL from the environment out of every CLI test."""
    monkeypatch.delenv("CTXLEDGER_URL", raising=False)


@pytest.fixture(scope="session")
def runner() -> CliRunner:
    """Typer's test runner (stdout and stderr captured separately)."""
    return CliRunner()


@dataclass(frozen=True)
class DemoStore:
    """A store the demo ran on: its URL, the demo's output and its persisted manifest."""

    url: str
    output: str
    manifest: dict[str, Any]
    payload_path: Path


@pytest.fixture(scope="session")
def demo_store(tmp_path_factory: pytest.TempPathFactory, runner: CliRunner) -> DemoStore:
    """Run ``ctxledger demo`` once on a fresh SQLite file and keep the store for the other tests."""
    folder = tmp_path_factory.mktemp("demo-store")
    url = f"sqlite:///{folder / 'ctx.db'}"
    payload = folder / "payload.json"
    result = runner.invoke(app, ["--db", url, "demo", "--out", str(payload)])
    assert result.exit_code == 0, result.output
    with Ledger.open(url) as ledger:
        (stored,) = ledger.store.list_assemblies("default")
        manifest = ledger.get_assembly(stored["id"], full=True)  # the summary's full trace, by replay
    return DemoStore(url, result.stdout, manifest, payload)
