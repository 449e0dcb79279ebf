"""The ladder's rungs kept in the store: a new process reads what an earlier one built, and the result is the same.

Every scenario graph is assembled by one ledger (which builds the rungs and keeps them in the store), then by a
new ledger on the same store (which must read them instead of building them): payload and manifest must be
equal. Rungs round-trip through their stored form whatever they hold, a body that does not decode is built
again, and retention drops a conversation's rungs when it removes or rewrites one of its records.
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from sqlalchemy import select

from ctxledger.assemble import represent
from ctxledger.assemble.rung_memo import Rung, decode_rungs, encode_rungs
from ctxledger.hashing import canonical_json
from ctxledger.ledger import Ledger
from ctxledger.scenarios._graph import GraphBuilder
from ctxledger.scenarios.catalog import SCENARIOS
from ctxledger.scenarios.runner import DEFAULT_REQUEST
from ctxledger.serialize.base import CallView, Turn
from ctxledger.store.base import GraphStore
from ctxledger.store.schema import rung_memo
from ctxledger.testing import MemoryStore

_VOLATILE = ("id", "created_at", "timings")


def _stable(asm: Any) -> str:
    return canonical_json({k: v for k, v in asm.manifest.items() if k not in _VOLATILE})


def _count_builds(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Count the ladder's rung builds (``Ladder._rungs`` wrapped); the list's one item is the count."""
    built = [0]
    inner = represent.Ladder._rungs

    def counted(ladder: Any, *args: Any) -> Any:
        built[0] += 1
        return inner(ladder, *args)

    monkeypatch.setattr(represent.Ladder, "_rungs", counted)
    return built


def _scenario(scenario: Any, store: GraphStore) -> tuple[Ledger, GraphBuilder, dict[str, Any]]:
    ledger = Ledger(store, policy=scenario.policy() if scenario.policy else None)
    builder = GraphBuilder(ledger, scenario.name)
    request = {**DEFAULT_REQUEST, "now": None, **scenario.build(builder)}
    if request["now"] is None:
        request["now"] = builder.now
    request.setdefault("branch_id", builder.branch_id)
    return ledger, builder, request


@pytest.mark.parametrize("scenario", SCENARIOS, ids=[s.name for s in SCENARIOS])
def test_a_new_ledger_reads_the_rungs_and_assembles_the_same(scenario: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    store = MemoryStore()
    first, builder, request = _scenario(scenario, store)
    counting = _count_builds(monkeypatch)
    before = first.assemble(builder.conversation_id, persist=False, **request)
    built = counting[0]
    kept = sum(len(t.rungs) for t in store._tenants.values())
    assert kept == built
    second = Ledger(store, policy=scenario.policy() if scenario.policy else None)
    after = second.assemble(builder.conversation_id, persist=False, **request)
    assert counting[0] == built  # nothing built again: every rung came from the store
    assert after.payload_hash == before.payload_hash
    if "compaction" not in scenario.name:  # a compaction built during the call gets a new id each time
        assert _stable(after) == _stable(before)


_TEXT = st.text(max_size=40)
_JSON = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**40), 2**40) | _TEXT,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(_TEXT, inner, max_size=3),
    max_leaves=8,
)
_TURNS = st.builds(
    Turn,
    ref=_TEXT,
    role=st.sampled_from(["user", "assistant", "tool", "system"]),
    content=st.none() | _TEXT | st.tuples(st.fixed_dictionaries({"type": st.just("text"), "text": _TEXT})),
    name=st.none() | _TEXT,
    tool_calls=st.lists(st.builds(CallView, _TEXT, _TEXT, _TEXT), max_size=2).map(tuple),
    tool_call_id=st.none() | _TEXT,
    is_error=st.booleans(),
    relayed=st.booleans(),
    thinking=st.lists(
        st.tuples(st.none() | st.integers(0, 5), st.dictionaries(_TEXT, _TEXT, max_size=2)), max_size=2
    ).map(tuple),
)
_RUNGS = st.builds(
    Rung,
    representation=st.sampled_from(["excerpt", "extraction", "memory", "reference"]),
    transform=_TEXT,
    factor=st.floats(0, 1),
    turns=st.lists(_TURNS, max_size=3).map(tuple),
    turn_tokens=st.lists(st.integers(0, 10**6), max_size=3).map(tuple),
    detail=st.dictionaries(_TEXT, _JSON, max_size=3),
    derived=st.dictionaries(_TEXT, st.integers(0, 10**6), max_size=2),
)


@settings(max_examples=80, deadline=None)
@given(rungs=st.lists(_RUNGS, max_size=4))
def test_rungs_come_back_from_their_stored_form_unchanged(rungs: list[Rung]) -> None:
    assert decode_rungs(encode_rungs(rungs)) == rungs


@given(body=st.binary(max_size=64))
def test_a_body_that_is_not_rungs_reads_as_absent(body: bytes) -> None:
    decoded = decode_rungs(body)
    assert decoded is None or all(isinstance(r, Rung) for r in decoded)


def _long_tool_history(ledger: Ledger, name: str) -> GraphBuilder:
    g = GraphBuilder(ledger, name)
    g.system("sys", "You fix failing builds.")
    g.user("u1", "Why does the build fail?")
    log = "".join(f"step {i}: compiling module_{i}.c ok\n" for i in range(400)) + "error: linker failed: -lssl\n"
    g.tool("build", "shell", {"cmd": "make"}, log)
    g.user("u2", "And now?")
    return g


def test_retention_drops_the_rungs_of_the_conversation_it_changes(store: GraphStore) -> None:
    """Forgetting a conversation removes its stored rungs; another conversation's stay."""
    ledger = Ledger(store)
    kept, gone = _long_tool_history(ledger, "kept"), _long_tool_history(ledger, "gone")
    for g in (kept, gone):
        ledger.assemble(g.conversation_id, now=g.now, window_tokens=1_200, output_tokens=200, margin_tokens=50)
    keys = _stored_keys(store)
    assert {conv for conv, _ in keys} == {kept.conversation_id, gone.conversation_id}
    ledger.forget(conversation_id=gone.conversation_id, now=gone.now)
    assert {conv for conv, _ in _stored_keys(store)} == {kept.conversation_id}
    assert all(store.get_rungs("default", key) is not None for _, key in _stored_keys(store))


def _stored_keys(store: GraphStore) -> set[tuple[str, str]]:
    if isinstance(store, MemoryStore):
        return {(conv, key) for key, (conv, _) in store._tenant("default").rungs.items()}
    with store.engine.connect() as conn:
        rows = conn.execute(select(rung_memo.c.conversation_id, rung_memo.c.memo_key)).all()
    return {(conv, key) for conv, key in rows}
