"""The harness judges selections itself, keeps one run's numbers together, and writes the report."""

from __future__ import annotations

import dataclasses
import json
import sys
from dataclasses import dataclass, field

import pytest

from ctxledger.errors import ConfigurationError
from ctxledger.eval import harness
from ctxledger.eval.base import EvalCase, EvalDataset, Selection, SelectionTask
from ctxledger.eval.report import write_report


@dataclass
class Fixed:
    """A selector that returns the ids it is given (and, if asked, different ids every other call)."""

    ids: list[str]
    name: str = "fixed"
    flip: list[str] | None = None
    details: dict = field(default_factory=dict)
    calls: int = 0

    def select(self, task: SelectionTask) -> Selection:
        """Return ``ids`` (or ``flip`` on every second call) with a made-up count."""
        self.calls += 1
        ids = self.flip if self.flip is not None and self.calls % 2 == 0 else self.ids
        return Selection(included_ids=list(ids), payload_tokens=1, latency_s=0.0, details=self.details)


@pytest.fixture
def case(tool_history) -> EvalCase:
    """The 7-item tool history with a 5-token question, evidence in ta and u2, recovery goal u1."""
    return EvalCase(
        case_id="c1",
        dataset="hand",
        items=tuple(tool_history),
        query="q",
        query_tokens=5,
        required_ids=frozenset({"ta", "u2"}),
        category="cat",
        recovery={"goal": frozenset({"u1"}), "latest_error": frozenset({"tb"})},
        stale_ids=frozenset({"a2"}),
    )


def test_evaluate_case_recounts_and_judges(case, words) -> None:
    """The harness recounts 3 + 5 + 40 tokens, finds the split pair and the stale turn, and scores recall."""
    row = harness.evaluate_case(case, Fixed(["s", "a1", "ta", "a2"]), 45, words)
    assert (row.payload_tokens, row.claimed_tokens, row.replay_tokens) == (48, 1, 78)
    assert row.overflow is True
    assert row.recall == 0.5 and row.omission is True and row.precision == 0.25
    assert row.stale is True
    assert (row.pairs_touched, row.pairs_broken) == (1, 1)
    assert row.violations == ("missing_tool_result:b",)
    assert row.recovery == {"goal": False, "latest_error": False}
    assert row.occupancy == {"conversation": 15 / 45, "policy": 10 / 45, "operational": 20 / 45}


def test_evaluate_case_detects_nondeterminism(case, words) -> None:
    """A selector that answers differently on the re-run is marked non-deterministic."""
    assert harness.evaluate_case(case, Fixed(["u1"]), 100, words, check_determinism=True).deterministic is True
    flaky = Fixed(["u1"], flip=["u2"])
    assert harness.evaluate_case(case, flaky, 100, words, check_determinism=True).deterministic is False


def test_evaluate_case_uses_policy_details(case, words) -> None:
    """Ledger occupancy, provenance of derived items and summary fidelity come from Selection.details."""
    details = {
        "occupancy_tokens": {"recovery": 20},
        "derived": [{"sources": ["tb"], "source_version": "1", "transform": "summary"}, {"sources": ["x"]}],
        "summaries": [{"text": "goal stated", "evidence_ids": ["u1"]}],
    }
    row = harness.evaluate_case(case, Fixed(["s"], details=details), 40, words)
    assert row.occupancy == {"recovery": 0.5}
    assert row.provenance == 0.5
    assert row.fidelity == 0.5  # u1 cited by the summary, tb neither included nor cited
    assert row.rehydration is None


def test_register_selector_hook_for_the_default_policy(monkeypatch, words) -> None:
    """Registering OURS lists it first and builds it; a duplicate or a built-in name is refused."""
    monkeypatch.setattr(harness, "_FACTORIES", {})
    harness.register_selector(harness.OURS, lambda counter: Fixed([], name=harness.OURS))
    assert harness.selector_names()[0] == harness.OURS
    assert [s.name for s in harness.make_selectors([harness.OURS, "bm25"], words)] == [harness.OURS, "bm25"]
    with pytest.raises(ConfigurationError, match="already registered"):
        harness.register_selector(harness.OURS, lambda counter: Fixed([]))
    with pytest.raises(ConfigurationError, match="already registered"):
        harness.register_selector("bm25", lambda counter: Fixed([]))


def test_unknown_selector_lists_the_available_ones(words) -> None:
    """Asking for the policy before it is registered names every available selector."""
    with pytest.raises(ConfigurationError, match="newest-fit"):
        harness.make_selectors(["no-such-policy"], words)


def test_run_eval_refuses_duplicate_names_and_bad_budgets(case, words) -> None:
    """Two selectors with one name, or a zero budget, are configuration errors."""
    dataset = EvalDataset("hand", "evidence", (case,), (100,))
    with pytest.raises(ConfigurationError, match="unique"):
        harness.run_eval([dataset], [Fixed([]), Fixed([])], None, None, counter=words)
    with pytest.raises(ConfigurationError, match="positive"):
        harness.run_eval([dataset], [Fixed([])], [0], None, counter=words)


def test_aggregate_excludes_adversarial_from_headline(case, words) -> None:
    """Headline recall leaves out the adversarial category; recall_all keeps it."""
    adversarial = dataclasses.replace(case, case_id="c2", category="5-adversarial")
    dataset = EvalDataset("hand", "evidence", (case, adversarial), (100,))
    results = harness.run_eval([dataset], [Fixed(["ta", "u2"])], None, None, counter=words, determinism_every=1)
    (agg,) = results.aggregates
    assert agg["recall"] == 1.0 and agg["recall_all"] == 1.0
    assert agg["recall_by_category"] == {"5-adversarial": 1.0, "cat": 1.0}
    assert agg["determinism"] == 1.0 and agg["cases"] == 2


def test_report_without_matplotlib_names_the_eval_extra(monkeypatch, case, words, tmp_path) -> None:
    """Asking for plots without matplotlib fails with the install hint; plots=False still writes Markdown and JSON."""
    dataset = EvalDataset("hand", "evidence", (case,), (100,))
    results = harness.run_eval([dataset], [Fixed(["ta"])], None, None, counter=words)
    monkeypatch.setitem(sys.modules, "matplotlib", None)
    with pytest.raises(ConfigurationError, match=r"ctxledger\[eval\]"):
        write_report(results, tmp_path)
    written = write_report(results, tmp_path, plots=False)
    assert {p.name for p in written} == {"results.json", "report.md", "rows.jsonl"}


def test_smoke_whole_harness_on_a_slice_of_every_dataset(data_dir, counter, tmp_path) -> None:
    """All baselines and peers on a slice of all six datasets, with a report and plots (sized to take seconds)."""
    progress: list[tuple[str, int, int]] = []
    results = harness.run_named(
        ["locomo", "bfcl-memory", "tau-bench", "mini-swe-agent", "swe-agent", "toolbench"],
        [*harness.BASELINE_NAMES, *harness.PEER_NAMES],
        {"locomo": [2000], "bfcl-memory": [1000], "tau-bench": [4000], "mini-swe-agent": [4000, 16000]},
        tmp_path,
        data_dir=data_dir,
        counter=counter,
        limit=1,
        max_cases=3,
        step_stride=9,
        progress=lambda *p: progress.append(p),
    )
    assert progress[-1][1] == progress[-1][2] == len(results.rows)
    summary = json.loads((tmp_path / "results.json").read_text())
    assert {d["name"] for d in summary["datasets"]} == {
        "locomo", "bfcl-memory", "tau-bench", "mini-swe-agent", "swe-agent", "toolbench"
    }  # fmt: skip
    for agg in summary["aggregates"]:
        if agg["selector"] in harness.BASELINE_NAMES:
            assert agg["violations"] == 0 and agg["overflow_rate"] in (0.0, None), agg
    mini = next(d for d in summary["datasets"] if d["name"] == "mini-swe-agent")
    assert mini["counter_error"]["n"] == 3
    report = (tmp_path / "report.md").read_text()
    assert "## locomo" in report and "questions_adversarial" in report and "Recovery-state preservation" in report
    for name in ("locomo.png", "mini-swe-agent.png", "toolbench.png"):
        assert (tmp_path / name).read_bytes().startswith(b"\x89PNG")
    assert len((tmp_path / "rows.jsonl").read_text().splitlines()) == len(results.rows)
