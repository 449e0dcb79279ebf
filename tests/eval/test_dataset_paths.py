"""`eval run` reads datasets as their owners publish them: any file name, whole upstream files, failed runs,
abridged or re-quoted evidence quotes; and it reports progress from the first case."""

from __future__ import annotations

import dataclasses
import io
import json
import shutil

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from rich.console import Console

from ctxledger.errors import InputError
from ctxledger.eval.base import EvalItem
from ctxledger.eval.baselines import NewestThatFits
from ctxledger.eval.datasets import load_dataset, load_path, locate_quote, sniff_format
from ctxledger.eval.harness import rich_progress, run_eval


def test_the_upstream_locomo_file_is_read_whole_under_its_own_name(data_dir, counter, tmp_path):
    """An upstream-shaped ``locomo10.json`` (here the dev conversations under that name) loads every
    conversation, the same cases as the dev split by name."""
    (tmp_path / "locomo10.json").write_bytes((data_dir / "locomo" / "locomo10_conv0-6.json").read_bytes())
    [by_path] = load_path(tmp_path / "locomo10.json", counter, limit=2)
    by_name = load_dataset("locomo", data_dir, counter, limit=2)
    assert by_path.name == "locomo"
    assert [c.case_id for c in by_path.cases] == [c.case_id for c in by_name.cases]
    assert [c.required_ids for c in by_path.cases] == [c.required_ids for c in by_name.cases]
    [memories] = load_path(tmp_path, counter, name="locomo-memory", limit=1)
    assert memories.name == "locomo-memory" and any(i.meta.get("kind") == "memory" for i in memories.cases[0].items)


@pytest.mark.parametrize("name", ["gpt-4o-retail.json", "results/run 7.json", "x.json"])
def test_a_tau_bench_file_loads_under_any_name(data_dir, counter, tmp_path, name):
    records = json.loads((data_dir / "tau-bench" / "gpt-4o-airline_tasks0-39.json").read_text())[:2]
    path = tmp_path / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(records))
    [dataset] = load_path(path, counter)
    want = {f"task{r['task_id']}-trial{r['trial']}" for r in records}
    assert dataset.name == "tau-bench" and {c.case_id.split("@")[0] for c in dataset.cases} == want
    [in_folder] = load_path(tmp_path, counter)
    assert len(in_folder.cases) == len(dataset.cases)


def test_a_toolbench_folder_with_failed_runs_skips_them_with_a_warning(data_dir, counter, tmp_path):
    """A failed run (a search tree, no ``train_messages``) is counted and listed; the rest imports."""
    source = data_dir / "toolbench-examples" / "answer" / "G1_answer"
    shutil.copytree(source, tmp_path / "G1_answer")
    failed = tmp_path / "G1_answer" / "10_ChatGPT_DFS_woFilter_w2.json"
    record = json.loads(failed.read_text())
    del record["answer_generation"]["train_messages"]
    failed.write_text(json.dumps(record))
    [dataset] = load_path(tmp_path, counter)
    assert dataset.quirks["runs_skipped"] == 1
    assert dataset.listed["runs_skipped"][0].startswith("G1_answer/10_ChatGPT_DFS_woFilter_w2.json: failed run")
    assert {c.case_id.split("@")[0] for c in dataset.cases} == {
        f"G1_answer/{p.stem}" for p in source.glob("*.json") if p.name != failed.name
    }


def _failed_run(data_dir, path):
    """Write a ToolBench answer of the shared data as a failed run (a search tree, no ``train_messages``)."""
    source = sorted((data_dir / "toolbench-examples" / "answer" / "G1_answer").glob("*.json"))[0]
    record = json.loads(source.read_text())
    del record["answer_generation"]["train_messages"]
    record.setdefault("tree", {})
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(record))


def test_a_toolbench_folder_of_only_failed_runs_names_the_files_and_why(data_dir, counter, tmp_path):
    """Nothing left to evaluate is an error naming the file(s), the reason and that nothing was evaluated."""
    _failed_run(data_dir, tmp_path / "one" / "G1" / "solo.json")
    with pytest.raises(InputError) as one:
        load_path(tmp_path / "one", counter)
    assert str(one.value) == (
        f"{tmp_path / 'one'}: nothing to evaluate: its only toolbench file, G1/solo.json, is a failed run "
        "(a search tree, no train_messages)"
    )
    with pytest.raises(InputError) as alone:
        load_path(tmp_path / "one" / "G1" / "solo.json", counter)
    assert str(alone.value) == (
        f"{tmp_path / 'one' / 'G1' / 'solo.json'}: a failed run (a search tree, no train_messages): "
        "no trajectory to evaluate"
    )
    for name in ("a.json", "b.json"):
        _failed_run(data_dir, tmp_path / "two" / name)
    with pytest.raises(InputError, match=r"every toolbench file read is a failed run .*: a\.json, b\.json$"):
        load_path(tmp_path / "two", counter)
    with pytest.raises(InputError, match=r"file read \(the first 1 of 2: raise the limit\) is a failed run"):
        load_path(tmp_path / "two", counter, limit=1)


def test_a_path_with_no_dataset_is_refused_by_name(counter, tmp_path):
    (tmp_path / "notes.json").write_text('{"hello": 1}')
    with pytest.raises(InputError, match="no dataset file"):
        load_path(tmp_path, counter)
    with pytest.raises(InputError, match="no such file"):
        load_path(tmp_path / "missing.json", counter)


def test_shapes_are_told_apart(data_dir):
    tau = json.loads((data_dir / "tau-bench" / "gpt-4o-airline_tasks0-39.json").read_text())[:1]
    mini = json.loads(next((data_dir / "mini-swe-agent-deepseek").glob("*.traj.json")).read_text())
    assert (sniff_format(tau), sniff_format(mini), sniff_format({"messages": []})) == (
        "tau-bench",
        "mini-swe-agent",
        None,
    )


WORDS = st.lists(st.sampled_from(["we", "drove", "to", "the", "park", "beach", "town", "on", "weekends", "I",
                                  "love", "it", "really"]), min_size=6, max_size=20)  # fmt: skip
PUNCT = st.sampled_from(["", ",", ".", ";", "!"])


@settings(max_examples=60, deadline=None)
@given(words=WORDS, punct=st.lists(PUNCT, min_size=20, max_size=20), data=st.data())
def test_an_abridged_requoted_respaced_quote_is_located(words, punct, data):
    """A quote cut with ``...``, wrapped in quotation marks and re-spaced around punctuation still finds
    its turn; a quote of words the turn lacks does not."""
    text = " ".join(w + p for w, p in zip(words, punct, strict=False))
    turn = EvalItem(id="t1", role="user", text=f"Well, {text} Anyway.", seq=0, tokens=10)
    other = EvalItem(id="t2", role="user", text="Nothing to see here.", seq=1, tokens=5)
    cut = data.draw(st.integers(1, len(words) - 2))
    tokens = text.split(" ")
    head, tail = " ".join(tokens[:cut]), " ".join(tokens[cut + 1 :])
    quote = data.draw(st.sampled_from(['"{}..."', "“{}”", "'{}'", "{}"])).format(f"{head}... {tail}")
    quote = quote.replace(",", " ,") if data.draw(st.booleans()) else quote
    assert locate_quote(quote, [turn, other]) == ["t1"]
    assert locate_quote('"' + text + ' zebra"', [turn, other]) == []


@pytest.fixture(scope="module")
def locomo(data_dir, counter):
    return load_dataset("locomo", data_dir, counter, limit=1)


def test_progress_is_reported_before_the_first_selection(locomo, counter):
    """The first progress call comes before any selection (0 done, the whole total); then one per selection."""
    calls = []
    dataset = dataclasses.replace(locomo, cases=locomo.cases[:2])
    run_eval([dataset], [NewestThatFits()], [1000, 2000], None, counter=counter, progress=lambda *a: calls.append(a),
             determinism_every=0)  # fmt: skip
    assert calls[0] == ("locomo", 0, 4) and calls[-1] == ("locomo", 4, 4) and len(calls) == 5


def test_plain_progress_lines_when_not_a_terminal():
    console = Console(file=io.StringIO(), force_terminal=False, width=100)
    with rich_progress(console, every_seconds=3600) as update:
        update("loading locomo", 0, 0)
        update("locomo", 0, 10)
        update("locomo", 5, 10)
        update("locomo", 10, 10)
    lines = console.file.getvalue().splitlines()
    assert lines[0] == "eval loading locomo …"
    assert lines[1].startswith("eval locomo: 0/10 (0%)") and lines[2].startswith("eval locomo: 10/10 (100%)")


def test_limit_counts_source_records_of_the_dataset_and_max_cases_counts_cases(data_dir, counter, tmp_path):
    """--limit N reads N LoCoMo conversations of the whole dataset, however many files hold it; --max-cases N keeps
    N cases (questions) of it."""
    records = json.loads((data_dir / "locomo" / "locomo10_conv0-6.json").read_text())
    (tmp_path / "part-1.json").write_text(json.dumps(records[:1]))
    (tmp_path / "part-2.json").write_text(json.dumps(records[1:2]))
    [limited] = load_path(tmp_path, counter, limit=1)
    assert {c.case_id.split("/")[0] for c in limited.cases} == {records[0]["sample_id"]}
    assert len(limited.cases) == len(records[0]["qa"])
    [sliced] = load_path(tmp_path / "part-1.json", counter, max_cases=3)
    assert [c.case_id for c in sliced.cases] == [c.case_id for c in limited.cases[:3]]
