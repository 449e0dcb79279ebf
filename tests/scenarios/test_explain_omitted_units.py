"""Explaining an omitted record gives its unit, and the tokens and utility the call weighed for that unit.

A record left out for budget belongs to a unit the selection weighed (an option's tokens and utility) and left
out; its explanation must say which unit, and with what tokens and utility, the same under a summary (answered
by replay) and a full trace, and the same as the summary's ``notable_omissions``. A record the call never weighed
(beyond the budget's reach, or left out before the selection) has no tokens or utility, and a ``note`` says why.
"""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from ctxledger.ledger import Ledger
from ctxledger.scenarios._graph import GraphBuilder
from ctxledger.testing import MemoryStore

TURN = st.tuples(st.sampled_from(["user", "assistant", "tool"]), st.integers(1, 12))


@settings(max_examples=12, deadline=None)
@given(turns=st.lists(TURN, min_size=6, max_size=40), window=st.integers(900, 2_500))
def test_an_omitted_record_is_explained_with_its_unit_tokens_and_utility(turns, window):
    ledger = Ledger(MemoryStore())
    b = GraphBuilder(ledger, "omitted-units")
    b.system("sys", "You answer questions about the deployment.")
    for i, (kind, size) in enumerate(turns):
        text = f"Step {i}: the worker {i} retried the upload of batch {i}. " * size
        if kind == "tool":
            b.tool(f"t{i}", "read_log", {"batch": i}, text)
        else:
            getattr(b, kind)(f"{kind[0]}{i}", text)
    b.user("last", "Which batches failed?")
    request = {"window_tokens": window, "output_tokens": 200, "margin_tokens": 50, "branch_id": b.branch_id}
    summary = ledger.assemble(b.conversation_id, now=b.now, **request)
    full = ledger.assemble(b.conversation_id, now=b.now, trace="full", **request)
    notable = {e["ref"]: e for e in summary.persisted()["notable_omissions"]}
    by_unit: dict[str, tuple[int, float]] = {}
    for entry in full.manifest["omitted"]:
        why = ledger.explain(summary.id, entry["ref"])
        assert why == ledger.explain(full.id, entry["ref"])
        assert why["status"] == "omitted" and why["unit"] is not None, why
        if why["detail"].startswith("unit "):
            assert why["detail"].split()[1] == why["unit"]
        if why["reason"] == "budget" and why["stage"] == "selection":
            assert isinstance(why["tokens"], int) and why["tokens"] > 0
            assert isinstance(why["utility"], float)
            assert by_unit.setdefault(why["unit"], (why["tokens"], why["utility"])) == (why["tokens"], why["utility"])
            assert why["note"] is None
        if why["utility"] is None:
            assert why["tokens"] is None and why["note"]
            if why["reason"] == "budget (beyond reach)":
                assert why["note"].startswith("never visited")
        if why["ref"] in notable:
            assert notable[why["ref"]].get("utility") == why["utility"]
            assert notable[why["ref"]]["unit"] == why["unit"]
