"""An unknown selector name is refused with the valid names as plain text."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ctxledger.errors import ConfigurationError
from ctxledger.eval.harness import make_selectors, selector_names
from ctxledger.tokens import get_counter


@settings(max_examples=25, deadline=None)
@given(st.text(min_size=1, max_size=12).filter(lambda n: n not in selector_names()))
def test_an_unknown_selector_is_refused_naming_every_selector_as_plain_text(name: str) -> None:
    with pytest.raises(ConfigurationError) as caught:
        make_selectors([name], get_counter("gpt-4o"))
    message = str(caught.value)
    assert repr(name) in message and ", ".join(selector_names()) in message
    listing = message.replace(repr(name), "")  # the name itself may hold any character
    assert "['" not in listing and repr(list(selector_names())) not in listing  # not a Python list
