"""The recency table of selection: ``0.5 ** (k / half_life)`` exactly, kept on the memo and grown with the history."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from ctxledger.assemble.phases.select import _decay

_half_lives = st.one_of(st.integers(1, 50), st.floats(0.01, 1000.0, allow_nan=False))


@given(half_life=_half_lives, sizes=st.lists(st.integers(0, 300), min_size=1, max_size=4))
def test_each_age_gets_the_formula_whatever_the_calls_before(half_life: float, sizes: list[int]) -> None:
    memo: dict = {}
    for size in sizes:
        values = _decay(memo, half_life, size)
        assert len(values) >= size
        assert all(values[k] == 0.5 ** (k / half_life) for k in range(len(values)))
    assert _decay(None, half_life, max(sizes)) == [0.5 ** (k / half_life) for k in range(max(sizes))]


@given(first=_half_lives, second=_half_lives)
def test_another_half_life_starts_its_own_table(first: float, second: float) -> None:
    memo: dict = {}
    _decay(memo, first, 40)
    values = _decay(memo, second, 40)
    assert values[:40] == [0.5 ** (k / second) for k in range(40)]
