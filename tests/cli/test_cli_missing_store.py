"""A mistyped ``--db`` path is an error for commands that read, never a new empty store."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from ctxledger.cli import app

READERS = [
    ["conversations"],
    ["assemble", "c"],
    ["explain", "asm_x", "1"],
    ["rehydrate", "c/1"],
    ["gc", "--dry-run"],
    ["keys", "list"],
    ["forget", "--conversation", "c"],
]


@pytest.mark.parametrize("args", READERS, ids=lambda a: a[0])
def test_a_command_that_reads_refuses_a_store_that_does_not_exist(tmp_path: Path, args: list[str]) -> None:
    typo = tmp_path / "typo" / "dmeo.db"
    result = CliRunner().invoke(app, ["--db", f"sqlite:///{typo}", *args])
    assert result.exit_code == 2, result.output
    assert "no store at" in " ".join(result.output.split())
    assert not typo.exists() and not typo.parent.exists()


@pytest.mark.parametrize("args", READERS, ids=lambda a: a[0])
@pytest.mark.parametrize("demo_ran", [False, True])
def test_a_missing_store_says_how_to_start_and_creates_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, args: list[str], demo_ran: bool
) -> None:
    """Exit 2 on stderr; the answer says how to start, and points at the demo's own store once it exists."""
    monkeypatch.setenv("CTXLEDGER_CACHE_DIR", str(tmp_path / "cache"))
    if demo_ran:
        (tmp_path / "cache" / "demo").mkdir(parents=True)
        (tmp_path / "cache" / "demo" / "demo.db").touch()
    missing = tmp_path / "nothing.db"
    result = CliRunner().invoke(app, ["--db", f"sqlite:///{missing}", *args])
    flat = "".join(result.stderr.split())
    assert result.exit_code == 2 and "nostoreat" in flat and "ctxledgerimportPATH" in flat, result.output
    assert ("demo/demo.db" in flat) is demo_ran
    assert not result.stdout and not missing.exists()


def test_import_creates_the_store_it_is_given(tmp_path: Path) -> None:
    source = tmp_path / "chat.json"
    source.write_text('[{"role": "user", "content": "hello"}]', encoding="utf-8")
    target = tmp_path / "new" / "store.db"
    result = CliRunner().invoke(app, ["--db", f"sqlite:///{target}", "import", str(source), "--format", "openai-chat"])
    assert result.exit_code == 0, result.output
    assert target.exists()
    listed = CliRunner().invoke(app, ["--db", f"sqlite:///{target}", "conversations"])
    assert "chat" in listed.output
