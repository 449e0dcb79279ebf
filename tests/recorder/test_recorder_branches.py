"""Recorder.branch forks from the branch the recorder is on, only after a record that branch sees; shared needs whom."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from ctxledger import Ledger, Recorder
from ctxledger.errors import InputError, RecordNotFound
from ctxledger.records import Branch
from ctxledger.testing import MemoryStore

START = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)


def _rec() -> tuple[Ledger, Recorder]:
    ledger = Ledger(MemoryStore())
    return ledger, ledger.recorder("c", clock=START)


def _fates(ledger: Ledger, branch: str) -> dict[str, str]:
    asm = ledger.assemble("c", branch_id=branch, window_tokens=4000, output_tokens=100, now=START.replace(hour=13))
    fates = {o["ref"]: o["reason"] for o in asm.manifest["omitted"]}
    fates.update({i["ref"]: "included" for i in asm.manifest["included"]})
    return fates


def test_a_branch_forks_from_the_branch_the_recorder_is_on():
    """Forking on branch b after a record of b nests the new branch in b: that record is in its context."""
    ledger, rec = _rec()
    rec.system("Be brief.")
    fork = rec.user("on main")
    b = rec.branch("b", fork_after=fork)
    only_b = rec.assistant("only on b")
    last = rec.user("last on b before bb")
    bb = rec.branch("bb", fork_after=last)
    rec.user("on bb")
    branch = ledger.store.get("default", bb)
    assert isinstance(branch, Branch) and branch.parent_branch_id == b and branch.fork_seq == rec.seq(last)
    fates = _fates(ledger, bb)
    assert fates[last] == fates[only_b] == fates[fork] == "included"


def test_parent_overrides_the_current_branch():
    """parent= forks elsewhere: on b, parent=main makes a sibling of b that does not see b's records."""
    ledger, rec = _rec()
    rec.system("Be brief.")
    fork = rec.user("on main")
    b = rec.branch("b", fork_after=fork)
    on_b = rec.assistant("only on b")
    sib = rec.branch("sib", fork_after=fork, parent=rec.main)
    rec.user("on sib")
    assert ledger.store.get("default", sib).parent_branch_id == "c/main"
    assert _fates(ledger, sib)[on_b] == "not_in_lineage"
    assert b != sib


@pytest.mark.parametrize("where", ["sibling", "after_fork"])
def test_fork_after_outside_the_parents_lineage_is_refused(where):
    """A record of a sibling branch, or of the parent's parent after the parent's fork point, is no fork point."""
    ledger, rec = _rec()
    fork = rec.user("on main")
    b = rec.branch("b", fork_after=fork)
    on_b = rec.user("on b")
    rec.on("main")
    late_main = rec.user("on main after b forked")
    if where == "sibling":  # on main, forking after b's record
        call, bad, parent = (lambda: rec.branch("x", fork_after=on_b)), on_b, "c/main"
    else:  # from b, after a main record b does not inherit
        call, bad, parent = (lambda: rec.branch("x", fork_after=late_main, parent=b)), late_main, b
    with pytest.raises(InputError) as info:
        call()
    assert info.value.field == "fork_after" and info.value.source == "c/x"
    message = str(info.value)
    assert f"{bad} (seq {rec.seq(bad)}" in message and f"not in the lineage of the parent branch {parent}" in message
    with pytest.raises(RecordNotFound):  # nothing was written
        ledger.store.branch("default", "c/x")


def test_fork_after_an_inherited_record_of_the_parent_is_accepted():
    """A record the parent inherits (before its own fork point) is a valid fork point for a child of it."""
    ledger, rec = _rec()
    early = rec.user("early on main")
    b = rec.branch("b", fork_after=rec.user("fork point"))
    child = rec.branch("child", fork_after=early)
    assert ledger.store.get("default", child).parent_branch_id == b


def test_shared_without_shared_with_is_refused_naming_shared_with():
    """visibility='shared' with nobody to share with would hide the record from everyone: an InputError."""
    _, rec = _rec()
    rec.participant("lead")
    with pytest.raises(InputError) as info:
        rec.memory("nobody sees this", visibility="shared")
    assert info.value.field == "shared_with" and "shared_with" in str(info.value)
    assert rec.memory("shared", visibility="shared", shared_with=["lead"])  # with whom: accepted
