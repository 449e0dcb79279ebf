"""A chosen assistant turn that would open the payload stays behind the user turn before it when room can be made.

Generated histories of user and assistant messages, with generated utilities and costs, check the anchor's rules
(the newest user message before the lead; room made only from lower-utility, displaceable units, each of them
needed; the anchor fits its room); one conversation checks the assembler keeps the answer a question asks for.
"""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st
from role_units import role_units

from ctxledger.assemble.lead import anchor_lead
from ctxledger.assemble.select import Option, SelectionItem
from ctxledger.budget import BudgetLedger
from ctxledger.ledger import Ledger
from ctxledger.scenarios._graph import GraphBuilder
from ctxledger.testing import MemoryStore


@st.composite
def _cases(draw):
    roles = draw(st.lists(st.sampled_from(["user", "assistant"]), min_size=2, max_size=12))
    units = role_units(roles)
    n = len(units)
    costs = draw(st.lists(st.integers(1, 60), min_size=n, max_size=n))
    utilities = draw(st.lists(st.floats(0, 1, allow_nan=False), min_size=n, max_size=n))
    assistants = [k for k, u in enumerate(units) if u.role != "user"]
    if not assistants:
        return None
    lead = draw(st.sampled_from(assistants))
    later = draw(st.lists(st.sampled_from(range(lead + 1, n)), unique=True) if lead + 1 < n else st.just([]))
    chosen = [units[k] for k in sorted([lead, *later])]
    keep = {u.id for u in chosen[1:] if draw(st.booleans())}
    chosen_cost = sum(costs[k] for k in [lead, *later])
    budget = max(0, chosen_cost + draw(st.integers(-120, 40)))  # mostly full: room must be made
    return units, costs, utilities, chosen, keep, budget


@settings(max_examples=200, deadline=None)
@given(_cases())
def test_the_anchor_is_the_user_turn_before_the_lead_and_displaces_only_weaker_units(case) -> None:
    if case is None:
        return
    units, costs, utilities, chosen, keep, budget = case
    index = {u.id: k for k, u in enumerate(units)}
    items = {
        u.id: SelectionItem(u.id, u.seq, "conversation", [Option("verbatim", costs[k], utilities[k], u.turns)])
        for k, u in enumerate(units)
    }
    options = {u.id: items[u.id].options[0] for u in chosen}
    used = sum(o.tokens for o in options.values())
    found = anchor_lead(chosen, units, items, options, budget, keep, BudgetLedger(budget, {}))
    lead = chosen[0]
    before = [u for u in units if u.seq < lead.seq and u.role == "user"]
    if found is None:
        if before:  # no room: even every displaceable weaker unit together leaves too little
            weaker = [u for u in chosen[1:] if u.id not in keep and utilities[index[u.id]] < utilities[index[lead.id]]]
            freed = sum(costs[index[u.id]] for u in weaker)
            assert costs[index[before[-1].id]] > budget - used + freed
        return
    assert found.unit is before[-1]
    assert all(u in chosen[1:] and u.id not in keep for u in found.displaced)
    assert all(utilities[index[u.id]] < utilities[index[lead.id]] for u in found.displaced)
    assert found.option.tokens <= budget - used + sum(options[u.id].tokens for u in found.displaced)
    room = budget - used + sum(options[u.id].tokens for u in found.displaced)
    for unit in found.displaced:  # no more is displaced than the room needs: each one back leaves too little
        assert found.option.tokens > room - options[unit.id].tokens


def test_the_answer_a_question_asks_for_stays_with_the_question_it_answered() -> None:
    ledger = Ledger(MemoryStore())
    g = GraphBuilder(ledger, "lead")
    g.user("u0", "Quick one before I forget, can you note something for me? " + "It is for the weekend trip. " * 6)
    g.assistant("a-key", "Noted: the vault combination is 4-8-15 and the vault opens at noon.")
    for i in range(8):
        g.user(f"u{i + 1}", f"Errand {i}: I walked past the old bank vault on Elm street again.")
        g.assistant(f"a{i + 1}", f"Reply {i}: good luck with the errands today.")
    g.user("last", "Thanks for all of that.")
    for window in (100, 110):
        asm = ledger.assemble(
            g.conversation_id, query="What is the vault combination?", now=g.now, window_tokens=window,
            output_tokens=0, margin_tokens=0, persist=False,
        )  # fmt: skip
        included = [e["external_id"] for e in asm.manifest["included"]]
        assert included[:2] == ["u0", "a-key"]
        assert asm.payload["messages"][0]["role"] == "user"
        assert sum(e["tokens"] for e in asm.manifest["included"]) <= asm.manifest["ledger"]["dynamic_tokens"]
