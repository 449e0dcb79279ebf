"""Fill the budget: whenever something is left out for budget, 95 % of B_dynamic is used or the manifest says why.

Histories are generated (hypothesis): user turns, assistant turns and tool exchanges whose outputs range from
a line to thousands of lines, under budgets from tight to roomy. The ladder's reach covers only the newest
units, so older large outputs are offered verbatim only; the fill phase must offer their cheaper rungs.
"""

from __future__ import annotations

from generated_histories import assemble_history, history, history_steps
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ctxledger.assemble.assembler import FILL_TARGET
from ctxledger.assemble.fill import fill_budget
from ctxledger.assemble.select import Option, SelectionItem, SelectionResult
from ctxledger.budget import BudgetLedger
from ctxledger.policy.base import ReasonCode

STEP = history_steps(400, 3_000, fewest=5)


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(steps=st.lists(STEP, min_size=8, max_size=40), window=st.integers(3_000, 40_000))
def test_something_left_out_for_budget_means_the_budget_is_used_or_the_manifest_says_why(steps, window):
    asm = assemble_history(*history(steps, "fill"), window)
    m = asm.manifest
    dynamic = m["ledger"]["dynamic_tokens"]
    used = sum(e["tokens"] for e in m["included"] if e["stage"] != "fixed")
    if m["omitted_by_reason"].get("budget", 0):
        assert used >= FILL_TARGET * dynamic or m["budget"]["fill"], (used, dynamic)
    if m["budget"]["fill"]:
        assert m["omitted_by_reason"].get("budget", 0) > 0
    assert used <= dynamic


def test_old_large_outputs_enter_at_a_cheaper_rung_when_the_budget_would_stay_empty():
    # forty large outputs, the newest of them far beyond what the budget holds: before the fill phase the
    # ladder's reach offered the older ones verbatim only, and most of B_dynamic stayed empty
    steps = [("tool", 2_500) for _ in range(40)]
    ledger, g = history(steps, "old-bulk")
    asm = ledger.assemble(
        g.conversation_id, window_tokens=24_000, output_tokens=500, margin_tokens=100, branch_id=g.branch_id
    )
    m = asm.manifest
    used = m["ledger"]["used_tokens"] - m["ledger"]["classes"].get("framing", {}).get("used", 0)
    representations = {e["representation"] for e in m["included"]}
    assert m["omitted_by_reason"].get("budget", 0) > 0
    assert used >= FILL_TARGET * m["ledger"]["dynamic_tokens"] or m["budget"]["fill"]
    assert representations - {"verbatim"}, "some output entered at a cheaper rung"


def _item(uid: str, seq: int, tokens: int, utility: float, cheaper: int | None) -> SelectionItem:
    options = [Option("verbatim", tokens, utility, ())]
    if cheaper is not None and cheaper < tokens:
        options.append(Option("excerpt", cheaper, utility / 2, ()))
    return SelectionItem(uid, seq, "conversation", options)


SIZE = st.tuples(st.integers(1, 300), st.floats(0.05, 1.0), st.none() | st.integers(1, 300))


@settings(max_examples=200, deadline=None)
@given(
    pairs=st.lists(st.tuples(SIZE, SIZE), min_size=1, max_size=6),
    loose=st.lists(SIZE, max_size=4),
    used=st.integers(0, 400),
    dynamic=st.integers(50, 1_200),
)
def test_fill_admits_half_of_a_question_answer_pair_only_with_the_other_half(pairs, loose, used, dynamic):
    items, partners = [], {}
    for k, (q, a) in enumerate(pairs):
        items += [_item(f"q{k}", 2 * k, *q), _item(f"a{k}", 2 * k + 1, *a)]
        partners[f"q{k}"], partners[f"a{k}"] = f"a{k}", f"q{k}"
    items += [_item(f"x{k}", 100 + k, *size) for k, size in enumerate(loose)]
    result = SelectionResult({"lead": Option("verbatim", used, 1.0, ())}, {i.unit_id: ReasonCode.BUDGET for i in items})
    ledger = BudgetLedger(dynamic)
    admitted = fill_budget(items, result, dynamic, ledger, lambda i: (), FILL_TARGET, partners=partners)
    for k in range(len(pairs)):
        assert (f"q{k}" in result.chosen) == (f"a{k}" in result.chosen), (k, admitted)
    assert sum(o.tokens for o in result.chosen.values()) <= max(dynamic, used)
    if len(pairs) == 1 and not loose and used < FILL_TARGET * dynamic:
        (q, a) = pairs[0]
        cheapest = min(q[0], q[2] or q[0]) + min(a[0], a[2] or a[0])
        assert ("q0" in result.chosen) == (cheapest <= dynamic - used)
