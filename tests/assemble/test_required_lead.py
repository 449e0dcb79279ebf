"""A required non-user unit that leads the payload gets the user turn before it, displacing only what its room needs.

Generated histories of user and assistant messages, with generated costs, a required lead and other required
units, check the repair phase's anchor for a required lead: the newest user message before the lead at its
cheapest form; room made only from optional chosen units; each displaced unit needed (with any one of them back
the anchor no longer fits); the ledger charged what leaves and what enters, the anchor as required. When nothing
changes, even every optional chosen unit together leaves too little room.
"""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st
from role_units import role_units

from ctxledger.assemble.phases.plan import Plan
from ctxledger.assemble.phases.repair import _anchor_required_lead
from ctxledger.assemble.select import Option, SelectionItem
from ctxledger.budget import BudgetLedger


@st.composite
def _cases(draw):
    opening = draw(st.sampled_from(["user", "assistant"]))  # with a user turn first, every lead has an anchor
    roles = [opening, *draw(st.lists(st.sampled_from(["user", "assistant", "assistant"]), min_size=4, max_size=11))]
    units = role_units(roles)
    n = len(units)
    assistants = [k for k, u in enumerate(units) if u.role != "user"]
    if not assistants:
        return None
    cost = st.one_of(st.integers(1, 8), st.integers(20, 60))  # small units beside large ones
    costs = draw(st.lists(cost, min_size=n, max_size=n))
    cheap = draw(st.lists(st.integers(1, 60), min_size=n, max_size=n))  # a second form, cheaper or not
    lead = draw(st.sampled_from(assistants[: (len(assistants) + 1) // 2]))  # an early lead: units follow it
    later = [k for k in range(lead + 1, n) if draw(st.integers(0, 3))]  # most later units chosen
    chosen = [units[k] for k in sorted([lead, *later])]
    required = {chosen[0].id, *(u.id for u in chosen[1:] if draw(st.integers(0, 3)) == 0)}
    anchor = max((k for k in range(lead) if roles[k] == "user"), default=lead)
    short = min(costs[anchor], cheap[anchor])
    budget = sum(costs[k] for k in [lead, *later]) + draw(st.integers(0, short + 5))  # mostly room must be made
    return units, costs, cheap, chosen, required, budget


@settings(max_examples=300, deadline=None)
@given(_cases())
def test_a_required_lead_gets_the_user_turn_before_it_and_displaces_only_what_the_room_needs(case) -> None:
    if case is None:
        return
    units, costs, cheap, chosen, required, budget = case
    index = {u.id: k for k, u in enumerate(units)}
    items = [
        SelectionItem(
            u.id,
            u.seq,
            "conversation",
            [Option("verbatim", costs[k], 1.0, u.turns), Option("summary", cheap[k], 0.5, u.turns)],
        )
        for k, u in enumerate(units)
    ]
    options = {u.id: items[index[u.id]].options[0] for u in chosen}
    ledger = BudgetLedger(budget, {})
    for u in chosen:
        ledger.charge(u.context_class.value, options[u.id].tokens)
    used = sum(o.tokens for o in options.values())
    plan = Plan(decisions=[], omitted={}, required={uid: "unresolved" for uid in required})
    before_ids = dict(options)
    out = _anchor_required_lead(list(chosen), units, items, plan, options, budget, ledger)

    lead = chosen[0]
    before = [u for u in units if u.seq < lead.seq and u.role == "user"]
    optional = [u for u in chosen if u.id not in required]
    if out == chosen:  # nothing changed: no user turn before the lead, or no room even with every optional unit out
        assert options == before_ids and not plan.omitted
        if before:
            anchor_cost = min(cheap[index[before[-1].id]], costs[index[before[-1].id]])
            assert anchor_cost > budget - used + sum(options[u.id].tokens for u in optional)
        return
    anchor = before[-1]
    assert out == sorted([anchor, *(u for u in chosen if u.id in options)], key=lambda u: u.seq)
    assert options[anchor.id].tokens == min(cheap[index[anchor.id]], costs[index[anchor.id]])
    assert plan.required[anchor.id] == "turn_anchor"
    assert ledger.required == {anchor.context_class.value: options[anchor.id].tokens}  # charged as required
    displaced = [u for u in chosen if u not in out]
    assert all(u.id not in required for u in displaced)
    assert all(plan.omitted[u.id][:2] == ("budget", "role_order") for u in displaced)
    assert sum(ledger.used.values()) == sum(o.tokens for o in options.values()) <= budget
    room = budget - used + sum(before_ids[u.id].tokens for u in displaced)
    for unit in displaced:  # no more is displaced than the room needs: each one back leaves too little
        assert options[anchor.id].tokens > room - before_ids[unit.id].tokens


@settings(max_examples=100, deadline=None)
@given(_cases())
def test_an_anchor_the_selection_offers_in_no_form_changes_nothing(case) -> None:
    if case is None:
        return
    units, costs, _cheap, chosen, required, budget = case
    lead = chosen[0]
    before = [u for u in units if u.seq < lead.seq and u.role == "user"]
    offered = {u.id for u in units} - ({before[-1].id} if before else set())
    items = [
        SelectionItem(u.id, u.seq, "conversation", [Option("verbatim", costs[k], 1.0, u.turns)])
        for k, u in enumerate(units)
        if u.id in offered
    ]
    options = {u.id: Option("verbatim", costs[units.index(u)], 1.0, u.turns) for u in chosen}
    plan = Plan(decisions=[], omitted={}, required={uid: "unresolved" for uid in required})
    kept = dict(options)
    out = _anchor_required_lead(list(chosen), units, items, plan, options, budget, BudgetLedger(budget, {}))
    assert out == chosen and options == kept and not plan.omitted
