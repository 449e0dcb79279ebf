"""``--out`` to a file that cannot be written is refused before anything is assembled, stored or created."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from ctxledger.cli import app
from ctxledger.demo import DEMO_CONVERSATION
from ctxledger.ledger import Ledger

if TYPE_CHECKING:
    from conftest import DemoStore

_NAMES = st.text(alphabet="abcdefgh_-0123456789", min_size=1, max_size=8)


def _assemblies(url: str) -> int:
    with Ledger.open(url) as ledger:
        return len(ledger.store.list_assemblies("default"))


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    missing=st.lists(_NAMES, min_size=1, max_size=3),
    as_folder=st.booleans(),
    command=st.sampled_from(["assemble", "demo"]),
)
def test_a_bad_out_path_is_refused_and_nothing_is_stored_or_created(
    runner: CliRunner, demo_store: DemoStore, tmp_path: Path, missing: list[str], as_folder: bool, command: str
) -> None:
    target = tmp_path / "out-folder" if as_folder else tmp_path.joinpath(*missing, "payload.json")
    if as_folder:
        target.mkdir(exist_ok=True)
    before = _assemblies(demo_store.url)
    args = ["assemble", DEMO_CONVERSATION] if command == "assemble" else ["demo"]
    result = runner.invoke(app, ["--db", demo_store.url, *args, "--out", str(target)])
    assert result.exit_code == 2, result.output
    assert "--out" in result.stderr and "Traceback" not in result.output
    assert _assemblies(demo_store.url) == before
    assert as_folder or not (tmp_path / missing[0]).exists()


def test_the_follow_up_command_names_the_store_it_was_given(runner: CliRunner, demo_store: DemoStore) -> None:
    result = runner.invoke(app, ["--db", demo_store.url, "assemble", DEMO_CONVERSATION])
    assert result.exit_code == 0, result.output
    assert f"ctxledger --db {demo_store.url} explain asm_" in " ".join(result.stderr.split())
