"""compact() never launders superseded or stale records into its summary.

The compaction judges its sources with the policy's own validity stage at its clock: a superseded memory or
one the policy omits as stale is not summarised and stays in the history (each assembly then says why it is
left out); one the policy marks stale is summarised with a verbatim stale flag and the revalidation hint.
"""

from __future__ import annotations

import dataclasses
import json
from datetime import UTC, datetime, timedelta

import pytest

from ctxledger import Ledger
from ctxledger.errors import CompactionRefused
from ctxledger.represent.compaction import compact

T0 = datetime(2026, 9, 1, tzinfo=UTC)
LATER = datetime(2026, 9, 2, tzinfo=UTC)


def _asm(ledger: Ledger, conv: str, **kw):
    return ledger.assemble(conv, window_tokens=8000, output_tokens=500, now=LATER, **kw)


def test_a_superseded_memory_is_not_copied_into_the_compaction():
    """comp_super.py: the old price leaves the summary; the new one is in it; assembly omits the old as superseded."""
    ledger = Ledger.open("memory://")
    r = ledger.recorder("sup", clock=T0)
    r.system("sys")
    r.user("Plan the launch")
    old = r.memory("OLDMEM price is 10 EUR")
    r.assistant("noted")
    new = r.memory("NEWMEM price is 12 EUR", supersedes=[old])
    r.user("continue")
    r.assistant("ok")
    comp = ledger.compact("sup", now=LATER)
    assert "OLDMEM" not in comp.text and "NEWMEM price is 12 EUR" in comp.text
    assert old not in comp.source_ids and new in comp.source_ids
    left = comp.meta["validity"]["left_out"]
    assert left == [{"ref": old, "reason": "superseded", "detail": f"superseded by {new}"}]
    r.refresh()
    r.user("What is the price?")
    asm = _asm(ledger, "sup")
    assert "OLDMEM" not in json.dumps(asm.payload)
    assert ledger.explain(asm.id, old)["reason"] == "superseded"
    assert ledger.explain(asm.id, comp.id)["status"] == "included"


def _stale_run(ledger: Ledger, freshness: str, **memory_kw):
    r = ledger.recorder("st", clock=T0)
    r.system("sys")
    r.user("GOAL plan the launch")
    mem = r.memory(
        "STALEMEM rates fetched",
        freshness=freshness,
        stale_after=T0 + timedelta(seconds=5),
        **memory_kw,
    )
    r.assistant("ok")
    r.user("continue")
    r.assistant("working")
    r.user("next?")
    return r, mem


def test_a_memory_the_policy_omits_as_stale_is_left_out_at_the_compactions_clock():
    """launder.py: a volatile memory stale when compact() runs is not in the summary; assembly omits it as stale."""
    ledger = Ledger.open("memory://")
    r, mem = _stale_run(ledger, "volatile")
    comp = ledger.compact("st", now=LATER)
    assert "STALEMEM" not in comp.text and mem not in comp.source_ids
    assert comp.meta["validity"]["now"] == LATER.isoformat()
    assert [e["reason"] for e in comp.meta["validity"]["left_out"]] == ["stale"]
    r.refresh()
    r.user("final question")
    asm = _asm(ledger, "st")
    assert "STALEMEM" not in json.dumps(asm.payload)
    assert ledger.explain(asm.id, mem)["reason"] == "stale"


def test_the_same_memory_is_summarised_when_the_compactions_clock_is_before_its_stale_after():
    """The clock decides: compacted while still fresh, the memory is evidence, unflagged."""
    ledger = Ledger.open("memory://")
    _stale_run(ledger, "volatile")
    comp = ledger.compact("st", now=T0 + timedelta(seconds=1))
    assert "STALEMEM rates fetched" in comp.text and "[stale]" not in comp.text and "is stale:" not in comp.text
    assert comp.meta["validity"]["left_out"] == []


def test_a_memory_the_policy_marks_stale_is_summarised_with_a_verbatim_flag_and_revalidation_hint():
    """A bounded memory (stale action ``mark``) stays, flagged; a compactor that drops the flag is refused."""
    ledger = Ledger.open("memory://")
    _, mem = _stale_run(ledger, "bounded", revalidation_tool="fetch_rates")

    def forgetful(records, **kw):
        out = compact(records, **kw)
        return dataclasses.replace(out, text="\n".join(x for x in out.text.splitlines() if "is stale:" not in x))

    with pytest.raises(CompactionRefused):
        ledger.compact("st", now=LATER, compactor=forgetful)
    comp = ledger.compact("st", now=LATER)
    assert f"memory {mem} [stale]: STALEMEM rates fetched" in comp.text
    since = (T0 + timedelta(seconds=5)).isoformat()
    flag = f"- [{mem}] {mem} is stale: stale since {since}; revalidate with fetch_rates"
    assert flag in comp.text.splitlines()
    assert comp.body["stale"][0]["record_id"] == mem


def test_a_checkpoint_without_through_is_not_described_as_through_seq_0():
    """The current state names the checkpoint's own seq when it records no through_seq."""
    ledger = Ledger.open("memory://")
    r = ledger.recorder("cp", clock=T0)
    r.system("sys")
    r.user("Plan the launch")
    r.tool_call("db", {"q": 1}, "rows")
    cp = r.checkpoint("run1", {"step": 2})
    r.user("next?")
    comp = ledger.compact("cp", now=LATER)
    seq = ledger.store.get("default", cp).seq
    assert "through seq 0" not in comp.text
    assert f"checkpoint {cp} of run run1 at seq {seq}" in comp.text
