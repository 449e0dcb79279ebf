"""What every integration shares: the model a call is recorded for."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

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


@settings(max_examples=20, deadline=None)
@given(versions=st.lists(st.sampled_from(["A", "B", "C"]), min_size=1, max_size=8))
def test_instructions_are_recorded_when_they_change_and_only_the_current_ones_are_sent(versions, tmp_path_factory):
    path = tmp_path_factory.mktemp("loop") / "l.db"
    with Ledger.open(f"sqlite:///{path}") as ledger:
        for k, version in enumerate(versions):
            loop = LoopLedger(ledger, Budget(4000, 100, 10))  # a new process each call: state comes from the ledger
            loop.instructions("c", f"Instructions {version}.")
            loop.message("c", f"u{k}", "user", f"question {k}")
            asm = loop.assemble("c", api="openai-responses")
            assert asm.payload["instructions"] == f"Instructions {version}."
        systems = [r.content for r in ledger.store.records("default", "c") if getattr(r, "role", None) == "system"]
        changes = [v for k, v in enumerate(versions) if k == 0 or versions[k - 1] != v]
        assert systems == [f"Instructions {v}." for v in changes]  # one record per change, none lost


def test_every_integration_defaults_to_the_budget_ledger_assemble_has() -> None:
    """``LedgerMiddleware``, ``LedgerInputFilter`` and ``LedgerCapability`` need no ``window_tokens``."""
    import dataclasses
    import inspect

    from ctxledger.assemble.assembler import AssemblyRequest
    from ctxledger.budget import DEFAULT_BUDGET

    names = ("window_tokens", "output_tokens", "margin_tokens")
    expected = {n: getattr(DEFAULT_BUDGET, n) for n in names}
    request = {f.name: f.default for f in dataclasses.fields(AssemblyRequest)}
    assert {n: request[n] for n in names} == expected  # what ledger.assemble sends without a budget
    assert {f.name: f.default for f in dataclasses.fields(Budget)} == expected
    for module, name in (
        ("langchain", "LedgerMiddleware"),
        ("openai_agents", "LedgerInputFilter"),
        ("pydantic_ai", "LedgerCapability"),
    ):
        cls = getattr(pytest.importorskip(f"ctxledger.integrations.{module}"), name)
        params = inspect.signature(cls).parameters
        assert {n: params[n].default for n in names} == expected, name
