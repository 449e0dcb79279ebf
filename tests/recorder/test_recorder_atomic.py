"""``Recorder.atomic``: the records of a block are stored in one transaction, or not at all."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ctxledger import Ledger
from ctxledger.errors import InputError
from ctxledger.records import Conversation
from ctxledger.testing import MemoryStore

STEPS = st.lists(st.sampled_from(["user", "assistant", "call", "result"]), min_size=1, max_size=8)


def _write(rec, steps: list[str], fail_at: int | None) -> list[str]:
    out, calls = [], []
    for i, step in enumerate(steps):
        if i == fail_at:
            rec.user("")  # refused: a message needs text
        if step == "call":
            ex = rec.tool_call("lookup", {"i": i})
            calls.append(ex.call)
            out += [ex.message, ex.call]
        elif step == "result" and calls:
            out.append(rec.tool_result(calls.pop(), f"result {i}"))
        else:
            out.append(getattr(rec, "assistant" if step == "assistant" else "user")(f"turn {i}"))
    return out


@settings(max_examples=30, deadline=None)
@given(steps=STEPS, fail=st.booleans(), data=st.data(), new=st.booleans())
def test_a_block_is_stored_whole_with_consecutive_seqs_or_not_at_all(steps, fail, data, new) -> None:
    ledger = Ledger(MemoryStore())
    if not new:
        ledger.recorder("c").user("before")
    head = ledger.store.head_seq("default", "c")
    rec = ledger.recorder("c", create=False)
    fail_at = data.draw(st.integers(0, len(steps) - 1)) if fail else None
    if fail_at is not None:
        with pytest.raises(InputError):
            rec.atomic(lambda r: _write(r, steps, fail_at))
        assert ledger.store.head_seq("default", "c") == head  # nothing, not even a new conversation
        assert ledger.store.conversations("default") == ([] if new else ["c"])
        written = rec.atomic(lambda r: _write(r, steps, None))  # the recorder forgot the failed block
    else:
        written = rec.atomic(lambda r: _write(r, steps, None))
    stored = ledger.store.records("default", "c")
    new_ones = [r for r in stored if r.seq > head and not isinstance(r, Conversation) and r.kind.value != "branch"]
    assert [r.id for r in new_ones] == written
    seqs = [r.seq for r in new_ones]
    assert seqs == list(range(seqs[0], seqs[0] + len(seqs)))


def test_another_writers_numbers_are_skipped_and_the_block_written_again() -> None:
    ledger = Ledger(MemoryStore())
    mine, theirs = ledger.recorder("c"), ledger.recorder("c")
    runs = []

    def block(rec) -> list[str]:
        runs.append(1)
        if len(runs) == 1:
            theirs.user("taken first")  # takes the number this block chose
        return [rec.user("mine a"), rec.user("mine b")]

    ids = mine.atomic(block)
    assert len(runs) == 2 and len(set(ids)) == 2
    texts = [r.content for r in ledger.store.records("default", "c") if getattr(r, "content", None)]
    assert texts == ["taken first", "mine a", "mine b"]
