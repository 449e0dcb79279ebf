"""The fast option constructor the assembler uses makes the very options the dataclass constructor makes."""

from __future__ import annotations

import dataclasses

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ctxledger.assemble.select import Option, new_option
from ctxledger.serialize.base import Turn

_turns = st.lists(
    st.builds(Turn, st.text(max_size=4), st.sampled_from(["user", "tool"]), st.text(max_size=8)), max_size=3
)


@given(
    representation=st.sampled_from(["verbatim", "excerpt", "reference"]),
    tokens=st.integers(0, 10**6),
    utility=st.floats(0, 1),
    turns=_turns.map(tuple),
    transform=st.none() | st.text(max_size=8),
    detail=st.none() | st.dictionaries(st.text(max_size=4), st.integers(), max_size=3),
    turn_tokens=st.lists(st.integers(0, 999), max_size=3).map(tuple),
)
def test_new_option_equals_the_dataclass_option(representation, tokens, utility, turns, transform, detail, turn_tokens):
    made = new_option(representation, tokens, utility, turns, transform, detail, turn_tokens)
    kwargs = {} if detail is None else {"detail": detail}
    built = Option(representation, tokens, utility, turns, transform, turn_tokens=turn_tokens, **kwargs)
    assert type(made) is Option and made == built and repr(made) == repr(built)
    assert all(
        getattr(made, f.name) is getattr(built, f.name) for f in dataclasses.fields(Option) if f.name != "detail"
    )
    assert made.detail == built.detail and (detail is None or made.detail is detail)
    assert new_option(representation, tokens, utility, turns).detail is not made.detail  # a fresh dict each time
    with pytest.raises(dataclasses.FrozenInstanceError):
        made.tokens = tokens + 1  # type: ignore[misc]
