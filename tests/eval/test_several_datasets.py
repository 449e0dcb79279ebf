"""Several datasets in one `eval run`: each is told apart by its label, in the progress, the results and the goals."""

from __future__ import annotations

import dataclasses

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ctxledger.eval.base import EvalDataset
from ctxledger.eval.baselines import NewestThatFits
from ctxledger.eval.datasets import load_dataset
from ctxledger.eval.goals import held_out_checks
from ctxledger.eval.harness import _distinct_labels, run_eval
from ctxledger.eval.results import dataset_of


@pytest.fixture(scope="module")
def locomo(data_dir, counter):
    dataset = load_dataset("locomo", data_dir, counter, limit=1)
    return dataclasses.replace(dataset, cases=dataset.cases[:2])


def test_two_files_of_one_dataset_are_told_apart_by_file_name(locomo, counter):
    """Two LoCoMo files: each has its own label in progress, rows, aggregates, datasets and budgets."""
    first = dataclasses.replace(locomo, source="/data/a/locomo-a.json")
    second = dataclasses.replace(locomo, source="/data/b/locomo-b.json")
    calls = []
    results = run_eval([first, second], [NewestThatFits()], [1000, 2000], None, counter=counter,
                       progress=lambda *a: calls.append(a), determinism_every=0)  # fmt: skip
    labels = ["locomo (locomo-a.json)", "locomo (locomo-b.json)"]
    assert [d.name for d in results.datasets] == labels
    assert [a["dataset"] for a in results.aggregates] == [labels[0], labels[0], labels[1], labels[1]]
    assert {r.dataset for r in results.rows} == set(labels)
    assert list(results.config["budgets"]) == labels
    assert calls[0] == ("locomo (locomo-a.json) [1/2]", 0, 8)
    assert ("locomo (locomo-b.json) [2/2]", 4, 8) in calls and calls[-1] == ("locomo (locomo-b.json) [2/2]", 8, 8)


def test_a_single_dataset_keeps_its_name_and_plain_progress(locomo, counter):
    calls = []
    results = run_eval([locomo], [NewestThatFits()], [1000], None, counter=counter,
                       progress=lambda *a: calls.append(a), determinism_every=0)  # fmt: skip
    assert results.datasets[0].name == "locomo" and calls[0] == ("locomo", 0, 2)


def test_the_locomo_goals_check_each_labelled_locomo_dataset():
    """A held-out goal names each LoCoMo dataset of the run by its label, and holds only if each reaches it."""
    cell = {"selector": "ctxledger-default", "budget": 2000, "recall_by_category": {}, "latency_ms": {}}
    aggregates = [{**cell, "dataset": "locomo (a.json)", "recall": 0.9}, {**cell, "dataset": "locomo (b.json)",
                                                                          "recall": 0.5}]  # fmt: skip
    check = held_out_checks(aggregates)[0]
    assert "locomo (a.json) 0.900" in check.measured and "locomo (b.json) 0.500" in check.measured
    assert check.met is False


_names = st.sampled_from(["locomo", "tau-bench", "toolbench"])
_sources = st.sampled_from(["/x/a.json", "/y/a.json", "/x/b.json", "/x", "rel/a.json"])


@given(st.lists(st.tuples(_names, _sources), min_size=1, max_size=6))
def test_labels_are_unique_and_name_their_dataset(pairs):
    """Whatever names and sources, labels are unique, a dataset alone of its name keeps it, and the name is
    recovered from the label."""
    datasets = [EvalDataset(name=n, kind="trajectory", cases=(), default_budgets=(1000,), source=s) for n, s in pairs]
    labels = _distinct_labels(datasets)
    assert len(set(labels)) == len(labels)
    names = [n for n, _ in pairs]
    for (name, _), label in zip(pairs, labels, strict=True):
        assert dataset_of(label) == name
        assert (label == name) == (names.count(name) == 1)
