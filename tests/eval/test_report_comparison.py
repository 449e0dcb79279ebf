"""The report sets the default policy against BM25 and newest-fit per category and budget, plots recall against
budget per category, and reports selector latency."""

from __future__ import annotations

import re

from ctxledger.eval import harness
from ctxledger.eval.baselines import BM25Only


class _Reference(BM25Only):
    """A stand-in for the default policy (BM25 under the reference name), so the test takes seconds."""

    name = harness.OURS


def test_the_comparison_tables_and_plots_come_from_the_same_run(data_dir, counter, tmp_path, monkeypatch):
    monkeypatch.setitem(harness._FACTORIES, harness.OURS, lambda c: _Reference())
    results = harness.run_named(
        ["locomo"], [harness.OURS], [500, 2000], tmp_path, data_dir=data_dir, counter=counter, limit=1, max_cases=40
    )
    assert results.config["selectors"] == [harness.OURS, "bm25", "newest-fit"]
    report = (tmp_path / "report.md").read_text()
    for budget in (500, 2000):
        title = f"**Evidence recall by category at {budget} tokens against BM25 and newest-fit (same run)**"
        assert title in report
        table = report.split(title)[1].split("\n\n")[1]
        header, _rule, *rows = table.splitlines()
        assert header == f"| category | {harness.OURS} | bm25 | newest-fit | {harness.OURS} − bm25 |"
        cells = {r.split(" | ")[0].strip("| "): r.split(" | ")[1:] for r in rows}
        agg = next(a for a in results.aggregates if a["selector"] == "newest-fit" and a["budget"] == budget)
        for cat, value in agg["recall_by_category"].items():
            assert cells[cat][2] == f"{value:.3f}"
            assert cells[cat][3].strip(" |") == "0.000"  # the stand-in is BM25 itself
        assert "**headline**" in cells
    cell = r"\d+\.\d\d / \d+\.\d\d \(\d+\.\d\d CPU\)"
    assert re.search(rf"\| ctxledger-default \| {cell} \| {cell} \|", report)
    assert (tmp_path / "locomo-categories.png").read_bytes().startswith(b"\x89PNG")


def test_a_run_without_the_policy_says_the_comparison_is_missing(data_dir, counter, tmp_path):
    harness.run_named(["locomo"], ["bm25"], [1000], tmp_path, data_dir=data_dir, counter=counter, limit=1, max_cases=5,
                      plots=False)  # fmt: skip
    assert "`ctxledger-default` is not in this run" in (tmp_path / "report.md").read_text()
