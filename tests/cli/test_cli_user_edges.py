"""CLI edges a user meets: a bad ``--out``, the follow-up commands printed, a payload larger than replay, and
``explain`` on a record no context can hold."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from ctxledger.cli import app
from ctxledger.demo import DEMO_CONVERSATION
from ctxledger.ledger import Ledger
from ctxledger.scenarios._graph import GraphBuilder

if TYPE_CHECKING:
    from conftest import DemoStore

NEVER_SENT_KINDS = ("model_run", "participant", "branch", "conversation")
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


@settings(max_examples=6, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(outputs=st.integers(1, 4), lines=st.integers(1, 30))
def test_a_payload_larger_than_replay_says_so_instead_of_a_negative_saving(
    runner: CliRunner, tmp_path: Path, outputs: int, lines: int
) -> None:
    """Nothing left out and tool results delimited as data: the report says what was added and why."""
    url = f"sqlite:///{tmp_path / f'larger-{outputs}-{lines}.db'}"
    with Ledger.open(url) as ledger:
        g = GraphBuilder(ledger, "larger")
        g.system("sys", "Be brief.")
        g.user("u1", "List the files.")
        for i in range(outputs):
            g.tool(f"ls{i}", "shell", {"cmd": f"ls {i}"}, "\n".join(f"file_{i}_{n}.txt" for n in range(lines)))
        g.user("u2", "Which one is newest?")
    result = runner.invoke(app, ["--db", url, "assemble", g.conversation_id, "--window", "64000"])
    assert result.exit_code == 0, result.output
    report = " ".join(result.stderr.split())
    with Ledger.open(url) as ledger:
        (stored,) = ledger.store.list_assemblies("default")
        tokens = ledger.get_assembly(stored["id"])["tokens"]
    if tokens["estimated_input"] > tokens["replay"]:
        assert "added:" in report and "<data" in report and "saved:" not in report
    else:
        assert "saved:" in report and "-" not in report.split("saved:")[1].split()[0]


def test_explain_on_a_record_no_context_can_hold_says_what_it_is(
    runner: CliRunner, tmp_path: Path, data_dir: Path
) -> None:
    """A model run, participant or branch is never a candidate: explain says which kind it is and why, exit 2."""
    source = data_dir / "mini-swe-agent-deepseek"
    url = f"sqlite:///{tmp_path / 'm.db'}"
    imported = runner.invoke(app, ["--db", url, "import", str(source / "pydicom__pydicom-901.traj.json")])
    assert imported.exit_code == 0, imported.output
    with Ledger.open(url) as ledger:
        (conv,) = ledger.store.conversations("default")
        asm = ledger.assemble(conv, window_tokens=32_000)
        never = [r for r in ledger.store.records("default", conv) if r.kind.value in NEVER_SENT_KINDS]
    assert {r.kind.value for r in never} >= {"model_run", "participant"}
    for rec in never[:6]:
        result = runner.invoke(app, ["--db", url, "explain", asm.id, rec.id])
        assert result.exit_code == 2, result.output
        assert f"is a {rec.kind.value}" in " ".join(result.stderr.split())


def test_show_without_a_value_names_the_values_it_takes(runner: CliRunner, tmp_path: Path) -> None:
    """``--show`` takes a value: written as a flag before another option, the error lists the values."""
    url = f"sqlite:///{tmp_path / 's.db'}"
    answer = runner.invoke(app, ["--db", url, "assemble", "c", "--show", "--out", str(tmp_path / "f.json")])
    assert answer.exit_code == 2
    flat = " ".join(answer.output.replace("│", " ").split())
    assert "--show" in flat and all(v in flat for v in ("included", "omitted", "classes", "payload", "all"))
