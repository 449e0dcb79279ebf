"""A turn's token-count key is the content hash of its model-facing fields, whichever encoder writes it.

Keys are stored with the counts, so a faster encoder must give exactly the text ``canonical_json`` gives.
"""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ctxledger.assemble.costing import turn_key
from ctxledger.hashing import content_hash, plain_content_hash, quick_content_hash
from ctxledger.serialize.base import CallView, Turn

_TEXT = st.text(alphabet=st.characters(blacklist_categories=["Cs"]), max_size=60)
_CALLS = st.lists(st.builds(CallView, call_id=_TEXT, name=_TEXT, arguments=_TEXT), max_size=3).map(tuple)
_TURNS = st.builds(
    Turn,
    ref=_TEXT,
    role=st.sampled_from(["system", "developer", "user", "assistant", "tool"]),
    content=st.none() | _TEXT,
    name=st.none() | _TEXT,
    tool_calls=_CALLS,
    tool_call_id=st.none() | _TEXT,
    tool_name=st.none() | _TEXT,
    is_error=st.booleans(),
    relayed=st.booleans(),
)


@given(_TURNS)
def test_text_turn_keys_equal_the_canonical_json_hash(turn: Turn) -> None:
    fields: list[object] = [
        turn.role,
        turn.content,
        turn.name,
        [[c.call_id, c.name, c.arguments] for c in turn.tool_calls],
        turn.tool_call_id,
        turn.tool_name,
        turn.is_error,
    ]
    if turn.relayed:
        fields.append("relayed")
    assert turn_key(turn) == content_hash(fields)


_PLAIN = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**63), 2**63 - 1) | _TEXT,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(_TEXT, inner, max_size=4),
    max_leaves=16,
)


@given(_PLAIN)
def test_plain_values_hash_as_canonical_json(value: object) -> None:
    assert plain_content_hash(value) == content_hash(value)


@given(st.floats(allow_nan=False, allow_infinity=False))
def test_a_float_is_refused_by_the_fast_encoder(value: float) -> None:
    try:
        plain_content_hash([{"x": value}])
    except TypeError:
        return
    raise AssertionError("a float must go to content_hash")


_JSON = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False, allow_infinity=False)
    | _TEXT,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(_TEXT, inner, max_size=4),
    max_leaves=16,
)


@given(_JSON)
def test_the_quick_hash_is_the_canonical_hash(value: object) -> None:
    """Payload hashes (floats, big integers and all) are the canonical JSON's, whichever encoder wrote them."""
    assert quick_content_hash(value) == content_hash(value)


@given(st.sampled_from([{1, 2}, b"raw", frozenset({"a"}), ("ok", {"n": object()})]))
def test_what_json_refuses_the_quick_hash_refuses_too(value: object) -> None:
    """A set, bytes or an object goes to json, which raises, whatever msgspec would write."""
    with pytest.raises(TypeError):
        content_hash(value)
    with pytest.raises(TypeError):
        quick_content_hash(value)


@given(st.dictionaries(st.integers(), _TEXT, max_size=4))
def test_integer_keys_hash_as_json_writes_them(value: dict[int, str]) -> None:
    assert quick_content_hash(value) == content_hash(value)
