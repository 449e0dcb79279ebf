"""What every integration shares: the model a call is recorded for."""

from __future__ import annotations

import pytest

from ctxledger import Ledger
from ctxledger.integrations._loop import Budget, LoopLedger
from ctxledger.serialize import DEFAULT_MODELS


@pytest.mark.parametrize("api", sorted(DEFAULT_MODELS))
def test_a_model_is_named_when_it_can_be_counted(api: str) -> None:
    with Ledger.open("memory://") as ledger:
        loop = LoopLedger(ledger, Budget(4000))
        assert loop.model_for(api, "claude-sonnet-4-5") == "claude-sonnet-4-5"
        assert loop.model_for(api, "gpt-4o-mini") == "gpt-4o-mini"
        # a scripted or self-hosted model with no known tokenizer is counted as the format's default
        assert loop.model_for(api, "function:scripted:") == loop.model_for(api, None) == DEFAULT_MODELS[api]
        assert LoopLedger(ledger, Budget(4000), counter="o200k_base").model_for(api, "llama-3.1-70b") == "llama-3.1-70b"
