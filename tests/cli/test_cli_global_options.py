"""Global options (--db, --tenant, --blobs) are accepted before or after the command."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from hypothesis import given
from hypothesis import strategies as st
from typer.testing import CliRunner

from ctxledger.cli import app
from ctxledger.cli._app import GLOBAL_OPTIONS, hoist_global_options
from ctxledger.ledger import Ledger

if TYPE_CHECKING:
    from conftest import DemoStore

_plain = st.sampled_from(["demo", "assemble", "c1", "--window", "4000", "--out", "-", "x=y", "--show"])
_global = st.tuples(st.sampled_from(GLOBAL_OPTIONS), st.sampled_from(["sqlite:///a.db", "t1", "/tmp/b"]))


@given(st.lists(st.one_of(_plain.map(lambda p: (p,)), _global, _global.map(lambda g: (f"{g[0]}={g[1]}",)))))
def test_hoisting_moves_global_options_in_front_and_keeps_every_other_token_in_order(parts: list[tuple]) -> None:
    args = [token for part in parts for token in part]
    hoisted = hoist_global_options(args)
    globals_ = [token for part in parts if part[0].split("=")[0] in GLOBAL_OPTIONS for token in part]
    others = [part[0] for part in parts if part[0].split("=")[0] not in GLOBAL_OPTIONS]
    assert hoisted == globals_ + others


def test_nothing_after_a_double_dash_moves() -> None:
    assert hoist_global_options(["import", "--", "--db", "x"]) == ["import", "--", "--db", "x"]
    assert hoist_global_options(["conversations", "--db"]) == ["conversations", "--db"]


def test_db_and_tenant_after_the_command_choose_the_store_and_tenant(runner: CliRunner, demo_store: DemoStore) -> None:
    after = runner.invoke(app, ["conversations", "--db", demo_store.url])
    before = runner.invoke(app, ["--db", demo_store.url, "conversations"])
    assert after.exit_code == 0, after.output
    assert demo_store.manifest["conversation_id"] in after.stdout
    assert after.stdout == before.stdout
    other = runner.invoke(app, ["conversations", f"--db={demo_store.url}", "--tenant", "someone-else"])
    assert other.exit_code == 0, other.output
    assert demo_store.manifest["conversation_id"] not in other.stdout


def test_demo_db_after_the_command_writes_to_that_store(runner: CliRunner, tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'after.db'}"
    result = runner.invoke(app, ["demo", "--db", url, "--out", str(tmp_path / "payload.json")])
    assert result.exit_code == 0, result.output
    with Ledger.open(url) as ledger:
        assert len(ledger.store.list_assemblies("default")) == 1


def test_a_global_option_without_its_value_is_a_usage_error(runner: CliRunner) -> None:
    result = runner.invoke(app, ["conversations", "--db"])
    assert result.exit_code == 2
    assert "--db" in result.output
    assert "Missing command" not in result.output
