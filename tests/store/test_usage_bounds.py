"""A reported usage out of any call's range is refused naming the field, never a store overflow traceback."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ctxledger.budget import MAX_TOKENS
from ctxledger.errors import InputError
from ctxledger.ledger import Ledger


@pytest.fixture(scope="module")
def assembled(tmp_path_factory: pytest.TempPathFactory) -> tuple[Ledger, str]:
    url = f"sqlite:///{tmp_path_factory.mktemp('usage') / 's.db'}"
    ledger = Ledger.open(url)
    ledger.import_messages(
        [{"role": "system", "content": "You help."}, {"role": "user", "content": "Hello?"}], conversation_id="chat"
    )
    return ledger, ledger.assemble("chat", window_tokens=2000, output_tokens=100, margin_tokens=0).id


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(huge=st.integers(MAX_TOKENS + 1, 10**40), field=st.sampled_from(["input_tokens", "output_tokens"]))
def test_a_usage_past_the_token_bound_is_an_input_error(assembled, huge: int, field: str) -> None:
    ledger, asm = assembled
    counts = {"input_tokens": 10, "output_tokens": 10, field: huge}
    with pytest.raises(InputError, match=f"field '{field}'.*from 0 to 10,000,000"):
        ledger.record_usage(asm, counts["input_tokens"], counts["output_tokens"], overwrite=True)


def test_the_largest_usage_is_recorded(assembled) -> None:
    ledger, asm = assembled
    ledger.record_usage(asm, MAX_TOKENS, MAX_TOKENS, overwrite=True)
    assert ledger.get_assembly(asm)["tokens"]["observed_input"] == MAX_TOKENS
