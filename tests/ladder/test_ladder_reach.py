"""The reach of the ladder: a large recent output gets its cheaper rungs, never vanishes while budget is left.

New-user report 3, item 1: a tool output costing more than ``REACH`` input budgets used to exhaust the
reach on its own, so it (and everything older) got no excerpt, no extraction, no reference, and no
redundancy check: the whole exchange was dropped as ``budget`` with most of the budget unused. The output
here is real: mini-swe-agent's failing pytest run of ``test_sapm_series`` (pvlib-1072), whose
``E   AssertionError: Series are different`` line an excerpt must keep; the window is sized from its
measured cost so that it costs more than two input budgets.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

import pytest

from ctxledger import Ledger
from ctxledger.assemble.assembler import unit_turn_costs
from ctxledger.assemble.represent import REACH, REACH_MIN_UNITS, REACH_SHARE, reach

T0 = datetime(2026, 9, 1, 9, 0, tzinfo=UTC)
OUTPUT_TOKENS, MARGIN = 100, 200
ERROR = "E   AssertionError: Series are different"


@pytest.fixture(scope="module")
def failing_run(data_dir: Path) -> str:
    """The real output of the failing pytest run (message 107 of the pvlib-1072 trajectory)."""
    messages = json.loads((data_dir / "mini-swe-agent-deepseek/pvlib__pvlib-python-1072.traj.json").read_text())
    output = messages["messages"][107]["content"]
    assert ERROR in output and "1 failed" in output
    return str(output)


def _ledger(output: str, copies: int) -> tuple[Ledger, int]:
    """The report's shape: a goal, ``copies`` identical runs each answered, a new question; and its window.

    The window makes ``B_input`` a little less than half the run's verbatim cost, so one run alone costs
    more than ``REACH`` input budgets.
    """
    ledger = Ledger.open("memory://")
    r = ledger.recorder("c", clock=T0)
    r.system("You fix failing tests.")
    r.user("Find why test_sapm_series fails.")
    for k in range(copies):
        r.tool_call("bash", {"command": "pytest pvlib/tests/test_pvsystem.py -k sapm_series"}, output)
        r.assistant(f"Run {k}: the series differ.")
    r.user("So why does it fail?")
    snap = ledger.snapshots.load("default", "c", ledger.store.get("default", "c").branch_id)
    costs = unit_turn_costs(snap, ledger.coster("openai-chat", "gpt-4o"))
    run = max(sum(c) for c in costs)
    input_tokens = run // REACH - 50
    assert REACH * input_tokens < run
    return ledger, input_tokens + OUTPUT_TOKENS + MARGIN


def test_an_output_larger_than_the_reach_enters_as_an_excerpt_with_its_error(failing_run: str) -> None:
    """The run costs more than two input budgets; it still enters, as an excerpt keeping the error line."""
    ledger, window = _ledger(failing_run, 1)
    asm = ledger.assemble("c", window_tokens=window, output_tokens=OUTPUT_TOKENS, margin_tokens=MARGIN, persist=False)
    (art,) = [i for i in asm.manifest["included"] if i["kind"] == "tool_artifact"]
    assert art["representation"] == "excerpt"
    assert ERROR in json.dumps(asm.payload)
    assert "budget" not in asm.manifest["omitted_by_reason"]


def test_identical_large_outputs_enter_once_with_pointers(failing_run: str) -> None:
    """Four identical runs: the three older leave as redundant with a pointer to the newest, which enters."""
    ledger, window = _ledger(failing_run, 4)
    asm = ledger.assemble("c", window_tokens=window, output_tokens=OUTPUT_TOKENS, margin_tokens=MARGIN, persist=False)
    (art,) = [i for i in asm.manifest["included"] if i["kind"] == "tool_artifact"]
    redundant = [o for o in asm.manifest["omitted"] if o["reason"] == "redundant" and o["kind"] == "tool_artifact"]
    assert len(redundant) == 3
    assert all(o["detail"] == f"same tool output as unit {art['unit']} (kept)" for o in redundant)
    assert json.dumps(asm.payload).count(ERROR) == 1


def test_a_unit_counts_at_most_a_share_of_the_budget_and_the_newest_are_always_in(swe) -> None:
    """reach(): capped costs add up to at most REACH budgets, past the newest K units that are always in."""
    ledger, cid = swe
    snap = ledger.snapshots.load("default", cid, ledger.store.get("default", cid).branch_id)
    costs = [sum(c) for c in unit_turn_costs(snap, ledger.coster("openai-chat", "gpt-4o"))]
    for budget in (200, 1000, 4000):
        cap = budget // REACH_SHARE
        inside = reach(snap.units, [[c] for c in costs], budget)
        first = min(i for i, u in enumerate(snap.units) if u.id in inside)
        assert {u.id for u in snap.units[first:]} == inside  # a contiguous run of the newest units
        assert len(inside) >= REACH_MIN_UNITS
        capped = [min(c, cap) for c in costs[first:]]
        assert sum(capped) <= REACH * budget or len(inside) == REACH_MIN_UNITS
        if first > 0 and len(inside) > REACH_MIN_UNITS:
            assert sum(capped) + min(costs[first - 1], cap) > REACH * budget  # it stops where the budget ends
    huge = [[10**6]] * len(snap.units)
    assert len(reach(snap.units, huge, 1000)) == REACH_MIN_UNITS  # huge units: the newest K, not the history
