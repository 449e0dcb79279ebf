"""The token-count cache on every backend: counts read back by counter and hash, across the store's read chunks."""

from __future__ import annotations

import uuid
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

_hashes = st.text("0123456789abcdef", min_size=1, max_size=12)


@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    stored=st.dictionaries(_hashes, st.integers(0, 10**6), max_size=1_200),
    absent=st.lists(_hashes, max_size=50),
    other=st.integers(0, 10**6),
)
def test_counts_read_back_for_their_counter_only(
    store: Any, stored: dict[str, int], absent: list[str], other: int
) -> None:
    counter = f"counter-{uuid.uuid4().hex}"  # each example its own counter: the fixture's store is shared
    store.put_token_counts(counter, stored)
    store.put_token_counts(f"{counter}-other", dict.fromkeys(stored, other))
    asked = [*stored, *absent, *stored]  # repeated hashes, unknown ones, more than one read chunk (500)
    assert store.get_token_counts(counter, asked) == stored
    assert store.get_token_counts(f"{counter}-never", asked) == {}
    assert store.get_token_counts(counter, []) == {}
