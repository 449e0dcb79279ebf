"""A tool that fails in a PydanticAI run (``ModelRetry``, bad arguments) is recorded as a failed result and
handed back to the model as one: PydanticAI 2 reports such results as ``ToolReturnPart`` s whose ``outcome``
is ``'retried'`` or ``'failed'``, no longer as ``RetryPromptPart`` s."""

from __future__ import annotations

import asyncio

import pytest
from pydantic_ai import Agent, ModelRetry
from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart, ToolCallPart, ToolReturnPart
from pydantic_ai.models.function import AgentInfo, FunctionModel

from ctxledger import Ledger
from ctxledger.integrations.pydantic_ai import LedgerCapability
from ctxledger.records import ToolArtifact


@pytest.mark.parametrize("api", ["openai-chat", "openai-responses", "anthropic-messages"])
def test_a_failed_tool_call_is_recorded_failed_and_sent_as_a_failure(tmp_path, api: str) -> None:
    seen: list[list[ModelMessage]] = []

    def scripted(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        seen.append(messages)
        if len(seen) == 1:
            return ModelResponse(
                parts=[
                    ToolCallPart("weather", {"city": "Paris"}, tool_call_id="ok"),
                    ToolCallPart("weather", {"city": "Atlantis"}, tool_call_id="retry"),
                    ToolCallPart("weather", {"town": "Oslo"}, tool_call_id="bad_args"),
                ]
            )
        return ModelResponse(parts=[TextPart("done")])

    with Ledger.open(f"sqlite:///{tmp_path}/p.db") as ledger:
        capability = LedgerCapability(ledger, conversation_id="pa", window_tokens=4000, output_tokens=300, api=api)
        agent = Agent(FunctionModel(scripted), system_prompt="You report the weather.", capabilities=[capability])

        @agent.tool_plain(retries=2)
        def weather(city: str) -> str:
            """Current weather of a city."""
            if city == "Atlantis":
                raise ModelRetry("no such city")
            return f"{city}: sunny"

        assert asyncio.run(agent.run("Weather?")).output == "done"
        results = {
            r.call_id: r.status.value for r in ledger.store.records("default", "pa") if isinstance(r, ToolArtifact)
        }
        assert results == {"ok": "succeeded", "retry": "failed", "bad_args": "failed"}
        returns = {p.tool_call_id: p for m in seen[-1] for p in m.parts if isinstance(p, ToolReturnPart)}
        assert returns["ok"].outcome == "success"
        assert returns["retry"].outcome == "failed" and "no such city" in str(returns["retry"].content)
        assert returns["bad_args"].outcome == "failed"
