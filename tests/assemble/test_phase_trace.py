"""The phases of one assembly hand each other typed results that agree with one another and with the manifest.

Histories are generated (hypothesis): user turns, assistant turns and tool exchanges of many sizes under budgets
from tight to roomy, so the reach, the filters, selection, the repairs and fill all take part.
"""

from __future__ import annotations

from generated_histories import assemble_history, history, history_steps
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ctxledger.assemble.assembler import PhaseTrace

STEP = history_steps(300, 2_000, 50, fewest=3)


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(steps=st.lists(STEP, min_size=3, max_size=30), window=st.integers(4_000, 40_000))
def test_each_phase_receives_what_the_previous_one_returned(steps, window):
    asm = assemble_history(*history(steps, "phases"), window)
    trace = asm.phases
    assert isinstance(trace, PhaseTrace)
    filtered, budgeted, selected, repaired = trace.filtered, trace.budgeted, trace.selected, trace.repaired
    live = {u.id for u in filtered.units}
    # the filter phase's live units are among the visited ones that render to something
    assert live <= {u.id for u in filtered.all_units}
    assert {u.id for u in repaired.chosen} <= live
    # the budget phase costs exactly the live units; B_dynamic is what F leaves of B_input
    assert set(budgeted.costs) == live
    assert budgeted.dynamic == asm.manifest["ledger"]["dynamic_tokens"]
    # selection offered every live dynamic unit once; repair's chosen units are the selection's chosen options
    offered = [i.unit_id for i in selected.items]
    assert len(offered) == len(set(offered))
    assert set(offered) == live - {u.id for u in budgeted.fixed}
    assert {u.id for u in repaired.chosen} == set(selected.result.chosen)
    assert [u.seq for u in repaired.chosen] == sorted(u.seq for u in repaired.chosen)
    assert sum(o.tokens for o in selected.result.chosen.values()) <= budgeted.dynamic
    # what was serialized is the fixed units then the chosen ones, and it is what the assembly returns
    serialized = trace.serialized
    expected = [t.ref for u in budgeted.fixed for t in u.turns] + [
        t.ref for u in repaired.chosen for t in selected.result.chosen[u.id].turns
    ]
    assert [t.ref for t in serialized.turns] == expected == asm.turn_refs
    assert serialized.payload is asm.payload and serialized.payload_hash == asm.payload_hash
    # the manifest lists exactly the records the repaired selection and the fixed blocks sent
    included = {e["ref"] for e in asm.manifest["included"]}
    sent = {rid for u in (*budgeted.fixed, *repaired.chosen) for rid in u.record_ids}
    assert included == sent
    assert not included & set(filtered.plan.omitted)
