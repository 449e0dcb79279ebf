"""Ledger.compact after a compaction: twice in a row is "nothing new", after more turns it compacts again.

New-user report 3 item 7: the second ``compact()`` picked the first compaction's ``through_seq`` as its
boundary and then refused it as splitting the compaction just written.
"""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from ctxledger import Ledger
from ctxledger.errors import InputError
from ctxledger.records import Compaction

T0 = datetime(2026, 9, 1, 9, 0, tzinfo=UTC)


def _deploy(ledger: Ledger):
    r = ledger.recorder("deploy", clock=T0)
    r.system("You are a deploy bot.")
    r.user("Deploy service api to staging. Do not push to main.")
    for i in range(4):
        r.tool_call("run", {"cmd": f"make step-{i}"}, f"step {i}: ok\n" + "building module\n" * 20)
        r.assistant(f"Step {i} done.")
    r.user("Go on.")
    return r


def test_compacting_twice_in_a_row_says_there_is_nothing_new():
    """The second default compaction is refused cleanly, naming the first; nothing is written."""
    ledger = Ledger.open("memory://")
    _deploy(ledger)
    first = ledger.compact("deploy")
    head = ledger.store.head_seq("default", "deploy")
    with pytest.raises(InputError, match=f"nothing new to compact: {first.id} already covers") as caught:
        ledger.compact("deploy")
    assert caught.value.field == "through_seq" and "splits" not in str(caught.value)
    assert ledger.store.head_seq("default", "deploy") == head
    # an explicit boundary after the first compaction's history is no split of that compaction
    again = ledger.compact("deploy", through_seq=first.through_seq + 1)
    assert again.through_seq == first.through_seq + 1


def test_compacting_after_more_turns_covers_the_new_history_and_the_earlier_compaction():
    """New records before the latest user turn move the default boundary on; assembly still works."""
    ledger = Ledger.open("memory://")
    r = _deploy(ledger)
    first = ledger.compact("deploy")
    ex = r.tool_call("deploy", {"env": "staging"}, "deployed api@4f2c to staging\n")
    r.assistant("Deployed to staging.")
    r.user("Now run the smoke tests.")
    second = ledger.compact("deploy")
    assert second.through_seq > first.seq  # past the first compaction and up to the new exchange's reply
    assert first.id in second.source_ids and ex.artifact in second.source_ids
    asm = ledger.assemble("deploy", window_tokens=4000, output_tokens=300, now=r.now)
    included = {e["ref"]: e["reason"] for e in asm.manifest["included"]}
    assert included[second.id] == "active_compaction" and first.id not in included
    assert asm.payload["messages"][-1]["content"].endswith("Now run the smoke tests.")
    compactions = [x for x in ledger.store.records("default", "deploy") if isinstance(x, Compaction)]
    assert [c.id for c in compactions] == [first.id, second.id]
