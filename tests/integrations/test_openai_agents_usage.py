"""A response whose usage the provider left out (the Agents SDK then reports 0 input tokens) stores no
observed usage against the assembly: no model call has an empty prompt, and a stored 0 would read as a 100 %
estimate error."""

from __future__ import annotations

import asyncio

import pytest
from agents import Agent, RunConfig, Runner
from agents.testing import ScriptedModel
from agents.usage import Usage
from openai.types.responses import ResponseOutputMessage, ResponseOutputText

from ctxledger import Ledger
from ctxledger.integrations.openai_agents import LedgerInputFilter


@pytest.mark.parametrize(
    ("reported", "observed"),
    [(Usage(requests=1), None), (Usage(requests=1, input_tokens=42, output_tokens=7, total_tokens=49), 42)],
)
def test_usage_is_stored_only_when_reported(tmp_path, reported: Usage, observed: int | None) -> None:
    answer = ResponseOutputMessage(
        id="msg_1",
        role="assistant",
        status="completed",
        type="message",
        content=[ResponseOutputText(type="output_text", text="Hi.", annotations=[])],
    )
    model = ScriptedModel([[answer]], default_usage=reported)
    with Ledger.open(f"sqlite:///{tmp_path}/a.db") as ledger:
        ctx = LedgerInputFilter(ledger, conversation_id="u", window_tokens=4000, output_tokens=300)
        agent = Agent(name="a", instructions="Be brief.", model=model)
        config = RunConfig(call_model_input_filter=ctx, model_settings=ctx.model_settings(), tracing_disabled=True)
        asyncio.run(Runner.run(agent, "Hello", run_config=config, hooks=ctx.hooks()))
        assert ledger.get_assembly(ctx.assemblies[0].id)["tokens"]["observed_input"] == observed
