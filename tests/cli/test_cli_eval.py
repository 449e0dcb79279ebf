"""`ctxledger eval`: the harness run with its report, the scenario suite and the failure-case table."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import typer
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from ctxledger.cli import app

SUBCOMMANDS = ("run", "scenarios", "cases", "caching")


def _flat(text: str) -> str:
    return " ".join(text.split())


@pytest.mark.parametrize("name", SUBCOMMANDS)
def test_every_eval_command_is_documented(runner: CliRunner, name: str) -> None:
    """Each `ctxledger eval CMD --help` explains itself with an example, and every option has help text."""
    group = typer.main.get_command(app).commands["eval"]
    command = group.commands[name]
    result = runner.invoke(app, ["eval", name, "--help"])
    assert result.exit_code == 0, result.output
    assert re.search(rf"Example: .*ctxledger eval {name}", _flat(result.output))
    assert all(getattr(p, "help", None) for p in command.params if p.name != "help")


def test_eval_cases_prints_every_case_passing(runner: CliRunner, cases_dir) -> None:
    """Every shared failure case passes under the default policy, one table row each."""
    result = runner.invoke(app, ["eval", "cases", "--cases-dir", str(cases_dir)])
    assert result.exit_code == 0, result.output
    ids = sorted(p.stem for p in cases_dir.glob("*.json"))
    assert f"{len(ids)}/{len(ids)} cases pass" in result.output
    assert all(case_id in result.output for case_id in ids)


def test_eval_cases_without_cases_is_a_user_error(runner: CliRunner, tmp_path) -> None:
    """A folder with no case file exits 2 with a message naming it."""
    result = runner.invoke(app, ["eval", "cases", "--cases-dir", str(tmp_path)])
    assert result.exit_code == 2
    assert "no failure cases" in result.output and "Traceback" not in result.output


@pytest.mark.parametrize("option", ["--cases-dir", "--data-dir"])
def test_a_file_given_for_a_folder_is_named_as_a_file(runner: CliRunner, cases_dir, option: str) -> None:
    """``--cases-dir B01.json`` exists: the error says it is a file, not that nothing was found."""
    command = ["eval", "cases"] if option == "--cases-dir" else ["eval", "run", "-d", "locomo", "--no-plots"]
    result = runner.invoke(app, [*command, option, str(cases_dir / "B01.json")])
    assert result.exit_code == 2
    assert "B01.json: is a file, not a" in result.output and "not found" not in result.output


def test_eval_run_refuses_a_named_cases_folder_that_does_not_exist(runner: CliRunner, data_dir, tmp_path) -> None:
    """A mistyped --cases-dir is an error before any call, not a run whose checks line counts no case."""
    missing = tmp_path / "no-such-cases"
    args = ["eval", "run", "-d", "locomo", "-b", "2000", "--max-cases", "1", "-s", "bm25", "--no-plots"]
    result = runner.invoke(app, [*args, "--data-dir", str(data_dir), "--cases-dir", str(missing), "--out",
                                 str(tmp_path / "r")])  # fmt: skip
    assert result.exit_code == 2 and "no-such-cases: failure-case folder not found" in result.output


def test_the_checks_line_counts_scenarios_and_cases_apart() -> None:
    """Without cases the line says they did not run, instead of folding the scenarios into one total."""
    from types import SimpleNamespace

    from ctxledger.cli.evaluate import _checks_line

    ok = SimpleNamespace(passed=True)
    assert _checks_line([ok, ok], [], Path("x")) == (
        "seed scenarios: 2/2 pass; failure cases: not run (no folder x; pass --cases-dir)"
    )
    assert _checks_line([ok], [ok, SimpleNamespace(passed=False)], Path("x")).endswith("failure cases: 1/2 pass")


def test_eval_scenarios_runs_the_named_scenario(runner: CliRunner) -> None:
    """One named scenario runs and passes; an unknown name exits 2 listing the known ones."""
    result = runner.invoke(app, ["eval", "scenarios", "--name", "branch-isolation"])
    assert result.exit_code == 0, result.output
    assert "branch-isolation" in result.output and "scenarios failed: 0" in result.output
    bad = runner.invoke(app, ["eval", "scenarios", "--name", "nope"])
    assert bad.exit_code == 2 and "branch-isolation" in bad.output


def test_eval_run_writes_the_report_with_goals_scenarios_and_cases(runner: CliRunner, data_dir, cases_dir, tmp_path):
    """A small slice of two datasets: same-run numbers for each selector, the goals, and the pass/fail tables."""
    out = tmp_path / "report"
    args = ["eval", "run", "-d", "locomo", "-d", "tau-bench", "--limit", "1", "--max-cases", "3"]
    args += ["-s", "ctxledger-default", "-s", "bm25", "-b", "2000", "-b", "8000", "--no-plots"]
    args += ["--data-dir", str(data_dir), "--cases-dir", str(cases_dir), "--out", str(out)]
    result = runner.invoke(app, args)
    assert result.exit_code == 0, result.output
    summary = json.loads((out / "results.json").read_text())
    cells = {(a["dataset"], a["selector"], a["budget"]) for a in summary["aggregates"]}
    selectors = ("ctxledger-default", "bm25", "newest-fit")  # newest-fit joins every run of the policy
    assert cells == {(d, s, b) for d in ("locomo", "tau-bench") for s in selectors for b in (2000, 8000)}
    ours = [a for a in summary["aggregates"] if a["selector"] == "ctxledger-default"]
    assert all(a["violations"] == 0 and a["overflow_rate"] == 0 for a in ours)
    report = (out / "report.md").read_text()
    for heading in ("## Goals", "## Seed scenarios", "## Failure cases (shared/cases)"):
        assert heading in report
    assert "| B09 | summary_drops_user_constraint |" in report and "| branch-isolation |" in report
    assert "Goals" in result.output and "report written to" in result.output


def test_eval_run_refuses_unknown_datasets_and_missing_data(runner: CliRunner, tmp_path) -> None:
    """Bad dataset names and a missing data folder are user errors (exit 2), never tracebacks."""
    bad = runner.invoke(app, ["eval", "run", "-d", "nope", "--out", str(tmp_path / "r")])
    assert bad.exit_code == 2 and "unknown dataset 'nope'" in bad.output
    missing = runner.invoke(app, ["eval", "run", "-d", "locomo", "--data-dir", str(tmp_path / "no"), "--out", "x"])
    assert missing.exit_code == 2 and "--data-dir" in missing.output


def test_eval_run_refuses_out_dash_instead_of_making_a_folder_named_dash(runner: CliRunner, tmp_path, monkeypatch):
    """The report is a folder of files, so --out - is a clear user error, not a folder called '-'."""
    monkeypatch.chdir(tmp_path)
    result = runner.invoke(app, ["eval", "run", "-d", "locomo", "--out", "-"])
    assert result.exit_code == 2
    assert "--out - (stdout) cannot hold the report" in " ".join(result.output.split())
    assert not (tmp_path / "-").exists()


def test_eval_run_without_matplotlib_fails_before_any_call(runner: CliRunner, tmp_path, monkeypatch, data_dir):
    """Plots asked for but matplotlib missing: a user error up front, no calls run, no report folder left."""
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "matplotlib" else real(name, *a))
    out = tmp_path / "r"
    args = ["eval", "run", "-d", "locomo", "--data-dir", str(data_dir), "--out", str(out), "--max-cases", "3"]
    result = runner.invoke(app, args)
    assert result.exit_code == 2 and "--no-plots" in " ".join(result.output.split())
    assert not out.exists()


def test_eval_run_takes_a_dataset_file_by_path_and_reports_progress(runner: CliRunner, data_dir, tmp_path) -> None:
    """`-d PATH` reads a tau-bench file under another name; progress lines appear from the first case."""
    records = json.loads((data_dir / "tau-bench" / "gpt-4o-airline_tasks0-39.json").read_text())[:1]
    path = tmp_path / "sonnet-35-new-airline.json"
    path.write_text(json.dumps(records))
    out = tmp_path / "rep"
    args = ["eval", "run", "-d", str(path), "-s", "bm25", "-b", "4000", "--max-cases", "2", "--no-checks"]
    result = runner.invoke(app, [*args, "--no-plots", "--out", str(out)])
    assert result.exit_code == 0, result.output
    assert "eval tau-bench: 0/2 (0%)" in result.output
    assert "## tau-bench" in (out / "report.md").read_text()
    bad = runner.invoke(app, ["eval", "run", "-d", str(tmp_path / "nothing.json"), "--out", str(out)])
    assert bad.exit_code == 2 and "neither a name nor an existing path" in _flat(bad.output)


def test_eval_caching_prices_consecutive_calls_against_replay(runner: CliRunner, data_dir) -> None:
    """One tau-bench trajectory: a row per selector and provider with the shared prefix and the ratio."""
    args = ["eval", "caching", "-d", "tau-bench", "-s", "newest-fit", "--limit", "1", "-b", "4000"]
    result = runner.invoke(app, [*args, "--data-dir", str(data_dir)])
    assert result.exit_code == 0, result.output
    flat = _flat(result.output)
    assert "gpt-4o" in flat and "anthropic" in flat and "ratio" in flat and "newest-fit" in flat
    assert flat.count("floor") == 3  # one floor row per provider rule
    bad = runner.invoke(app, ["eval", "caching", "-d", "locomo", "--limit", "1", "--data-dir", str(data_dir)])
    assert bad.exit_code == 2 and "not a trajectory dataset" in _flat(bad.output)


def test_eval_run_on_dataset_paths_needs_no_data_dir(runner: CliRunner, data_dir, tmp_path, monkeypatch) -> None:
    """`-d PATH` from a folder with no ../shared/data runs: --data-dir is only read for named datasets."""
    records = json.loads((data_dir / "tau-bench" / "gpt-4o-airline_tasks0-39.json").read_text())[:1]
    path = tmp_path / "run.json"
    path.write_text(json.dumps(records))
    monkeypatch.chdir(tmp_path)
    args = ["eval", "run", "-d", str(path), "-s", "bm25", "-b", "4000", "--max-cases", "1", "--no-checks"]
    result = runner.invoke(app, [*args, "--no-plots", "--out", str(tmp_path / "rep")])
    assert result.exit_code == 0, result.output
    named = runner.invoke(app, ["eval", "run", "-d", "tau-bench", "-s", "bm25", "--no-plots", "--out", "rep2"])
    assert named.exit_code == 2 and "--data-dir" in named.output
    caching = runner.invoke(app, ["eval", "caching", "-d", "tau-bench", "-s", "newest-fit", "--limit", "1"])
    assert caching.exit_code == 2 and "--data-dir" in caching.output


@pytest.mark.parametrize("command", ["run", "caching"])
@pytest.mark.parametrize("value", [0, -5, 10_000_001, 99_999_999_999])
def test_eval_budget_out_of_bounds_names_budget_before_loading(
    runner: CliRunner, data_dir, tmp_path, command: str, value: int
) -> None:
    """A --budget outside 1..10,000,000 is refused naming --budget (not --window) with the value typed."""
    args = ["eval", command, "-d", "tau-bench", "-b", str(value), "--data-dir", str(data_dir)]
    if command == "run":
        args += ["--no-plots", "--no-checks", "--out", str(tmp_path / "rep")]
    result = runner.invoke(app, args)
    flat = _flat(result.output)
    assert result.exit_code == 2, result.output
    assert "--budget" in flat and str(value) in flat and "--window" not in flat
    assert "eval loading" not in flat


def test_eval_budget_below_the_question_is_a_non_fitting_call(runner: CliRunner, data_dir, tmp_path) -> None:
    """A budget smaller than a LoCoMo question sends nothing for ours (as the baselines overflow), not a crash."""
    out = tmp_path / "rep"
    args = ["eval", "run", "-d", "locomo", "-s", "ctxledger-default", "-b", "5", "--max-cases", "3"]
    result = runner.invoke(app, [*args, "--data-dir", str(data_dir), "--no-plots", "--no-checks", "--out", str(out)])
    assert result.exit_code == 0, result.output
    rows = [json.loads(line) for line in (out / "rows.jsonl").read_text().splitlines()]
    ours = [r for r in rows if r["selector"] == "ctxledger-default"]
    assert ours and all(not r["fits"] for r in ours), ours[:1]


def test_eval_run_warns_about_and_reports_a_folder_file_that_is_not_json(runner: CliRunner, data_dir, tmp_path) -> None:
    """A cut-off file in a dataset folder is named on stderr and in the report; the rest of the folder runs."""
    records = json.loads((data_dir / "tau-bench" / "gpt-4o-airline_tasks0-39.json").read_text())[:1]
    folder = tmp_path / "tb"
    folder.mkdir()
    (folder / "good.json").write_text(json.dumps(records))
    (folder / "broken.json").write_text(json.dumps(records)[:3000])
    out = tmp_path / "rep"
    args = ["eval", "run", "-d", str(folder), "-s", "bm25", "-b", "4000", "--max-cases", "2", "--no-checks"]
    result = runner.invoke(app, [*args, "--no-plots", "--out", str(out)])
    assert result.exit_code == 0, result.output
    assert "warning: tau-bench: skipped 1 unreadable file, evaluated the rest" in _flat(result.output)
    assert "broken.json" in result.output
    report = (out / "report.md").read_text()
    assert "files_unreadable = 1" in report and "- broken.json: not one JSON document" in report
    alone = runner.invoke(app, ["eval", "run", "-d", str(folder / "broken.json"), "--out", str(out)])
    assert alone.exit_code != 0 and "not one JSON document" in _flat(alone.output)


def test_the_readme_says_how_long_the_whole_evaluation_takes_and_how_to_run_a_slice() -> None:
    """The README's first eval command runs tens of thousands of calls; the text after it offers a slice."""
    readme = (Path(__file__).parents[2] / "README.md").read_text(encoding="utf-8")
    command = readme.index("ctxledger eval run -d locomo -d tau-bench -b 2000 -b 8000")
    after = readme[command : readme.index("For evidence datasets", command)]
    assert "--max-cases" in after and "half an hour" in after


@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    name=st.text(alphabet="abcdefghijklmnopqrstuvwxyz-_0123456789", min_size=1, max_size=20),
    command=st.sampled_from(["run", "caching"]),
)
def test_an_unknown_selector_lists_the_selectors_by_name_before_loading(
    runner: CliRunner, tmp_path: Path, name: str, command: str
) -> None:
    """The refusal names the selector typed and lists every selectable one as plain names, before any data is read."""
    from ctxledger.eval.harness import selector_names
    from ctxledger.eval.ours import register

    register()
    known = selector_names()
    assume(name not in known)
    args = ["eval", command, "-d", "tau-bench", "-s", name, "--data-dir", str(tmp_path / "no-data")]
    if command == "run":
        args += ["--no-plots", "--no-checks", "--out", str(tmp_path / "rep")]
    result = runner.invoke(app, args)
    flat = _flat(result.stderr)
    assert result.exit_code == 2, result.output
    assert f"unknown selector {name!r}; available: {', '.join(known)}" in flat
    assert "ctxledger-stable" in known and "[" not in flat and "folder not found" not in flat


@pytest.mark.parametrize(
    ("option", "value", "command"),
    [
        ("--max-cases", "0", "run"),
        ("--max-cases", "-1", "run"),
        ("--limit", "0", "run"),
        ("--limit", "-3", "run"),
        ("--step-stride", "0", "run"),
        ("--determinism-every", "-1", "run"),
        ("--limit", "-1", "caching"),
    ],
)
def test_eval_counts_outside_their_range_are_refused_naming_the_option_before_loading(
    runner: CliRunner, data_dir, tmp_path, option: str, value: str, command: str
) -> None:
    """A slice of no cases (or a negative one) is a usage error naming the option, never a traceback or a full run."""
    args = ["eval", command, "-d", "tau-bench", option, value, "--data-dir", str(data_dir)]
    if command == "run":
        args += ["-s", "bm25", "--no-plots", "--no-checks", "--out", str(tmp_path / "rep")]
    result = runner.invoke(app, args)
    flat = _flat(result.output)
    assert result.exit_code == 2, result.output
    assert option in flat and value in flat and "eval loading" not in flat
    assert not (tmp_path / "rep").exists()


def test_eval_run_refuses_an_out_that_is_a_file_before_any_call(runner: CliRunner, data_dir, tmp_path) -> None:
    """--out names the report folder: an existing file there is refused up front, not after the run."""
    taken = tmp_path / "report.txt"
    taken.write_text("mine\n")
    args = ["eval", "run", "-d", "tau-bench", "-s", "bm25", "--max-cases", "1", "--data-dir", str(data_dir)]
    result = runner.invoke(app, [*args, "--no-plots", "--no-checks", "--out", str(taken)])
    flat = _flat(result.output)
    assert result.exit_code == 2, result.output
    assert f"--out {taken}" in flat and "not a folder" in flat and "eval loading" not in flat
    assert result.exception is None or isinstance(result.exception, SystemExit)
    assert taken.read_text() == "mine\n"


def test_eval_run_tells_two_files_of_one_dataset_apart_by_file_name(runner: CliRunner, data_dir, tmp_path) -> None:
    """Two tau-bench files in one run: the headline, the report and the progress name each by its file."""
    records = json.loads((data_dir / "tau-bench" / "gpt-4o-airline_tasks0-39.json").read_text())
    for name, part in (("run-a.json", records[:1]), ("run-b.json", records[1:2])):
        (tmp_path / name).write_text(json.dumps(part))
    out = tmp_path / "rep"
    args = ["eval", "run", "-d", str(tmp_path / "run-a.json"), "-d", str(tmp_path / "run-b.json"), "-s", "bm25"]
    args += ["-b", "4000", "--max-cases", "1", "--no-checks", "--no-plots", "--out", str(out)]
    result = runner.invoke(app, args)
    assert result.exit_code == 0, result.output
    assert "eval tau-bench (run-a.json) [1/2]: 0/2" in result.output
    assert "eval tau-bench (run-b.json) [2/2]: 1/2" in result.output
    headline = result.output[result.output.index("Headline") :]
    assert "tau-bench (run-a.json)" in headline and "tau-bench (run-b.json)" in headline
    report = (out / "report.md").read_text()
    assert "## tau-bench (run-a.json)" in report and "## tau-bench (run-b.json)" in report


def test_eval_run_says_which_toolbench_file_was_skipped_and_why(runner: CliRunner, data_dir, tmp_path) -> None:
    """A failed run among answers: warned as skipped, the rest evaluated; alone in its folder: an error naming it."""
    answers = sorted((data_dir / "toolbench-examples" / "answer" / "G1_answer").glob("*.json"))
    record = json.loads(answers[0].read_text())
    del record["answer_generation"]["train_messages"]
    record.setdefault("tree", {})
    for folder in ("mixed", "alone"):
        (tmp_path / folder).mkdir()
        (tmp_path / folder / "failed.json").write_text(json.dumps(record))
    (tmp_path / "mixed" / "good.json").write_text(answers[1].read_text())
    args = ["-s", "bm25", "-b", "4000", "--max-cases", "1", "--no-checks", "--no-plots", "--out", str(tmp_path / "r")]
    mixed = runner.invoke(app, ["eval", "run", "-d", str(tmp_path / "mixed"), *args])
    assert mixed.exit_code == 0, mixed.output
    assert (
        "warning: toolbench: skipped 1 failed run, evaluated the rest (listed in the report): failed.json: "
        "failed run (a search tree, no train_messages); skipped" in _flat(mixed.output)
    )
    alone = runner.invoke(app, ["eval", "run", "-d", str(tmp_path / "alone"), *args])
    assert alone.exit_code == 2 and "Traceback" not in alone.output
    assert (
        "nothing to evaluate: its only toolbench file, failed.json, is a failed run (a search tree, no "
        "train_messages)" in _flat(alone.output)
    )


def test_eval_cases_reads_every_json_case_and_refuses_a_non_case_by_name(
    runner: CliRunner, cases_dir, data_dir, tmp_path
) -> None:
    """A case named other than B*.json runs; a JSON file that is not a case stops `eval cases` and `eval run`
    (before any call) naming the file."""
    case = json.loads((cases_dir / "B02.json").read_text())
    del case["id"]
    (tmp_path / "tool-pairs.json").write_text(json.dumps(case))
    result = runner.invoke(app, ["eval", "cases", "--cases-dir", str(tmp_path)])
    assert result.exit_code == 0, result.output
    assert "tool-pairs" in result.output and "1/1 cases pass" in result.output
    (tmp_path / "package.json").write_text('{"name": "x"}')
    bad = runner.invoke(app, ["eval", "cases", "--cases-dir", str(tmp_path)])
    assert bad.exit_code == 2 and "package.json: not a failure case" in _flat(bad.output)
    out = tmp_path / "rep"
    args = ["eval", "run", "-d", "tau-bench", "-s", "bm25", "--max-cases", "1", "--no-plots", "--out", str(out)]
    run = runner.invoke(app, [*args, "--data-dir", str(data_dir), "--cases-dir", str(tmp_path)])
    assert run.exit_code == 2 and "package.json: not a failure case" in _flat(run.output)
    assert not out.exists()


def test_eval_run_help_says_what_limit_and_max_cases_count(runner: CliRunner) -> None:
    """--limit counts source records (conversations, questions, trajectories), --max-cases counts cases (calls)."""
    result = runner.invoke(app, ["eval", "run", "--help"], env={"COLUMNS": "300"})
    flat = _flat(result.output)
    limit = flat[flat.index("--limit") : flat.index("--max-cases")]
    assert "LoCoMo conversations" in limit and "BFCL questions" in limit and "trajectories" in limit
    max_cases = flat[flat.index("--max-cases") : flat.index("--step-stride")]
    assert "A case is one model call" in max_cases and "once per selector and budget" in max_cases
    caching = _flat(runner.invoke(app, ["eval", "caching", "--help"], env={"COLUMNS": "300"}).output)
    assert "Read only the first N trajectories of each dataset" in caching
