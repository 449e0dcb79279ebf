"""`ctxledger demo` runs the main job end to end on the bundled real trajectory."""

from __future__ import annotations

import json
from importlib.resources import files
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from ctxledger.cli import app
from ctxledger.demo import DEMO_CONVERSATION, DEMO_FILE, DEMO_TASK, DEMO_TOOLS_FILE, run_demo
from ctxledger.ledger import Ledger
from ctxledger.testing import MemoryStore

SECTIONS = (
    "1. The trajectory",
    "2. The budget",
    "3. What the model sees, and why",
    "4. What it does not see, and why",
    "5. The provider payload",
    "6. Tokens against replaying the whole history",
)

if TYPE_CHECKING:
    from conftest import DemoStore


def _flat(text: str) -> str:
    return " ".join(text.split())


def test_demo_prints_every_section_in_order(demo_store: DemoStore) -> None:
    """The demo prints the trajectory, budget, included, omitted, payload and saving sections, in that order."""
    positions = [demo_store.output.index(title) for title in SECTIONS]
    assert positions == sorted(positions)
    flat = _flat(demo_store.output)
    for text in ("B_input", "B_dynamic", "W − O − M", "Included items", "Omitted items", "Payload preview"):
        assert text in flat


def test_demo_shows_the_budget_arithmetic_of_an_8k_window(demo_store: DemoStore) -> None:
    """W=8000, O=1000, M=200 give B_input 6,800, and the manifest says the same."""
    budget = demo_store.manifest["budget"]
    assert (budget["window"], budget["output"], budget["margin"], budget["input"]) == (8000, 1000, 200, 6800)
    assert budget["dynamic"] == budget["input"] - budget["fixed"]
    flat = _flat(demo_store.output)
    assert f"B_dynamic │ {budget['dynamic']:,}" in flat
    assert "B_input │ 6,800" in flat


def test_demo_omits_items_for_budget_and_keeps_every_required_one(demo_store: DemoStore) -> None:
    """At 8k the policy must omit history (reason budget) and still keep all required items."""
    manifest = demo_store.manifest
    assert manifest["omitted"], "an 8k budget must force omissions on the bundled trajectory"
    assert {e["reason"] for e in manifest["omitted"]} == {"budget"}
    required = {d["ref"] for d in manifest["decisions"] if d["outcome"] == "require"}
    assert required <= {e["unit"] for e in manifest["included"]}
    assert f"required items kept: {len(required)}/{len(required)}" in demo_store.output
    assert "budget: did not fit" in _flat(demo_store.output)


def test_demo_reports_the_saving_against_full_replay(demo_store: DemoStore) -> None:
    """Replay and assembled tokens are printed from the manifest, with the saving and its percentage."""
    tokens = demo_store.manifest["tokens"]
    replay, assembled = tokens["replay"], tokens["estimated_input"]
    assert assembled <= demo_store.manifest["budget"]["input"] < replay
    flat = _flat(demo_store.output)
    pct = 100.0 * (replay - assembled) / replay
    assert f"full replay of the history: {replay:,} tokens" in flat
    assert f"assembled payload: {assembled:,} tokens" in flat
    assert f"{replay - assembled:,} tokens ({pct:.1f}%)" in flat
    assert "would not even fit this budget" in flat


def test_demo_writes_the_full_payload_json(demo_store: DemoStore) -> None:
    """The payload file is the persisted payload, valid OpenAI Chat JSON whose last message is the tool result."""
    payload = json.loads(demo_store.payload_path.read_text(encoding="utf-8"))
    assert payload == demo_store.manifest["payload"]
    assert payload["model"] == "gpt-4o"
    assert payload["messages"][0]["role"] == "system"
    assert payload["messages"][-1]["role"] == "tool"
    assert f"written to {demo_store.payload_path}" in demo_store.output


def test_demo_without_db_keeps_one_reused_store_whose_printed_commands_work(
    runner: CliRunner, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Without --db the store lives in $CTXLEDGER_CACHE_DIR/demo, reused by every run (no folder per run);
    nothing goes to the working directory, and the printed explain and rm commands work."""
    work, cache = tmp_path / "work", tmp_path / "cache"
    work.mkdir()
    monkeypatch.chdir(work)
    monkeypatch.setenv("CTXLEDGER_CACHE_DIR", str(cache))
    first = runner.invoke(app, ["demo"])
    assert first.exit_code == 0, first.output
    second = runner.invoke(app, ["demo"])
    assert second.exit_code == 0, second.output
    folder = cache / "demo"
    assert sorted(p.name for p in folder.iterdir()) == ["demo-payload.json", "demo.db", "demo.db.blobs"]
    assert "already in the store" in second.stdout and list(work.iterdir()) == []
    lines = [line.strip() for line in second.stdout.splitlines()]
    assert f"rm -r {folder}" in lines
    explain = next(line for line in lines if line.startswith("ctxledger --db") and " explain " in line)
    db, asm_id = explain.split()[2], explain.split()[4]
    assert db == f"sqlite:///{folder / 'demo.db'}"
    answer = runner.invoke(app, ["--db", db, "explain", asm_id])
    assert answer.exit_code == 0, answer.output
    assert "Included items" in answer.stdout


def test_demo_out_dash_prints_the_payload_on_stdout_and_the_report_on_stderr(
    runner: CliRunner, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """--out - gives the payload JSON alone on stdout (pipeable); the report moves to stderr."""
    monkeypatch.chdir(tmp_path)
    result = runner.invoke(app, ["--db", f"sqlite:///{tmp_path / 'o.db'}", "demo", "--out", "-"])
    assert result.exit_code == 0, result.output
    payload = json.loads(result.stdout)
    assert payload["model"] == "gpt-4o"
    assert "5. The provider payload" in result.stderr and "written to stdout" in _flat(result.stderr)
    assert not Path("-").exists()


def test_demo_help_counts_what_the_bundled_trajectory_holds(runner: CliRunner) -> None:
    """The help's counts are those of the imported trajectory: 35 messages, 27 calls, 27 results."""
    store = MemoryStore()
    result = run_demo(Ledger(store))
    assert (result.history["message"], result.history["tool_call"], result.history["tool_artifact"]) == (35, 27, 27)
    text = _flat(runner.invoke(app, ["demo", "--help"]).stdout)
    assert "35 messages, 27 tool calls and their 27 results" in text
    assert "62 messages" not in text


def test_demo_in_anthropic_format_flags_estimated_counts(runner: CliRunner, tmp_path: Path) -> None:
    """--format anthropic-messages gives a top-level system and a user-first payload; Claude counts are flagged."""
    out = tmp_path / "anthropic.json"
    result = runner.invoke(
        app, ["--db", f"sqlite:///{tmp_path / 'a.db'}", "demo", "--format", "anthropic-messages", "--out", str(out)]
    )
    assert result.exit_code == 0, result.output
    payload = json.loads(out.read_text(encoding="utf-8"))
    assert isinstance(payload["system"], str | list)
    assert payload["messages"][0]["role"] == "user"
    assert "counts are estimates" in result.stdout


def test_demo_with_a_budget_too_small_lists_the_required_blocks(runner: CliRunner, tmp_path: Path) -> None:
    """A window the required blocks cannot fit exits 2 with the itemised blocks, never a traceback."""
    result = runner.invoke(app, ["--db", f"sqlite:///{tmp_path / 's.db'}", "demo", "--budget", "2000"])
    assert result.exit_code == 2
    flat = _flat(result.stderr)
    assert "Required blocks" in flat
    assert "instruction" in flat
    assert "B_input = 800" in flat
    assert "Raise --budget, or lower --output / --margin" in flat and "--window" not in flat
    assert "Traceback" not in result.output


def test_run_demo_imports_once_and_saves_tokens() -> None:
    """The library entry point imports the trajectory once, then reuses it; the payload fits B_input."""
    ledger = Ledger(MemoryStore())
    first = run_demo(ledger)
    second = run_demo(ledger, window_tokens=16_000)
    assert (first.imported, second.imported) == (True, False)
    (record,) = json.loads(files("ctxledger._demo").joinpath(DEMO_FILE).read_text(encoding="utf-8"))
    calls = sum(len(m.get("tool_calls") or []) for m in record["traj"])
    non_tool = sum(1 for m in record["traj"] if m["role"] != "tool")
    assert (first.history["message"], first.history["tool_call"], first.history["tool_artifact"]) == (
        non_tool,
        calls,
        calls,
    )
    assert first.assembled_tokens <= 6_800 < first.replay_tokens
    assert first.required.lost == ()
    assert not second.assembly.manifest["omitted"], "16k holds the whole trajectory"
    # Everything fits: the only difference from a replay is each tool result's data framing (trust,
    # observed_at), a few tokens per result.
    framing = second.assembled_tokens - second.replay_tokens
    assert 0 < framing <= 12 * first.history["tool_artifact"]


def test_bundled_trajectory_is_the_unchanged_tau_bench_record(data_dir: Path) -> None:
    """The bundled file holds exactly tau-bench's record DEMO_TASK, byte for byte."""
    source_text = (data_dir / "tau-bench" / "gpt-4o-airline_tasks0-39.json").read_text(encoding="utf-8")
    bundled_text = files("ctxledger._demo").joinpath(DEMO_FILE).read_text(encoding="utf-8")
    (record,) = json.loads(bundled_text)
    assert (record["task_id"], record["trial"]) == DEMO_TASK
    assert bundled_text.strip()[1:-1] in source_text
    assert f"tau-bench-airline-task{DEMO_TASK[0]}-trial{DEMO_TASK[1]}" == DEMO_CONVERSATION


def test_bundled_data_keeps_the_mit_notice_and_never_includes_locomo() -> None:
    """NOTICE carries Sierra's MIT copyright, the licence text and the source commit; no LoCoMo data ships."""
    folder = files("ctxledger._demo")
    notice = folder.joinpath("NOTICE").read_text(encoding="utf-8")
    for text in (
        "Copyright (c) 2024 Sierra",
        "Permission is hereby granted",
        "59a200c6d575d595120f1cb70fea53cef0632f6b",
        DEMO_TOOLS_FILE,
        "043b544371757ebb3762b3d02a6675dfe0c41798",
    ):
        assert text in notice
    names = sorted(p.name for p in folder.iterdir() if p.name != "__pycache__")
    assert names == sorted(["NOTICE", "__init__.py", DEMO_FILE, DEMO_TOOLS_FILE])
    assert not any("locomo" in n.lower() for n in names)


def test_readme_explain_example_names_a_record_the_demo_leaves_out(demo_store: DemoStore, readme_block) -> None:
    """The README's `explain asm_… N  # why record N was left out` names a record the demo really omits (budget)."""
    block = readme_block("bash", "demo.db explain asm_…")
    line = next(ln for ln in block.splitlines() if "left out" in ln)
    number = line.split("explain asm_…")[1].split()[0]
    omitted = {e["ref"]: e["reason"] for e in demo_store.manifest["omitted"]}
    assert omitted[f"{DEMO_CONVERSATION}/{number}"] == "budget"
    assert f"record {number} was left out (budget)" in line
    assert f"explain {demo_store.manifest['id']} {number}" in demo_store.output  # the demo suggests the same one


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    budget=st.integers(-5, 20_000_000),
    output=st.integers(-5, 20_000_000),
    margin=st.integers(-5, 20_000_000),
)
def test_a_budget_outside_the_bounds_is_refused_before_the_store_is_made(
    runner: CliRunner, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, budget: int, output: int, margin: int
) -> None:
    """An impossible budget exits 2 naming the option, and neither the demo folder nor a --db store appears."""
    from ctxledger.budget import TOKEN_BOUNDS

    values = {"window_tokens": budget, "output_tokens": output, "margin_tokens": margin}
    in_bounds = all(lo <= values[k] <= hi for k, (lo, hi) in TOKEN_BOUNDS.items())
    assume(not in_bounds or budget - output - margin <= 0)
    case = tmp_path / f"{budget}_{output}_{margin}"
    monkeypatch.setenv("CTXLEDGER_CACHE_DIR", str(case / "cache"))
    store = case / "given.db"
    options = ["--budget", str(budget), "--output", str(output), "--margin", str(margin)]
    for args in (["demo", *options], ["--db", f"sqlite:///{store}", "demo", *options]):
        result = runner.invoke(app, args)
        assert result.exit_code == 2, result.output
        assert "--budget" in result.stderr or "--output" in result.stderr or "--margin" in result.stderr
    assert not (case / "cache").exists() and not store.exists()
