"""A LangChain run with no ``thread_id`` and a middleware given no ``conversation_id`` is refused before the
model is called: otherwise every such run (two users of one server, two unrelated tasks) was recorded into
one shared conversation, and each model call was handed the earlier runs' messages."""

from __future__ import annotations

import pytest
from langchain.agents import create_agent
from langchain_core.messages import AIMessage, HumanMessage
from test_langchain import ScriptedModel

from ctxledger import Ledger
from ctxledger.errors import ConfigurationError
from ctxledger.integrations.langchain import LedgerMiddleware


def test_a_run_without_a_thread_is_refused_unless_a_conversation_is_named() -> None:
    ledger = Ledger.open("memory://")
    model = ScriptedModel(messages=iter([AIMessage("one"), AIMessage("two")]))
    model.seen = []
    shared = LedgerMiddleware(ledger, window_tokens=4000, output_tokens=300)
    agent = create_agent(model, [], system_prompt="S", middleware=[shared])
    with pytest.raises(ConfigurationError, match="thread_id"):
        agent.invoke({"messages": [HumanMessage("first user's secret plan")]})
    assert model.seen == [] and shared.assemblies == []

    named = LedgerMiddleware(ledger, window_tokens=4000, output_tokens=300, conversation_id="support-1")
    agent = create_agent(model, [], system_prompt="S", middleware=[named])
    agent.invoke({"messages": [HumanMessage("hello")]})
    assert named.assemblies[0].manifest["conversation_id"] == "support-1"
    agent.invoke({"messages": [HumanMessage("hello")]}, {"configurable": {"thread_id": "t-2"}})
    assert named.assemblies[1].manifest["conversation_id"] == "t-2"
