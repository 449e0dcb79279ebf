"""LoCoMo with its observation memories: each memory keeps its provenance, and a required turn counts as
recalled when a memory derived from it is in the context."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ctxledger.eval.base import EvalCase, EvalItem, Selection
from ctxledger.eval.datasets import MEMORY_PREFIX, load_dataset
from ctxledger.eval.harness import evaluate_case


@pytest.fixture(scope="module")
def with_memories(data_dir, counter):
    return load_dataset("locomo-memory", data_dir, counter, limit=1)


def test_every_observation_is_a_memory_after_its_session(data_dir, with_memories):
    record = json.loads((data_dir / "locomo" / "locomo10_conv0-6.json").read_text())[0]
    items = with_memories.cases[0].items
    memories = [i for i in items if i.meta.get("kind") == "memory"]
    want = sum(len(f) for s in record["observation"].values() for f in s.values())
    assert len(memories) == want
    assert [i.seq for i in items] == list(range(len(items)))
    turns = {i.id: i for i in items if i.meta.get("kind") != "memory"}
    speakers = {s: set(map(tuple, (f[1] if isinstance(f[1], list) else [f[1]] for f in fs)))
                for o in record["observation"].values() for s, fs in o.items()}  # fmt: skip
    for memory in memories:
        assert memory.text.startswith(MEMORY_PREFIX) and memory.meta["covers"]
        assert memory.meta["speaker"] in (record["conversation"]["speaker_a"], record["conversation"]["speaker_b"])
        assert memory.meta["speaker"] in speakers
        session_turns = [t for t in turns.values() if t.meta["session"] == memory.meta["session"]]
        assert memory.seq > max(t.seq for t in session_turns)
        assert all(c in turns or c not in {t.id for t in items} for c in memory.meta["covers"])
        assert session_turns[0].meta["session_date"] in memory.text


def test_the_questions_and_evidence_are_those_of_the_turns_only_dataset(data_dir, counter, with_memories):
    plain = load_dataset("locomo", data_dir, counter, limit=1)
    assert [(c.case_id, c.required_ids) for c in plain.cases] == [
        (c.case_id, c.required_ids) for c in with_memories.cases
    ]


class _Pick:
    name = "pick"

    def __init__(self, ids):
        self.ids = ids

    def select(self, task):
        return Selection(list(self.ids), sum(i.tokens for i in task.items if i.id in self.ids), 0.0)


@settings(max_examples=40, deadline=None)
@given(n=st.integers(1, 4), take=st.sets(st.integers(0, 3)), as_memory=st.sets(st.integers(0, 3)))
def test_recall_credits_a_memory_through_its_provenance(counter, n, take, as_memory):
    """Required turn k is recalled iff k itself or a memory covering k is included."""
    turns = [EvalItem(id=f"D1:{k}", role="user", text=f"t{k}", seq=k, tokens=5) for k in range(n)]
    memories = [
        EvalItem(id=f"M1:{k}", role="user", text=f"m{k}", seq=n + k, tokens=3, meta={"covers": (f"D1:{k}",)})
        for k in range(n)
    ]
    case = EvalCase("c", "locomo-memory", (*turns, *memories), "q?", 4, frozenset(t.id for t in turns))
    chosen = {f"D1:{k}" for k in take if k < n} | {f"M1:{k}" for k in as_memory if k < n}
    row = evaluate_case(case, _Pick(chosen), 1000, counter)
    recalled = {k for k in range(n) if k in take or k in as_memory}
    assert row.recall == pytest.approx(len(recalled) / n)
    assert row.omission is (len(recalled) < n)


@pytest.mark.parametrize("name", ["locomo", "locomo-memory"])
def test_a_run_labels_its_rows_with_the_dataset_it_loaded_and_writes_its_report(data_dir, counter, tmp_path, name):
    """Rows, aggregates and the report's tables are keyed by the loaded dataset's name, with memories or without."""
    from dataclasses import replace

    from ctxledger.eval.harness import make_selectors, run_eval

    dataset = load_dataset(name, data_dir, counter, limit=1)
    dataset = replace(dataset, cases=dataset.cases[:4])
    assert {c.dataset for c in dataset.cases} == {dataset.name} == {name}
    results = run_eval([dataset], make_selectors(["bm25"], counter), [2000], tmp_path, counter=counter, plots=False)
    assert {a["dataset"] for a in results.aggregates} == {name}
    report = (tmp_path / "report.md").read_text()
    assert report.count(name) >= 1
    assert "Data handling in every source record read" in report  # quirks of the records read, not of 4 cases
