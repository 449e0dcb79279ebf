"""Redundancy: repeated calls and near-duplicate outputs enter once, with a pointer; protected units never leave."""

from __future__ import annotations

import json

import pytest
from ladder_helpers import TAU, TAU_REPEATED

from ctxledger.ledger import Ledger
from ctxledger.testing import MemoryStore


def test_a_repeated_lookup_enters_once_with_a_pointer_to_the_kept_copy(tau):
    """tau-bench task 13: the first get_reservation_details(XEWRD9) leaves as redundant, pointing at the second."""
    asm = tau.assemble(TAU_REPEATED, persist=True)
    first, second = f"{TAU_REPEATED}/4", f"{TAU_REPEATED}/18"
    omitted = {e["ref"]: e for e in asm.manifest["omitted"]}
    included = {e["unit"] for e in asm.manifest["included"]}
    assert second in included
    for ref in (first, f"{TAU_REPEATED}/5", f"{TAU_REPEATED}/6"):  # the message, its call and its result
        assert (omitted[ref]["reason"], omitted[ref]["stage"]) == ("redundant", "redundancy")
        assert second in omitted[ref]["detail"]
    why = tau.explain(asm.id, f"{TAU_REPEATED}/6")
    assert why["status"] == "omitted" and any(second in line for line in why["chain"])


def test_redundant_units_are_only_ever_older_copies(tau):
    """Every pointer goes from an older unit to a newer, included one that is not itself redundant."""
    asm = tau.assemble(TAU_REPEATED, persist=False)
    seq = {e["unit"]: e["seq"] for e in asm.manifest["included"]}
    for decision in asm.manifest["decisions"]:
        if decision["stage"] != "redundancy":
            continue
        kept = decision["detail"].split("unit ")[1].split(" ")[0]
        assert kept in seq
        assert tau.store.get("default", decision["ref"]).seq < seq[kept]


def _lookup_twice(data_dir, *, tags: list[str]) -> list[dict]:
    """A conversation calling the same tool twice with tau-bench's real answer; the first call carries ``tags``."""
    traj = next(
        r["traj"]
        for r in json.loads((data_dir / TAU).read_text(encoding="utf-8"))
        if (r["task_id"], r["trial"]) == (13, 0)
    )
    answer = next(m["content"] for m in traj if m["role"] == "tool" and "XEWRD9" in m["content"])
    call = {
        "type": "function",
        "function": {"name": "get_reservation_details", "arguments": '{"reservation_id":"XEWRD9"}'},
    }
    return [
        {"role": "system", "content": traj[0]["content"][:400]},
        {"role": "user", "content": "Please look at reservation XEWRD9."},
        {"role": "assistant", "content": None, "tool_calls": [{**call, "id": "c1"}], "tags": tags},
        {"role": "tool", "tool_call_id": "c1", "content": answer},
        {"role": "assistant", "content": None, "tool_calls": [{**call, "id": "c2"}]},
        {"role": "tool", "tool_call_id": "c2", "content": answer},
        {"role": "assistant", "content": "It is a round trip in economy."},
        {"role": "user", "content": "Thanks."},
    ]


@pytest.mark.parametrize(("tags", "redundant"), [([], True), (["retry_critical"], False)])
def test_a_protected_copy_is_never_redundant(data_dir, tags, redundant):
    """The same lookup twice: the older copy is redundant, unless protection requires it (then it stays)."""
    ledger = Ledger(MemoryStore())
    ledger.import_messages(_lookup_twice(data_dir, tags=tags), conversation_id="twice")
    asm = ledger.assemble("twice", persist=False)
    reasons = {e["ref"]: e["reason"] for e in asm.manifest["omitted"]}
    assert (reasons.get("twice/2") == "redundant") is redundant
    included = {e["unit"] for e in asm.manifest["included"]}
    assert ("twice/2" in included) is (not redundant)
