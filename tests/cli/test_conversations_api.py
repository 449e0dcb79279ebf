"""``Ledger.conversations`` lists what ``ctxledger conversations`` shows: every conversation with its events."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from ctxledger import Ledger

_ids = st.lists(st.from_regex(r"[a-z][a-z0-9-]{0,12}", fullmatch=True), min_size=1, max_size=4, unique=True)


@settings(max_examples=15, deadline=None)
@given(_ids, st.lists(st.integers(1, 4), min_size=4, max_size=4))
def test_every_conversation_is_listed_oldest_first_with_its_events(ids: list[str], turns: list[int]) -> None:
    ledger = Ledger.open("memory://")
    for cid, n in zip(ids, turns, strict=False):
        rec = ledger.recorder(cid)
        for k in range(n):
            rec.user(f"turn {k}")
    listed = ledger.conversations()
    assert [c.id for c in listed] == ids
    for c in listed:
        assert c.events == ledger.store.head_seq("default", c.id) > 0
    assert ledger.conversations("another-tenant") == []
