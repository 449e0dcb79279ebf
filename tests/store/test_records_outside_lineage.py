"""``GraphStore.records(outside_lineage=True)`` returns exactly the conversation's records off a lineage."""

from __future__ import annotations

import itertools
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ctxledger.records import Branch, Conversation, Message, Record
from ctxledger.store.base import GraphStore

T = "t"
_COUNTER = itertools.count()

# each step: (branch to write on, as an index into the branches made so far; fork a new branch from it?)
_STEPS = st.lists(st.tuples(st.integers(0, 5), st.booleans()), min_size=1, max_size=14)


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(steps=_STEPS)
def test_records_on_and_off_a_lineage_partition_the_conversation(store: GraphStore, steps) -> None:
    conv = f"c{next(_COUNTER)}"
    main = f"{conv}/main"

    def env(branch: str) -> dict[str, Any]:
        return {"tenant_id": T, "conversation_id": conv, "branch_id": branch}

    store.append([Conversation(id=conv, **env(main)), Branch(id=main, name="main", **env(main))])
    branches = [main]
    for k, (pick, fork) in enumerate(steps):
        parent = branches[pick % len(branches)]
        if fork:
            child = f"{conv}/b{k}"
            at = store.head_seq(T, conv)
            store.append([Branch(id=child, parent_branch_id=parent, fork_seq=at, **env(child))])
            branches.append(child)
        store.append([Message(id=f"{conv}/m{k}", content=f"turn {k}", **env(parent))])
    everything: list[Record] = store.records(T, conv)
    for branch in branches:
        lineage = store.lineage(T, branch)
        on = store.records(T, conv, lineage=lineage)
        off = store.records(T, conv, lineage=lineage, outside_lineage=True)
        assert {r.id for r in on}.isdisjoint(r.id for r in off)
        assert sorted(r.seq for r in [*on, *off]) == [r.seq for r in everything]
        assert [r.seq for r in off] == sorted(r.seq for r in off)
        middle = everything[len(everything) // 2].seq
        assert [r.id for r in store.records(T, conv, lineage=lineage, outside_lineage=True, after_seq=middle)] == [
            r.id for r in off if r.seq > middle
        ]
