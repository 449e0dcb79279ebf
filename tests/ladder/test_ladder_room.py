"""After selection: room for left-out error output, a user turn instead of a long role-order drop.

The reach of the ladder is tested in ``test_ladder_reach.py``.
"""

from __future__ import annotations

from ctxledger.assemble.room import ANCHOR_SHARE, anchor_user_turn, make_room_for_errors
from ctxledger.assemble.select import Option, SelectionItem, SelectionResult
from ctxledger.budget import BudgetLedger


def _option(rep: str, tokens: int, utility: float, errors: int = 0, kept: int | None = None) -> Option:
    detail = {} if rep == "verbatim" else {"error_lines": errors, "error_lines_kept": errors if kept is None else kept}
    return Option(rep, tokens, utility, (), None if rep == "verbatim" else rep, detail)


def _item(uid: str, seq: int, *options: Option, required: bool = False) -> SelectionItem:
    return SelectionItem(uid, seq, "operational", list(options), required)


def _selection(items, chosen: dict[str, int], budget: int) -> tuple[SelectionResult, BudgetLedger]:
    """A selection where item ``uid`` took its option number ``chosen[uid]``; the others were left out."""
    result, ledger = SelectionResult(), BudgetLedger(budget)
    for item in items:
        if item.unit_id in chosen:
            result.chosen[item.unit_id] = item.options[chosen[item.unit_id]]
            ledger.charge(item.context_class, result.chosen[item.unit_id].tokens)
        else:
            result.omitted[item.unit_id] = "budget"
    return result, ledger


def test_left_out_error_output_gets_in_by_shrinking_bulk():
    """An old failing run enters as an excerpt keeping its errors; a recent file listing shrinks to pay for it."""
    bulk = _item("listing", 9, _option("verbatim", 900, 0.5), _option("excerpt", 300, 0.45))
    failure = _item("failure", 2, _option("verbatim", 800, 0.3, 4), _option("excerpt", 250, 0.27, 4, 4))
    result, ledger = _selection([bulk, failure], {"listing": 0}, 1000)
    assert make_room_for_errors([bulk, failure], result, 1000, ledger) == ["failure"]
    assert result.chosen["listing"].representation == result.chosen["failure"].representation == "excerpt"
    assert "failure" not in result.omitted and ledger.used["operational"] == 550


def test_no_room_is_made_when_it_loses_utility_or_touches_required_units():
    """Shrinking costs more utility than the error output brings, or only a required unit could shrink: no change."""
    costly = _item("listing", 9, _option("verbatim", 900, 0.9), _option("excerpt", 300, 0.3))
    failure = _item("failure", 2, _option("verbatim", 800, 0.3, 4), _option("excerpt", 250, 0.27, 4, 4))
    result, ledger = _selection([costly, failure], {"listing": 0}, 1000)
    assert make_room_for_errors([costly, failure], result, 1000, ledger) == []
    required = _item("step", 9, _option("verbatim", 900, 0.5), _option("excerpt", 300, 0.45), required=True)
    result, ledger = _selection([required, failure], {"step": 0}, 1000)
    assert make_room_for_errors([required, failure], result, 1000, ledger) == []
    assert result.chosen["step"].representation == "verbatim"


def test_errors_are_never_shrunk_away_to_make_room():
    """A chosen error output may shrink only to a rung keeping all its error lines."""
    other = _item("other", 9, _option("verbatim", 900, 0.5, 3), _option("memory", 100, 0.2, 3, 1))
    failure = _item("failure", 2, _option("verbatim", 800, 0.3, 4), _option("excerpt", 250, 0.27, 4, 4))
    result, ledger = _selection([other, failure], {"other": 0}, 1000)
    assert make_room_for_errors([other, failure], result, 1000, ledger) == []
    assert result.chosen["other"].representation == "verbatim"


def _conversation(run_tokens: int):
    """A user turn, then tool exchanges; the exchanges were chosen (cheap rungs), the user turn left out."""
    user = _item("u1", 1, _option("verbatim", 50, 0.2))
    exchanges = [_item(f"x{i}", 2 + i, _option("verbatim", run_tokens, 0.3 + i / 100)) for i in range(3)]
    latest = _item("u2", 9, _option("verbatim", 50, 0.9), required=True)
    items = [user, *exchanges, latest]
    roles = {"u1": "user", "u2": "user", **{i.unit_id: "assistant" for i in exchanges}}
    return items, roles


def test_a_user_turn_is_admitted_rather_than_dropping_most_of_the_context():
    """Role order would drop three exchanges (most of the budget): the older user turn is admitted instead."""
    items, roles = _conversation(300)
    result, ledger = _selection(items, {"x0": 0, "x1": 0, "x2": 0, "u2": 0}, 1000)
    assert anchor_user_turn(items, result, 1000, ledger, roles) == "u1"
    assert set(result.chosen) == {"u1", "x0", "x1", "x2", "u2"}


def test_a_short_leading_run_is_left_to_role_order():
    """When the run is under ANCHOR_SHARE of the budget, recency-first selection stands (case B06)."""
    items, roles = _conversation(int(ANCHOR_SHARE * 1000 / 3) - 1)
    result, ledger = _selection(items, {"x0": 0, "x1": 0, "x2": 0, "u2": 0}, 1000)
    assert anchor_user_turn(items, result, 1000, ledger, roles) is None
    assert "u1" not in result.chosen
