"""LedgerMiddleware in a real LangChain v1 agent loop (create_agent) driven by a scripted fake chat model."""

from __future__ import annotations

import asyncio
import itertools
from typing import Any

import pytest
from langchain.agents import create_agent
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver
from pydantic import Field
from scripted_provider_http import scripted_reply

from ctxledger import Ledger
from ctxledger.integrations.langchain import LedgerMiddleware

LONG = " ".join(f"station {i} reads {i * 7 % 97} mm" for i in range(900))  # over budget: must shrink


@tool
def weather(city: str) -> str:
    """Current weather of a city."""
    return f"{city}: 18C sunny. {LONG if city == 'Oslo' else ''}"


@tool
def clock(city: str) -> str:
    """Local time of a city."""
    return f"{city}: 09:00"


class ScriptedModel(GenericFakeChatModel):
    """Replays scripted replies and keeps what it was shown on each call; tools bind to itself."""

    seen: list[list[BaseMessage]] = Field(default_factory=list)

    def bind_tools(self, tools: Any, **kwargs: Any) -> ScriptedModel:
        return self

    def _generate(self, messages: list[BaseMessage], *args: Any, **kwargs: Any) -> Any:
        self.seen.append(list(messages))
        return super()._generate(messages, *args, **kwargs)


class ScriptedAnthropic(ScriptedModel):
    """A scripted chat model that reports itself as Anthropic's, as ``ChatAnthropic`` does (``_llm_type``)."""

    model_name: str = "claude-sonnet-4-5"

    @property
    def _llm_type(self) -> str:
        return "anthropic-chat"


class ScriptedResponses(ScriptedModel):
    """A scripted chat model set to OpenAI's Responses API, as ``ChatOpenAI(use_responses_api=True)`` is."""

    use_responses_api: bool = True


def script() -> list[AIMessage]:
    usage = {"input_tokens": 120, "output_tokens": 20, "total_tokens": 140}
    return [
        AIMessage(
            "",
            tool_calls=[
                {"id": "call_w1", "name": "weather", "args": {"city": "Paris"}},
                {"id": "call_w2", "name": "weather", "args": {"city": "Oslo"}},
            ],
            usage_metadata=usage,
        ),
        AIMessage("", tool_calls=[{"id": "call_c1", "name": "clock", "args": {"city": "Paris"}}], usage_metadata=usage),
        AIMessage("Paris is sunny at 09:00; Oslo too.", usage_metadata=usage),
    ]


def run(ledger: Ledger, *, use_async: bool = False) -> tuple[dict[str, Any], LedgerMiddleware, ScriptedModel]:
    model = ScriptedModel(messages=iter(script()))
    model.seen = []
    middleware = LedgerMiddleware(ledger, window_tokens=3000, output_tokens=300, margin_tokens=100)
    agent = create_agent(
        model,
        [weather, clock],
        system_prompt="You answer weather questions.",
        middleware=[middleware],
        checkpointer=InMemorySaver(),
    )
    config = {"configurable": {"thread_id": "thread-7"}}
    question = {"messages": [HumanMessage("Weather and time in Paris and Oslo?")]}
    state = asyncio.run(agent.ainvoke(question, config)) if use_async else agent.invoke(question, config)
    return state, middleware, model


@pytest.mark.parametrize("use_async", [False, True])
def test_every_model_call_is_assembled_under_budget_and_recorded(tmp_path, use_async: bool) -> None:
    with Ledger.open(f"sqlite:///{tmp_path}/lc.db") as ledger:
        state, middleware, model = run(ledger, use_async=use_async)
        assert state["messages"][-1].content == "Paris is sunny at 09:00; Oslo too."
        assert len(middleware.assemblies) == len(model.seen) == 3
        for asm in middleware.assemblies:
            manifest = ledger.get_assembly(asm.id)
            assert manifest["tokens"]["estimated_input"] <= 3000 - 300 - 100
            assert manifest["tokens"]["observed_input"] == 120  # usage_metadata recorded per call
        # the model saw the assembled context: the big Oslo result shrunk, the state kept it whole
        oslo_state = next(m for m in state["messages"] if getattr(m, "tool_call_id", None) == "call_w2")
        assert LONG in oslo_state.content
        last_seen = " ".join(str(m.content) for m in model.seen[-1])
        assert LONG not in last_seen and "Paris: 09:00" in last_seen
        # the history was recorded as it happened: 2 parallel calls on one message, then one call, then the answer
        records = list(ledger.store.records("default", "thread-7"))
        calls = [r for r in records if r.kind.value == "tool_call"]
        assert [(c.call_id, c.index) for c in calls] == [("call_w1", 0), ("call_w2", 1), ("call_c1", 0)]
        assert calls[0].message_id == calls[1].message_id != calls[2].message_id
        assert sum(r.kind.value == "tool_artifact" for r in records) == 3
        final = ledger.get_assembly(middleware.assemblies[-1].id)
        oslo = next(r for r in records if r.kind.value == "tool_artifact" and r.call_id == "call_w2")
        why = ledger.explain(final["id"], oslo.id)  # the manifest explains what happened to the big result
        assert why["status"] in ("included", "omitted") and why["reason"]
        assert why["status"] == "omitted" or why["representation"] != "verbatim"


@pytest.mark.parametrize("base", [ScriptedModel, ScriptedAnthropic, ScriptedResponses])
def test_the_model_recalls_an_excerpt_through_the_recall_tool(tmp_path, base: type[ScriptedModel]) -> None:
    import dataclasses

    from integration_recall import recall_calls

    from ctxledger.integrations.langchain import model_api
    from ctxledger.policy.base import RehydrationParams
    from ctxledger.policy.default import default_policy

    policy = dataclasses.replace(default_policy(), rehydration=RehydrationParams(recall_tool=True))

    class Recaller(base):  # type: ignore[valid-type,misc]
        def _generate(self, messages: list[BaseMessage], *args: Any, **kwargs: Any) -> Any:
            found = recall_calls(" ".join(str(m.content) for m in messages))
            if len(self.seen) == 1 and found:  # the second call: read the shrunk result back, as its hint says
                self.messages = iter(
                    [
                        AIMessage(
                            "",
                            tool_calls=[
                                {
                                    "id": "call_r1",
                                    "name": "recall",
                                    "args": {**found[0], "start": 0, "end": 120},
                                },
                                {"id": "call_r2", "name": "recall", "args": {"ref": "elsewhere/7"}},
                            ],
                        ),
                        AIMessage("Done."),
                    ]
                )
            return super()._generate(messages, *args, **kwargs)

    with Ledger.open(f"sqlite:///{tmp_path}/r.db") as ledger:
        model = Recaller(
            messages=iter([AIMessage("", tool_calls=[{"id": "call_w", "name": "weather", "args": {"city": "Oslo"}}])])
        )
        model.seen = []
        middleware = LedgerMiddleware(ledger, window_tokens=2000, output_tokens=200, margin_tokens=100, policy=policy)
        agent = create_agent(model, [weather, middleware.recall_tool()], middleware=[middleware])
        state = agent.invoke({"messages": [HumanMessage("Oslo weather?")]}, {"configurable": {"thread_id": "r"}})
        assert state["messages"][-1].content == "Done."
        assert len(middleware.assemblies) == 3
        for asm in middleware.assemblies:  # the recall schema is offered and costed in F, in the model's format
            assert asm.manifest["api"] == model_api(model)
            assert "recall" in [t.get("name") or t["function"]["name"] for t in asm.payload["tools"]]
            assert ledger.get_assembly(asm.id)["tokens"]["estimated_input"] <= 2000 - 200 - 100
        oslo = next(
            r for r in ledger.store.records("default", "r") if r.kind.value == "tool_artifact" and r.call_id == "call_w"
        )
        answers = {m.tool_call_id: m.content for m in state["messages"] if getattr(m, "tool_call_id", None)}
        assert answers["call_r1"].encode() == ledger.rehydrate(oslo.id, (0, 120))
        assert "not_a_candidate" in answers["call_r2"]
        recalls = ledger.get_assembly(middleware.assemblies[-1].id)["recalls"]
        assert [(r["ref"], r["decision"]) for r in recalls] == [(oslo.id, "answered"), ("elsewhere/7", "refused")]


# -- the format of the model in use ------------------------------------------------------------------------------


def _run_two_questions(model: ScriptedModel, ledger: Ledger, **options: Any) -> LedgerMiddleware:
    model.seen = []
    middleware = LedgerMiddleware(ledger, window_tokens=3000, output_tokens=300, margin_tokens=100, **options)
    agent = create_agent(
        model, [weather, clock], system_prompt="You answer weather questions.", middleware=[middleware]
    )
    asked = [HumanMessage("Weather in Paris and Oslo?"), HumanMessage("And the time in Paris?")]
    agent.invoke({"messages": asked}, {"configurable": {"thread_id": "t"}})
    return middleware


def _answers_follow_their_calls(messages: list[BaseMessage]) -> None:
    """Every AIMessage's tool calls are answered by ToolMessages right after it, and no ToolMessage is orphaned."""
    from langchain_core.messages import ToolMessage

    i = 0
    while i < len(messages):
        message = messages[i]
        assert not isinstance(message, ToolMessage), f"orphaned tool message at {i}"
        i += 1
        if isinstance(message, AIMessage) and message.tool_calls:
            answered = []
            while i < len(messages) and isinstance(messages[i], ToolMessage):
                answered.append(messages[i].tool_call_id)
                i += 1
            assert sorted(answered) == sorted(c["id"] for c in message.tool_calls)


def test_an_anthropic_model_gets_an_anthropic_assembly(tmp_path) -> None:
    from ctxledger.integrations.langchain import model_api

    model = ScriptedAnthropic(messages=iter(script()))
    assert model_api(model) == "anthropic-messages" and model_api(ScriptedModel(messages=iter([]))) == "openai-chat"
    with Ledger.open(f"sqlite:///{tmp_path}/a.db") as ledger:
        middleware = _run_two_questions(model, ledger)
        assert len(middleware.assemblies) == len(model.seen) == 3
        for asm, seen in zip(middleware.assemblies, model.seen, strict=True):
            manifest = ledger.get_assembly(asm.id)
            assert (manifest["api"], manifest["model"]) == ("anthropic-messages", "claude-sonnet-4-5")
            assert asm.payload["system"].startswith("You answer weather questions.")  # top-level, not a message
            roles = [m["role"] for m in asm.payload["messages"]]
            assert roles[0] == "user" and all(a != b for a, b in itertools.pairwise(roles))  # alternation
            assert manifest["tokens"]["estimated_input"] <= 3000 - 300 - 100
            # what the model was handed: one system message, every call answered right after it
            assert isinstance(seen[0], SystemMessage) and not any(isinstance(m, SystemMessage) for m in seen[1:])
            _answers_follow_their_calls(seen[1:])
        # the two questions in a row went to Anthropic as one user message: the model got them as one
        first = model.seen[0][1:]
        assert len(first) == 1 and isinstance(first[0], HumanMessage)
        assert "Paris and Oslo" in str(first[0].content) and "time in Paris" in str(first[0].content)
        last = model.seen[-1]
        assert LONG not in " ".join(str(m.content) for m in last)  # the big result shrunk in this format too


def test_openai_models_keep_their_format_and_api_can_be_fixed(tmp_path) -> None:
    with Ledger.open(f"sqlite:///{tmp_path}/o.db") as ledger:
        chat = _run_two_questions(ScriptedModel(messages=iter(script())), ledger)
        assert {a.manifest["api"] for a in chat.assemblies} == {"openai-chat"}
    with Ledger.open(f"sqlite:///{tmp_path}/r.db") as ledger:
        model = ScriptedResponses(messages=iter(script()))
        responses = _run_two_questions(model, ledger)
        assert {a.manifest["api"] for a in responses.assemblies} == {"openai-responses"}
        assert all(a.payload["store"] is False and "instructions" in a.payload for a in responses.assemblies)
        assert len(model.seen[0][1:]) == 2  # OpenAI takes two user messages in a row as they are
        _answers_follow_their_calls(model.seen[-1][1:])
    with Ledger.open(f"sqlite:///{tmp_path}/f.db") as ledger:
        fixed = _run_two_questions(ScriptedModel(messages=iter(script())), ledger, api="anthropic-messages")
        assert {a.manifest["api"] for a in fixed.assemblies} == {"anthropic-messages"}
    with pytest.raises(Exception, match="unknown api"):
        LedgerMiddleware(ledger, window_tokens=3000, api="gemini")


@pytest.mark.parametrize("base", [ScriptedModel, ScriptedAnthropic, ScriptedResponses])
def test_a_changed_system_prompt_replaces_the_old_one_on_the_same_thread(tmp_path, base: type[ScriptedModel]) -> None:
    prompts = ["User is on the FREE plan.", "User is on the PRO plan.", "User is on the TEAM plan."]
    model = base(messages=iter([AIMessage(f"reply {k}") for k in range(len(prompts))]))
    model.seen = []
    saver = InMemorySaver()
    config = {"configurable": {"thread_id": "t"}}
    with Ledger.open(f"sqlite:///{tmp_path}/p.db") as ledger:
        middleware = LedgerMiddleware(ledger, window_tokens=8000, output_tokens=500)
        for k, prompt in enumerate(prompts):
            agent = create_agent(model, [], system_prompt=prompt, middleware=[middleware], checkpointer=saver)
            agent.invoke({"messages": [("user", f"question {k}")]}, config)
        for prompt, seen in zip(prompts, model.seen, strict=True):
            systems = [m.content for m in seen if isinstance(m, SystemMessage)]
            assert systems == [prompt]  # what create_agent sends without the middleware
        recorded = [r.content for r in ledger.store.records("default", "t") if getattr(r, "role", None) == "system"]
        assert recorded == prompts  # every version stays recorded


# -- what the request carries besides the messages ------------------------------------------------------------------


def _wired(kind: str, bodies: list[dict[str, Any]], **options: Any) -> Any:
    """A real ``ChatOpenAI`` (Responses) or ``ChatAnthropic`` whose HTTP transport is scripted (no network)."""
    import httpx2

    handle = scripted_reply(kind, bodies)

    transport = httpx2.MockTransport(handle)
    if kind == "anthropic":
        import anthropic
        from langchain_anthropic import ChatAnthropic

        client = anthropic.Anthropic(api_key="scripted", http_client=httpx2.Client(transport=transport))

        class WiredAnthropic(ChatAnthropic):
            @property
            def _client(self) -> Any:
                return client

        return WiredAnthropic(model="claude-sonnet-5-5", api_key="scripted", **options)
    from langchain_openai import ChatOpenAI

    http = httpx2.Client(transport=transport)
    return ChatOpenAI(model="gpt-4o", api_key="scripted", use_responses_api=True, http_client=http, **options)


@pytest.mark.parametrize("kind", ["anthropic", "responses"])
def test_the_reply_is_capped_at_the_reserve_and_responses_state_is_off(tmp_path, kind: str) -> None:
    bodies: list[dict[str, Any]] = []
    with Ledger.open(f"sqlite:///{tmp_path}/w.db") as ledger:
        middleware = LedgerMiddleware(ledger, window_tokens=4000, output_tokens=500, conversation_id="w")
        agent = create_agent(_wired(kind, bodies), [], system_prompt="Answer briefly.", middleware=[middleware])
        agent.invoke({"messages": [("user", "hello")]})
        small = create_agent(_wired(kind, bodies, max_tokens=200), [], middleware=[middleware])
        small.invoke({"messages": [("user", "again")]})  # a smaller cap on the model is kept
        first, second = bodies
        if kind == "anthropic":
            assert (first["max_tokens"], second["max_tokens"]) == (500, 200)
        else:
            assert (first["max_output_tokens"], second["max_output_tokens"]) == (500, 200)
            payload = middleware.assemblies[0].payload
            for key in ("store", "truncation", "include"):
                assert first[key] == payload[key], key
            # ChatOpenAI sends the assembled instructions as a leading system input item, not as "instructions"
            assert first["input"][0] == {"type": "message", "role": "system", "content": payload["instructions"]}
