"""``assemble(branch_id=...)`` naming a branch of another conversation is refused naming ``branch_id``, instead
of assembling an empty lineage and answering "nothing to send"."""

from __future__ import annotations

import pytest

from ctxledger import Ledger
from ctxledger.errors import InputError, RecordNotFound


def test_a_branch_of_another_conversation_is_refused_naming_it() -> None:
    ledger = Ledger.open("memory://")
    ledger.recorder("a").user("hi a")
    other = ledger.recorder("b")
    other.user("hi b")
    alt = other.branch("alt", fork_after=other.main)
    for branch in ("b/main", alt):
        with pytest.raises(InputError) as caught:
            ledger.assemble("a", branch_id=branch, window_tokens=4000, output_tokens=100)
        assert caught.value.field == "branch_id"
        assert "conversation 'b'" in str(caught.value)
    with pytest.raises(RecordNotFound):
        ledger.assemble("a", branch_id="nope", window_tokens=4000, output_tokens=100)
    assert ledger.assemble("a", branch_id="a/main", window_tokens=4000, output_tokens=100).payload["messages"]
