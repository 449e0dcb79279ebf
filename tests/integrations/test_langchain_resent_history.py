"""A client that keeps the history itself resends it whole on every run of a graph without a checkpointer.

LangGraph then gives every resent message a new id, so ids alone cannot tell that the history is already
recorded. A message the run sends at the same place in the thread's history, with the same role and text, as
a message recorded from an earlier run is that message: only what follows it is recorded, and the model is
handed each turn once.
"""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st
from langchain.agents import create_agent
from langchain_core.messages import AIMessage, HumanMessage
from test_langchain import ScriptedModel

from ctxledger import Ledger
from ctxledger.integrations.langchain import LedgerMiddleware
from ctxledger.records import Message

WORDS = st.text(alphabet="abcdefghij ", min_size=1, max_size=12).map(str.strip).filter(bool)


@settings(max_examples=4, deadline=None)
@given(asks=st.lists(WORDS, min_size=2, max_size=4), replies=st.lists(WORDS, min_size=4, max_size=4))
def test_a_resent_history_is_recorded_once(asks: list[str], replies: list[str]) -> None:
    ledger = Ledger.open("memory://")
    model = ScriptedModel(messages=iter([AIMessage(r) for r in replies]))
    model.seen = []
    middleware = LedgerMiddleware(ledger, window_tokens=4000, output_tokens=300)
    agent = create_agent(model, [], system_prompt="S", middleware=[middleware])
    history: list = []
    for k, ask in enumerate(asks):
        history = [*history, HumanMessage(ask)]  # new objects every run, as a stateless client sends them
        out = agent.invoke({"messages": [m.model_copy(update={"id": None}) for m in history]},
                           {"configurable": {"thread_id": "t"}})  # fmt: skip
        history = [*history, AIMessage(replies[k])]
        assert out["messages"][-1].content == replies[k]
    texts = [(r.role.value, r.content) for r in ledger.store.records("default", "t") if isinstance(r, Message)]
    expected = [("system", "S")]
    for k, ask in enumerate(asks):
        expected += [("user", ask), ("assistant", replies[k])]
    assert texts == expected
