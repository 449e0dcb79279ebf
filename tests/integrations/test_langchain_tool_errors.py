"""A LangChain tool that fails (``ToolMessage.status == "error"``) is recorded as failed and handed back to
the model as an error in every format, not only where the provider's wire has an error flag (Anthropic)."""

from __future__ import annotations

import pytest
from langchain.agents import create_agent
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langchain_core.tools import ToolException, tool
from test_langchain import ScriptedAnthropic, ScriptedModel, ScriptedResponses

from ctxledger import Ledger
from ctxledger.integrations.langchain import LedgerMiddleware
from ctxledger.records import ToolArtifact


@tool
def weather(city: str) -> str:
    """Current weather of a city."""
    if city == "Atlantis":
        raise ToolException("no such city")
    return f"{city}: sunny"


weather.handle_tool_error = True


@pytest.mark.parametrize("base", [ScriptedModel, ScriptedResponses, ScriptedAnthropic])
def test_a_failed_tool_call_stays_an_error_for_the_model(tmp_path, base: type[ScriptedModel]) -> None:
    calls = [
        {"id": "call_ok", "name": "weather", "args": {"city": "Paris"}},
        {"id": "call_bad", "name": "weather", "args": {"city": "Atlantis"}},
    ]
    model = base(messages=iter([AIMessage("", tool_calls=calls), AIMessage("done")]))
    model.seen = []
    with Ledger.open(f"sqlite:///{tmp_path}/l.db") as ledger:
        middleware = LedgerMiddleware(ledger, window_tokens=3000, output_tokens=300)
        agent = create_agent(model, [weather], system_prompt="You report the weather.", middleware=[middleware])
        agent.invoke({"messages": [HumanMessage("Weather?")]}, {"configurable": {"thread_id": "t"}})
        statuses = {
            r.call_id: r.status.value for r in ledger.store.records("default", "t") if isinstance(r, ToolArtifact)
        }
        assert statuses == {"call_ok": "succeeded", "call_bad": "failed"}
        sent = {m.tool_call_id: m.status for m in model.seen[-1] if isinstance(m, ToolMessage)}
        assert sent == {"call_ok": "success", "call_bad": "error"}
