"""The collector is off while a snapshot is built and as it was before once every build has ended."""

from __future__ import annotations

import gc
import threading
from contextlib import ExitStack

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ctxledger import _collector
from ctxledger._collector import LARGE_BUILD, collector_paused
from ctxledger.ledger import Ledger
from ctxledger.scenarios._graph import GraphBuilder
from ctxledger.testing import MemoryStore


@given(enabled=st.booleans(), depth=st.integers(1, 5))
def test_nested_pauses_restore_the_state_they_found(enabled: bool, depth: int) -> None:
    """Whatever the nesting, the collector is off inside and back to its earlier state after the outermost."""
    was = gc.isenabled()
    (gc.enable if enabled else gc.disable)()
    try:
        with ExitStack() as stack:
            for _ in range(depth):
                stack.enter_context(collector_paused())
                assert not gc.isenabled()
        assert gc.isenabled() is enabled
    finally:
        (gc.enable if was else gc.disable)()


def test_a_pause_in_another_thread_outlives_the_first_to_end() -> None:
    """Two overlapping builds: the collector stays off until the later one ends."""
    assert gc.isenabled()
    inside, release = threading.Event(), threading.Event()

    def other() -> None:
        with collector_paused():
            inside.set()
            release.wait(10)

    worker = threading.Thread(target=other)
    with collector_paused():
        worker.start()
        inside.wait(10)
    assert not gc.isenabled()
    release.set()
    worker.join(10)
    assert gc.isenabled()


class _FailingStore(MemoryStore):
    def records(self, *args, **kwargs):
        raise RuntimeError("disk gone")


def test_assembling_leaves_the_collector_on_also_when_the_build_fails() -> None:
    """A first assembly (which builds a snapshot) leaves the collector on, and so does a build that raises."""
    ledger = Ledger(MemoryStore())
    g = GraphBuilder(ledger, "gc")
    g.system("sys", "You help.")
    g.user("u1", "Hello")
    ledger.assemble(g.conversation_id, now=g.now, window_tokens=8_000)
    assert gc.isenabled()
    broken = _FailingStore()
    Ledger(broken).append(list(ledger.store.records("default", g.conversation_id)))
    with pytest.raises(RuntimeError, match="disk gone"):
        Ledger(broken).assemble(g.conversation_id, now=g.now, window_tokens=8_000)
    assert gc.isenabled()


@settings(max_examples=8, deadline=None)
@given(enabled=st.booleans(), large=st.booleans())
def test_a_large_build_is_collected_once_when_the_pause_ends(enabled: bool, large: bool) -> None:
    """A build that made more than a quarter of the heap (and LARGE_BUILD) is followed by one full collection,
    only when the collector was on; a small one by none."""
    was = gc.isenabled()
    (gc.enable if enabled else gc.disable)()
    try:
        gc.collect()
        _collector._old = None  # the old generation is counted afresh, not estimated from earlier tests
        size = len(gc.get_objects(generation=2)) // 3 + LARGE_BUILD if large else 100
        before = gc.get_stats()[2]["collections"]
        with collector_paused():
            kept = [[i] for i in range(size)]
        assert gc.get_stats()[2]["collections"] - before == (1 if enabled and large else 0)
        assert len(kept) == size
    finally:
        (gc.enable if was else gc.disable)()


@settings(max_examples=5, deadline=None)
@given(share=st.integers(2, 16))
def test_after_a_large_build_a_much_smaller_one_does_not_count_the_heap(share: int) -> None:
    """Counting the old generation walks the heap: a later pause that made at most a quarter of it does not."""
    assert gc.isenabled()
    gc.collect()
    counted: list[int] = []
    real = gc.get_objects

    def counting(*args, **kwargs):
        counted.append(1)
        return real(*args, **kwargs)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(_collector, "_old", None)
        old = len(gc.get_objects(generation=2))
        with collector_paused():
            large = [[i] for i in range(old // 3 + LARGE_BUILD)]
        patch.setattr(gc, "get_objects", counting)
        made = max(LARGE_BUILD, (old + len(large)) // (4 * share))
        with collector_paused():
            small = [[i] for i in range(made)]
    assert counted == []
    assert len(small) == made and len(large) > 0


def test_an_assembly_runs_with_the_collector_off_and_leaves_it_on(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every phase of an assembly (a warm one included) runs paused; the collector is on again once it returns."""
    from ctxledger.assemble import assembler

    ledger = Ledger(MemoryStore())
    g = GraphBuilder(ledger, "gc-phases")
    g.system("sys", "You help.")
    g.user("u1", "Hello")
    seen: list[bool] = []
    real = assembler.build_manifest

    def watched(*args, **kwargs):
        seen.append(gc.isenabled())
        return real(*args, **kwargs)

    monkeypatch.setattr(assembler, "build_manifest", watched)
    assert gc.isenabled()
    for _ in range(2):  # the first call builds the snapshot, the second finds it cached
        ledger.assemble(g.conversation_id, now=g.now, window_tokens=8_000)
        assert gc.isenabled()
    assert seen == [False, False]
