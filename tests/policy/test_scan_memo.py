"""The stage context's verdict cache gives what computing every verdict afresh gives, call after call.

Each generated run is a sequence of calls over candidate lists drawn from a pool of items: subsets in any
order, the very list of the previous call again, items rebuilt under the same id, namespaces switched through
a slot. Every call's answer must equal the uncached one; while a namespace stays, each item object is computed
once.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

from hypothesis import given, settings
from hypothesis import strategies as st

from ctxledger.policy.decisions import StageContext


@dataclass(eq=False)
class Item:
    id: str
    value: int


def _context(memo: dict) -> StageContext:
    return StageContext(request=None, records=(), units=(), lineage_branches=frozenset(), memo=memo)


calls = st.lists(
    st.tuples(
        st.lists(st.integers(0, 39), max_size=40),  # positions in the pool, in this call's order
        st.booleans(),  # reuse the previous call's list object (its tail rebuilt in place when items are rebuilt)
        st.sets(st.integers(0, 39), max_size=20),  # pool items rebuilt (a new object, same id) before the call
        st.sampled_from(["a", "b"]),  # the namespace (one slot)
    ),
    min_size=1,
    max_size=8,
)


@settings(max_examples=200, deadline=None)
@given(values=st.lists(st.integers(-2, 3), min_size=40, max_size=40), run=calls)
def test_cached_scan_answers_as_a_fresh_scan(values, run):
    pool = [Item(f"r{i}", v) for i, v in enumerate(values)]
    memo: dict = {}
    previous: list[Item] | None = None
    for positions, reuse, rebuilt, namespace in run:
        for i in rebuilt:
            pool[i] = Item(pool[i].id, pool[i].value)
        if reuse and previous is not None:
            items = previous
            if rebuilt and items:  # a snapshot refresh rebuilds a list's tail in place
                items[-1] = Item(items[-1].id, -items[-1].value)
        else:
            items = [pool[i] for i in dict.fromkeys(positions)]

        def compute(item: Item, namespace: str = namespace) -> int:
            return item.value if namespace == "a" else -item.value

        got = _context(memo).scan(("test", namespace), items, compute, slot="test")
        fresh = [(item, v) for item in items if (v := item.value if namespace == "a" else -item.value)]
        assert [(i.id, v) for i, v in got] == [(i.id, v) for i, v in fresh]
        assert all(a is b for (a, _), (b, _) in zip(got, fresh, strict=True))
        previous = items


@settings(max_examples=100, deadline=None)
@given(values=st.lists(st.integers(-2, 3), min_size=1, max_size=20), k=st.integers(0, 5))
def test_an_item_object_is_computed_once_while_its_namespace_stays(values, k):
    pool = [Item(f"r{i}", v) for i, v in enumerate(values)]
    memo: dict = {}
    computed: Counter = Counter()

    def compute(item: Item) -> int:
        computed[id(item)] += 1
        return item.value

    for shift in range(k + 1):  # a window sliding over the pool, as a reach's tail does on append
        _context(memo).scan("ns", pool[shift:], compute)
        _context(memo).scan("ns", list(reversed(pool[: shift + 1])), compute)
    assert set(computed.values()) <= {1}
