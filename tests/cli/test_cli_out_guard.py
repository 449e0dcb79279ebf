"""``--out`` never names the store's own files: a payload written there would destroy the history."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from ctxledger.cli import app
from ctxledger.ledger import Ledger
from ctxledger.records import ToolArtifact


def _store(tmp_path: Path, runner: CliRunner) -> tuple[str, Path, str]:
    """A SQLite store holding one small tool-using conversation; its URL, file and artifact id."""
    db = tmp_path / "s.db"
    turns = [
        {"role": "system", "content": "You are an agent."},
        {"role": "user", "content": "Weather?"},
        {"role": "assistant", "content": None,
         "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "weather", "arguments": "{}"}}]},
        {"role": "tool", "tool_call_id": "c1", "content": "sunny"},
    ]  # fmt: skip
    src = tmp_path / "chat.json"
    src.write_text(json.dumps({"messages": turns}), encoding="utf-8")
    url = f"sqlite:///{db}"
    assert runner.invoke(app, ["--db", url, "import", str(src), "--conversation-id", "chat"]).exit_code == 0
    with Ledger.open(url) as ledger:
        artifact = next(r.id for r in ledger.store.records("default", "chat") if isinstance(r, ToolArtifact))
    return url, db, artifact


@pytest.mark.parametrize("target", ["db", "db-relative", "wal", "blobs"])
@pytest.mark.parametrize("command", ["assemble", "rehydrate", "demo"])
def test_out_naming_the_store_is_refused_and_the_store_survives(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, command: str, target: str
) -> None:
    runner = CliRunner()
    url, db, artifact = _store(tmp_path, runner)
    monkeypatch.chdir(tmp_path)
    out = {
        "db": str(db),
        "db-relative": "s.db",
        "wal": f"{db}-wal",
        "blobs": str(tmp_path / "s.db.blobs" / "payload.json"),
    }[target]
    before = db.read_bytes()
    args = {"assemble": ["assemble", "chat"], "rehydrate": ["rehydrate", artifact], "demo": ["demo"]}[command]
    result = runner.invoke(app, ["--db", url, *args, "--out", out])
    assert result.exit_code == 2, result.output
    flat = " ".join(result.output.split())
    assert "is the store's own" in flat and "destroy the store" in flat
    assert db.read_bytes() == before
    listed = runner.invoke(app, ["--db", url, "conversations"])
    assert listed.exit_code == 0 and "chat" in listed.output


def test_out_beside_the_store_is_written(tmp_path: Path) -> None:
    runner = CliRunner()
    url, _db, _artifact = _store(tmp_path, runner)
    result = runner.invoke(app, ["--db", url, "assemble", "chat", "--out", str(tmp_path / "s.db.json")])
    assert result.exit_code == 0, result.output
    assert json.loads((tmp_path / "s.db.json").read_text(encoding="utf-8"))["messages"]
