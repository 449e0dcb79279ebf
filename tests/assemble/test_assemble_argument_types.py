"""``assemble`` arguments of the wrong type are InputErrors naming the argument, before anything is read."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ctxledger import Ledger
from ctxledger.errors import InputError

T0 = datetime(2026, 9, 1, tzinfo=UTC)


@pytest.fixture(scope="module")
def ledger():
    ledger = Ledger.open("memory://")
    r = ledger.recorder("c", clock=T0)
    r.system("Be brief.")
    r.user("hello")
    return ledger


WRONG = {
    "window_tokens": ["10000", None, 10000.5, True, [1]],
    "output_tokens": ["500", 500.0, False],
    "margin_tokens": ["1", 1.5, None],
    "now": [datetime(2026, 9, 1), "2026-09-01T00:00Z", 0],
    "tools": ["abc", {"type": "function"}, [1, 2], b"x"],
    "checks_passed": ["approval", [1]],
    "scope": [["a"], {"a": 1}],
    "model": ["", 4],
    "query": [5, ["q"]],
    "exact_evidence": ["c/1", [1]],
}


@pytest.mark.parametrize(("name", "value"), [(n, v) for n, vs in WRONG.items() for v in vs])
def test_a_wrong_type_names_the_argument(ledger, name, value):
    args = {"window_tokens": 8000, "output_tokens": 500, "now": T0, name: value}
    with pytest.raises(InputError) as caught:
        ledger.assemble("c", **args)
    assert caught.value.field == name


@pytest.mark.parametrize("conversation", ["", None, 7])
def test_an_empty_or_non_string_conversation_id_is_refused(ledger, conversation):
    with pytest.raises(InputError) as caught:
        ledger.assemble(conversation, window_tokens=8000, output_tokens=500, now=T0)
    assert caught.value.field == "conversation_id"


@settings(max_examples=40, deadline=None)
@given(value=st.one_of(st.floats(), st.text(), st.booleans(), st.lists(st.integers(), max_size=2), st.none()))
def test_generated_non_integer_windows_are_refused(ledger, value):
    with pytest.raises(InputError):
        ledger.assemble("c", window_tokens=value, output_tokens=500, now=T0)


def test_right_types_still_assemble(ledger):
    asm = ledger.assemble("c", window_tokens=8000, output_tokens=500, now=T0, tools=[], checks_passed=["a"], query="")
    assert asm.payload["messages"]
