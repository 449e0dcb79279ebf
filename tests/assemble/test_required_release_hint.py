"""A required failed call too large for the budget: the error says what releases it, and recording that does."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ctxledger import Ledger
from ctxledger.errors import RequiredBlocksDoNotFit


@settings(max_examples=5, deadline=None)
@given(st.integers(20_000, 40_000), st.integers(0, 2))
def test_a_failed_call_with_huge_arguments_names_its_release_and_a_success_ends_it(size: int, later: int) -> None:
    ledger = Ledger.open("memory://")
    rec = ledger.recorder("c")
    rec.system("You write files.")
    rec.user("Write it.")
    rec.tool_call("write", {"content": "x " * size}, "permission denied", status="failed")
    for k in range(later):
        rec.user(f"retry? {k}")
        rec.assistant("Trying.")
    rec.user("retry?")
    with pytest.raises(RequiredBlocksDoNotFit) as err:
        ledger.assemble("c", window_tokens=8_000, output_tokens=1_000)
    assert "unresolved_tool_error" in str(err.value)
    assert "until a later call of the same tool succeeds" in str(err.value)
    rec.tool_call("write", {"content": "short"}, "ok")
    assert ledger.assemble("c", window_tokens=8_000, output_tokens=1_000).input_tokens <= 6_488
