"""The evaluation goals are checked from a run's aggregates, and missing evidence is never a pass."""

from __future__ import annotations

from types import SimpleNamespace

from hypothesis import given, settings
from hypothesis import strategies as st

from ctxledger.eval.goals import checks_markdown, goal_checks


def _agg(selector, dataset, budget, *, recall=None, violations=0, overflow=0.0, p50=1.0):
    """A minimal aggregate with the keys the goal checks read."""
    return {
        "selector": selector,
        "dataset": dataset,
        "budget": budget,
        "cases": 10,
        "recall": recall,
        "recall_by_category": {"4-single-hop": recall},
        "violations": violations,
        "overflow_rate": overflow,
        "latency_ms": {"p50": p50},
    }


def test_violations_overflows_and_latency_are_checked_over_every_dataset() -> None:
    """One violation anywhere fails the rule goal; an overflow fails the budget goal; slower than trim fails latency."""
    aggregates = [
        _agg("ctxledger-default", "tau-bench", 4000, violations=1, p50=5.0),
        _agg("ctxledger-default", "swe-agent", 4000, overflow=0.01, p50=2.0),
        _agg("langchain-trim-exact", "tau-bench", 4000, p50=0.5),
        _agg("langchain-trim-exact", "swe-agent", 4000, p50=3.0),
    ]
    rules, budget, latency = goal_checks(aggregates)
    assert (rules.met, budget.met, latency.met) == (False, False, False)
    assert "tau-bench at 4000 tokens: 5.00 ms against 0.50 ms" in latency.measured


def test_goals_the_run_cannot_check_are_not_met_but_unchecked() -> None:
    """Without the peer, the latency goal is 'not in this run' (met is None), never a pass."""
    checks = goal_checks([_agg("ctxledger-default", "tau-bench", 4000)])
    assert [c.met for c in checks] == [True, True, None]
    assert goal_checks([])[-1].measured == "not in this run"


def test_a_run_that_sent_no_payload_proves_no_rule_or_budget_goal() -> None:
    """At a budget below the required blocks every call is refused (overflow rate n/a): not a pass, and a cell
    that sent nothing does not dilute the others."""
    refused = _agg("ctxledger-default", "locomo", 1, overflow=None)
    rules, budget = goal_checks([refused])[0:2]
    assert (rules.met, budget.met) == (None, None) and "no payload sent" in budget.measured
    rules, budget = goal_checks([refused, _agg("ctxledger-default", "tau-bench", 4000, overflow=0.02)])[0:2]
    assert budget.met is False and "1 dataset × budget cells sent no payload" in budget.measured


def test_markdown_lists_goals_scenarios_and_cases() -> None:
    """The report sections name every goal, scenario and case with pass/fail."""
    scenario = SimpleNamespace(
        name="branch-isolation", passed=True, failures=[], replay_tokens=10, assembled_tokens=4, required_kept=2,
        required_total=2,
    )  # fmt: skip
    case = SimpleNamespace(case_id="B15", kind="empty", passed=False, failures=("payload is empty",), input_tokens=None)
    text = checks_markdown(goal_checks([]), [scenario], [case])
    assert "## Goals" in text and "| branch-isolation | 10 | 4 | 2/2 | pass |" in text
    assert "| B15 | empty | refused | **fail**: payload is empty |" in text
    assert "_not run_" in checks_markdown([], [], [])


def _locomo(dataset, budget, recall, categories, cpu_p50):
    return {
        **_agg("ctxledger-default", dataset, budget, recall=recall),
        "recall_by_category": categories,
        "latency_ms": {"p50": 30.0, "cpu_p50": cpu_p50},
    }


def test_held_out_goals_check_recall_every_category_and_cpu_time() -> None:
    """0.86 at 2k meets 0.85, 0.94 at 8k misses 0.95; a category under 0.70 and 12 ms of CPU fail, adversarial aside."""
    cats = {"1-multi-hop": 0.65, "4-single-hop": 0.95, "5-adversarial": 0.1}
    from ctxledger.eval.goals import held_out_checks

    checks = held_out_checks(
        [_locomo("locomo", 2000, 0.86, cats, 12.0), _locomo("locomo-memory", 8000, 0.94, {"4-single-hop": 0.99}, 8.0)]
    )
    assert [c.met for c in checks] == [True, False, False, False]
    assert "locomo-memory 0.940" in checks[1].measured
    assert "1-multi-hop 0.650" in checks[2].measured and "adversarial" not in checks[2].measured
    assert "locomo at 2000: 12.0 ms" in checks[3].measured
    assert [c.met for c in held_out_checks([])] == [None, None, None, None]


@settings(max_examples=30, deadline=None)
@given(ids=st.lists(st.from_regex(r"conv-[0-9]{1,2}", fullmatch=True), min_size=1, max_size=9, unique=True))
def test_locomo_goals_name_the_conversations_they_are_judged_on(ids) -> None:
    """Never "held-out" for whatever conversations the run read: each goal names them, and says they are no split."""
    from ctxledger.eval.goals import conversations_of, held_out_checks

    rows = [SimpleNamespace(dataset="locomo", case_id=f"{cid}/q{k}") for cid in ids for k in (1, 2)]
    rows.append(SimpleNamespace(dataset="tau-bench", case_id="task1/trial0@3"))
    judged = conversations_of(rows)
    assert judged == {"locomo": ids}
    checks = held_out_checks([_locomo("locomo", 2000, 0.9, {}, 5.0)], conversations=judged)
    for check in checks:
        assert "held-out goal" not in check.goal and "not a held-out split" in check.goal
        assert f"{len(ids)} conversation" in check.goal and ids[0] in check.goal and ids[-1] in check.goal
    assert "CPU" in checks[-1].goal and "ms CPU" in checks[-1].measured
    unnamed = held_out_checks([_locomo("locomo", 2000, 0.9, {}, 5.0)])
    assert all("this run's LoCoMo conversations" in c.goal for c in unnamed)
