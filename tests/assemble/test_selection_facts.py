"""Selection's per-unit facts kept on the memo: each unit's verbatim size follows the turn costs it is given."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st
from tests.assemble.role_units import role_units

from ctxledger.assemble.phases.select import _kind_prior, _unit_facts


@given(roles=st.lists(st.sampled_from(["user", "assistant"]), min_size=1, max_size=8), data=st.data())
def test_a_units_facts_follow_its_costs_across_calls(roles: list[str], data: st.DataObject) -> None:
    units = role_units(roles)
    table: dict = {}
    for _ in range(3):  # the same unit objects, each call with costs that may be other tuples or the same ones
        costs = {u.id: data.draw(st.tuples(st.integers(0, 10_000))) for u in units}
        facts = _unit_facts(units, costs, table)
        for unit, (prior, class_name, turn_costs, total) in zip(units, facts, strict=True):
            assert prior == _kind_prior(unit)
            assert class_name == unit.context_class.value
            assert turn_costs is costs[unit.id]
            assert total == sum(costs[unit.id])


@given(roles=st.lists(st.sampled_from(["user", "assistant"]), min_size=1, max_size=6))
def test_a_rebuilt_unit_gets_its_own_facts(roles: list[str]) -> None:
    table: dict = {}
    costs = {u.id: (7,) for u in role_units(roles)}
    first = _unit_facts(role_units(roles), costs, table)
    again = role_units(["user"] * len(roles))  # new objects under the same ids, maybe of other roles
    assert [f[0] for f in _unit_facts(again, costs, table)] == [_kind_prior(u) for u in again]
    assert [f[3] for f in first] == [7] * len(roles)
