"""A coster's new token counts reach the store in one write per assembly, and a later process reads them."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ctxledger.assemble import costing
from ctxledger.assemble.costing import UNSAVED_LIMIT, SerializerCoster, turn_key
from ctxledger.assemble.phases import budget
from ctxledger.serialize import get_serializer
from ctxledger.serialize.base import Turn
from ctxledger.store.memory import MemoryStore
from ctxledger.tokens import get_counter

_COUNTER = get_counter("o200k_base")


class _CountingStore(MemoryStore):
    def __init__(self) -> None:
        super().__init__()
        self.writes: list[dict[str, int]] = []

    def put_token_counts(self, counter_id: str, counts) -> None:
        self.writes.append(dict(counts))
        super().put_token_counts(counter_id, counts)


@settings(max_examples=30, deadline=None)
@given(texts=st.lists(st.text(min_size=1, max_size=80), min_size=1, max_size=30, unique=True))
def test_counts_wait_for_the_flush_then_a_new_coster_reads_them(texts: list[str]) -> None:
    """turn_tokens writes nothing; flush writes every new count once; a fresh coster gets them from the store."""
    store = _CountingStore()
    coster = SerializerCoster(get_serializer("openai-chat"), _COUNTER, store)
    turns = [Turn(ref=f"r{i}", role="user", content=text) for i, text in enumerate(texts)]
    counted = [coster.turn_tokens(t) for t in turns]
    assert store.writes == []
    coster.flush()
    coster.flush()
    assert len(store.writes) == 1 and store.writes[0] == {turn_key(t): n for t, n in zip(turns, counted, strict=True)}
    fresh = SerializerCoster(get_serializer("openai-chat"), _COUNTER, store)
    keys = [turn_key(t) for t in turns]
    assert store.get_token_counts(fresh.counter_id, keys) == dict(zip(keys, counted, strict=True))


def test_a_long_run_of_counts_is_written_before_the_flush() -> None:
    """More than UNSAVED_LIMIT new counts are written as they pile up, not held until the end."""
    store = _CountingStore()
    coster = SerializerCoster(get_serializer("openai-chat"), _COUNTER, store)
    for i in range(UNSAVED_LIMIT + 1):
        coster.turn_tokens(Turn(ref=f"r{i}", role="user", content=f"turn {i}"))
    assert [len(w) for w in store.writes] == [UNSAVED_LIMIT]



@settings(max_examples=25, deadline=None)
@given(turns_per_unit=st.lists(st.integers(min_value=1, max_value=8), min_size=1, max_size=60))
def test_snapshot_costs_key_each_turn_once_in_rounds_the_key_cache_holds(turns_per_unit: list[int]) -> None:
    """unit_turn_costs reads counts in rounds of at most PREFETCH_TURNS turns, so each turn's key is computed
    once although the key cache holds fewer turns than the history; the costs are those of a coster asked turn
    by turn."""
    units = [
        SimpleNamespace(turns=[Turn(ref=f"u{u}t{t}", role="user", content=f"unit {u} turn {t}") for t in range(n)])
        for u, n in enumerate(turns_per_unit)
    ]
    keyed: list[str] = []
    rounds: list[list[str]] = []
    coster = SerializerCoster(get_serializer("openai-chat"), _COUNTER, _CountingStore())
    real_key, prefetch = costing.turn_key, coster.prefetch
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(costing, "KEY_CACHE_SIZE", 16)
        patch.setattr(budget, "PREFETCH_TURNS", 16)
        patch.setattr(costing, "turn_key", lambda turn: keyed.append(turn.ref) or real_key(turn))
        patch.setattr(coster, "prefetch", lambda turns: rounds.append([t.ref for t in turns]) or prefetch(turns))
        costs = budget.unit_turn_costs(SimpleNamespace(units=units, costs={}), coster)  # type: ignore[arg-type]
    every = [t.ref for u in units for t in u.turns]
    assert sorted(keyed) == sorted(every)
    assert [ref for r in rounds for ref in r] == every
    assert all(len(r) <= 16 for r in rounds)
    plain = SerializerCoster(get_serializer("openai-chat"), _COUNTER)
    assert costs == [tuple(plain.turn_tokens(t) for t in u.turns) for u in units]
