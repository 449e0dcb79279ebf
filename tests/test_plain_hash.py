"""``quick_content_hash`` is ``content_hash``; msgspec writes only the values ``_plain`` lets through."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from ctxledger.hashing import _plain, content_hash, quick_content_hash

_scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(2**63), 2**63),
    st.text(max_size=8),
    st.floats(allow_nan=False, allow_infinity=False),
)
_values = st.recursive(
    _scalars,
    lambda inner: st.lists(inner, max_size=4)
    | st.lists(inner, max_size=3).map(tuple)
    | st.dictionaries(st.text(max_size=3), inner, max_size=4),
    max_leaves=12,
)


def _reference(value: Any) -> bool:
    """Strings, ``None``, booleans, integers, lists, tuples and str-keyed dicts of them, by recursion."""
    kind = type(value)
    if kind in (str, int, bool) or value is None:
        return True
    if kind is dict:
        return all(type(k) is str for k in value) and all(_reference(v) for v in value.values())
    if kind in (list, tuple):
        return all(_reference(v) for v in value)
    return False


@settings(max_examples=300)
@given(_values)
def test_plain_tells_the_values_msgspec_writes_as_json_does(value: Any) -> None:
    assert _plain(value) == _reference(value)
    assert quick_content_hash(value) == content_hash(value)


def test_a_key_that_is_no_string_is_not_plain() -> None:
    assert not _plain({"a": [{"b": 1, 2: "c"}]})
    assert not _plain([{"a": 1.5}])
    assert _plain({"a": [{"b": [None, True, 3, "x"]}], "c": ()})
