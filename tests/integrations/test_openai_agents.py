"""The OpenAI Agents SDK integration in a real Runner loop with a scripted fake Model (no network)."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from agents import Agent, RunConfig, Runner, function_tool
from agents.items import ModelResponse
from agents.models.interface import Model
from agents.usage import Usage
from openai.types.responses import (
    ResponseFunctionToolCall,
    ResponseOutputMessage,
    ResponseOutputText,
    ResponseReasoningItem,
)

from ctxledger import Ledger
from ctxledger.errors import ConfigurationError
from ctxledger.integrations.openai_agents import LedgerInputFilter, LedgerSession

BIG = " ".join(f"row {i}: reading {i * 13 % 101}" for i in range(900))


@function_tool
def weather(city: str) -> str:
    """Current weather of a city."""
    return f"{city}: sunny. " + (BIG if city == "Oslo" else "")


@function_tool
def clock(city: str) -> str:
    """Local time of a city."""
    return f"{city}: 09:00"


def _call(n: int, name: str, city: str) -> ResponseFunctionToolCall:
    return ResponseFunctionToolCall(
        id=f"fc_{n}",
        call_id=f"call_{n}",
        name=name,
        arguments=f'{{"city": "{city}"}}',
        type="function_call",
        status="completed",
    )


class FakeModel(Model):
    """Replays scripted outputs and keeps the instructions and input each call was given."""

    def __init__(self) -> None:
        self.seen: list[tuple[str | None, list[Any]]] = []
        self.script = [
            [
                ResponseReasoningItem(id="rs_1", summary=[], type="reasoning", encrypted_content="gAAAAB1"),
                _call(1, "weather", "Paris"),
                _call(2, "weather", "Oslo"),
            ],
            [_call(3, "clock", "Paris")],
            [
                ResponseOutputMessage(
                    id="msg_1",
                    role="assistant",
                    status="completed",
                    type="message",
                    content=[
                        ResponseOutputText(text="Sunny in both; 09:00 in Paris.", type="output_text", annotations=[])
                    ],
                )
            ],
        ]

    async def get_response(self, system_instructions, input, *args: Any, **kwargs: Any) -> ModelResponse:
        self.seen.append((system_instructions, list(input) if not isinstance(input, str) else [input]))
        output = self.script[len(self.seen) - 1]
        return ModelResponse(
            output=output,
            usage=Usage(requests=1, input_tokens=150, output_tokens=25, total_tokens=175),
            response_id=None,
        )

    def stream_response(self, *args: Any, **kwargs: Any) -> Any:
        """The SDK's Model protocol requires it; these runs never stream, so a call is a test failure."""
        raise AssertionError("the scripted model does not stream")


def test_a_run_assembles_every_call_records_everything_and_usage(tmp_path) -> None:
    with Ledger.open(f"sqlite:///{tmp_path}/a.db") as ledger:
        model = FakeModel()
        agent = Agent(name="weather", instructions="Answer weather questions.", tools=[weather, clock], model=model)
        ledger_filter = LedgerInputFilter(
            ledger, conversation_id="run-1", window_tokens=3000, output_tokens=300, margin_tokens=100, model="gpt-5"
        )
        result = asyncio.run(
            Runner.run(
                agent,
                "Weather in Paris and Oslo, and the time in Paris?",
                run_config=RunConfig(
                    call_model_input_filter=ledger_filter, tool_error_formatter=ledger_filter.tool_error_formatter()
                ),
                hooks=ledger_filter.hooks(),
            )
        )
        assert result.final_output == "Sunny in both; 09:00 in Paris."
        assert len(ledger_filter.assemblies) == len(model.seen) == 3
        for asm, (instructions, items) in zip(ledger_filter.assemblies, model.seen, strict=True):
            manifest = ledger.get_assembly(asm.id)
            assert manifest["tokens"]["estimated_input"] <= 3000 - 300 - 100
            assert manifest["tokens"]["observed_input"] == 150
            assert instructions == "Answer weather questions."
            assert items == asm.payload["input"]  # the model saw exactly the assembled input
        second = model.seen[1][1]
        kinds = [i["type"] for i in second]
        assert kinds[1:4] == ["reasoning", "function_call", "function_call"]  # reasoning pinned to its calls
        assert BIG not in str(model.seen[2][1])  # the big result was shrunk for the model
        records = list(ledger.store.records("default", "run-1"))
        calls = [r for r in records if r.kind.value == "tool_call"]
        assert [(c.call_id, c.index) for c in calls] == [("call_1", 0), ("call_2", 1), ("call_3", 0)]
        assert records[-1].kind.value == "message" and records[-1].content == "Sunny in both; 09:00 in Paris."
        oslo = next(r for r in records if r.kind.value == "tool_artifact" and r.call_id == "call_2")
        assert ledger.rehydrate(oslo.id).decode().endswith(BIG)  # the whole output is kept
        why = ledger.explain(ledger_filter.assemblies[-1].id, oslo.id)
        assert why["status"] in ("included", "omitted") and why["reason"]


def test_a_session_keeps_the_history_in_the_ledger(tmp_path) -> None:
    with Ledger.open(f"sqlite:///{tmp_path}/s.db") as ledger:
        session = LedgerSession(ledger, "sess-1")
        model = FakeModel()
        agent = Agent(name="weather", instructions="Answer.", tools=[weather, clock], model=model)
        asyncio.run(Runner.run(agent, "Weather in Paris and Oslo?", session=session))
        items = asyncio.run(session.get_items())
        assert [i["type"] for i in items][:4] == ["message", "reasoning", "function_call", "function_call"]
        assert items[-1]["role"] == "assistant"
        assert len(asyncio.run(session.get_items(limit=2))) == 2
        with pytest.raises(ConfigurationError):
            asyncio.run(session.clear_session())


def test_server_side_state_is_refused(tmp_path) -> None:
    with Ledger.open(f"sqlite:///{tmp_path}/p.db") as ledger:
        ledger_filter = LedgerInputFilter(ledger, conversation_id="p", window_tokens=3000)
        from agents.run_config import CallModelData, ModelInputData

        orphan = [{"type": "function_call_output", "call_id": "call_9", "output": "x"}]
        data = CallModelData(
            model_data=ModelInputData(input=orphan, instructions=None), agent=Agent(name="a"), context=None
        )
        with pytest.raises(ConfigurationError, match="client-side"):
            ledger_filter(data)


def test_the_recall_tool_reads_back_a_shrunk_result(tmp_path) -> None:
    import dataclasses

    from agents.testing import ScriptedModel
    from integration_recall import recall_calls, strings

    from ctxledger.policy.base import RehydrationParams
    from ctxledger.policy.default import default_policy

    policy = dataclasses.replace(default_policy(), rehydration=RehydrationParams(recall_tool=True))

    def second(call: Any) -> list[Any]:
        ref = recall_calls(strings(call.input))[0]["ref"]
        return [
            ResponseFunctionToolCall(
                id="fc_9",
                call_id="call_9",
                name="recall",
                arguments=f'{{"ref": "{ref}", "start": 0, "end": 40}}',
                type="function_call",
            )
        ]

    from agents.testing.model import ModelStep

    final = FakeModel().script[2]
    model = ScriptedModel([[_call(2, "weather", "Oslo")], ModelStep.respond(second), final])
    with Ledger.open(f"sqlite:///{tmp_path}/r.db") as ledger:
        ledger_filter = LedgerInputFilter(
            ledger, conversation_id="rc", window_tokens=2000, output_tokens=200, margin_tokens=100, policy=policy
        )
        agent = Agent(name="w", instructions="Answer.", tools=[weather, ledger_filter.recall_tool()], model=model)
        asyncio.run(
            Runner.run(
                agent,
                "Oslo?",
                run_config=RunConfig(
                    call_model_input_filter=ledger_filter, tool_error_formatter=ledger_filter.tool_error_formatter()
                ),
                hooks=ledger_filter.hooks(),
            )
        )
        oslo = next(
            r
            for r in ledger.store.records("default", "rc")
            if r.kind.value == "tool_artifact" and r.call_id == "call_2"
        )
        answer = next(
            r
            for r in ledger.store.records("default", "rc")
            if r.kind.value == "tool_artifact" and r.call_id == "call_9"
        )
        assert ledger.rehydrate(answer.id) == ledger.rehydrate(oslo.id, (0, 40))
        recalls = ledger.get_assembly(ledger_filter.assemblies[-1].id)["recalls"]
        assert [(r["ref"], r["decision"]) for r in recalls] == [(oslo.id, "answered")]


class Recording(Model):
    """Replays scripted outputs (one list of output items per call) and keeps the instructions of each call."""

    def __init__(self, script: list[list[Any]]) -> None:
        self.script = script
        self.instructions: list[str | None] = []

    async def get_response(self, system_instructions, input, *args: Any, **kwargs: Any) -> ModelResponse:
        self.instructions.append(system_instructions)
        return ModelResponse(
            output=self.script[len(self.instructions) - 1],
            usage=Usage(requests=1, input_tokens=100, output_tokens=10, total_tokens=110),
            response_id=None,
        )

    def stream_response(self, *args: Any, **kwargs: Any) -> Any:
        """The SDK's Model protocol requires it; these runs never stream, so a call is a test failure."""
        raise AssertionError("the scripted model does not stream")


def _say(text: str) -> ResponseOutputMessage:
    return ResponseOutputMessage(
        id=f"msg_{abs(hash(text))}",
        role="assistant",
        status="completed",
        type="message",
        content=[ResponseOutputText(text=text, type="output_text", annotations=[])],
    )


def test_a_handoff_sends_the_new_agents_instructions_alone(tmp_path) -> None:
    triage_text, billing_text = "You triage. NEVER promise refunds.", "You do billing. Refunds are allowed."
    billing_model = Recording([[_say("Refund issued.")]])
    billing = Agent(name="billing", instructions=billing_text, model=billing_model)
    handoff = ResponseFunctionToolCall(
        id="fc_h", call_id="call_h", name="transfer_to_billing", arguments="{}", type="function_call"
    )
    triage_model = Recording([[handoff]])
    triage = Agent(name="triage", instructions=triage_text, handoffs=[billing], model=triage_model)
    with Ledger.open(f"sqlite:///{tmp_path}/h.db") as ledger:
        ledger_filter = LedgerInputFilter(ledger, conversation_id="h", window_tokens=8000, output_tokens=500)
        result = asyncio.run(
            Runner.run(
                triage,
                "Refund order A1",
                run_config=RunConfig(call_model_input_filter=ledger_filter),
                hooks=ledger_filter.hooks(),
            )
        )
        assert result.final_output == "Refund issued."
        assert triage_model.instructions == [triage_text]
        assert billing_model.instructions == [billing_text]  # what the SDK sends without the filter
        systems = [r for r in ledger.store.records("default", "h") if getattr(r, "role", None) == "system"]
        assert [s.content for s in systems] == [triage_text, billing_text]  # both versions stay recorded
        why = ledger.explain(ledger_filter.assemblies[-1].id, systems[0].id)
        assert (why["status"], why["reason"]) == ("omitted", "superseded")


def test_dynamic_instructions_replace_the_earlier_ones_and_the_fixed_part_does_not_grow(tmp_path) -> None:
    days = ["Monday", "Tuesday", "Wednesday", "Thursday", "Friday"]
    now = {"day": days[0]}
    model = Recording([[_say(f"Noted, {day}.")] for day in days])
    agent = Agent(name="a", instructions=lambda ctx, agent: f"Today is {now['day']}. Answer briefly.", model=model)
    with Ledger.open(f"sqlite:///{tmp_path}/d.db") as ledger:
        ledger_filter = LedgerInputFilter(ledger, conversation_id="d", window_tokens=8000, output_tokens=500)
        history: list[Any] = []
        for day in days:
            now["day"] = day
            result = asyncio.run(
                Runner.run(
                    agent,
                    [*history, {"role": "user", "content": f"What day is it? ({day})"}],
                    run_config=RunConfig(call_model_input_filter=ledger_filter),
                    hooks=ledger_filter.hooks(),
                )
            )
            history = result.to_input_list()
        assert model.instructions == [f"Today is {day}. Answer briefly." for day in days]
        charged = []  # one version of the instructions is charged, however many there were
        for asm in ledger_filter.assemblies:
            sent = [i for i in asm.manifest["included"] if i["reason"] == "instruction"]
            assert len(sent) == 1
            charged.append(sent[0]["tokens"])
        assert max(charged) - min(charged) <= 2, charged  # the day names differ by a token or two
        systems = [r for r in ledger.store.records("default", "d") if getattr(r, "role", None) == "system"]
        assert len(systems) == len(days)


@pytest.mark.parametrize("session_first", [True, False])
def test_a_session_and_a_filter_on_the_same_conversation_are_refused(tmp_path, session_first: bool) -> None:
    def session(ledger: Ledger, conversation: str) -> Any:
        return LedgerSession(ledger, conversation)

    def input_filter(ledger: Ledger, conversation: str) -> Any:
        return LedgerInputFilter(ledger, conversation_id=conversation, window_tokens=8000)

    first, second = (session, input_filter) if session_first else (input_filter, session)
    with Ledger.open(f"sqlite:///{tmp_path}/b.db") as ledger, Ledger.open("memory://") as other:
        kept = [first(ledger, "s1")]
        with pytest.raises(ConfigurationError, match=r"LedgerSession and LedgerInputFilter .*'s1'.* Use one"):
            second(ledger, "s1")
        kept.append(first(ledger, "s1"))  # the same kind twice is still one recorder of record
        kept.append(second(ledger, "s2"))  # another conversation of the ledger
        kept.append(second(other, "s1"))  # the same conversation id in another ledger
        kept.clear()
        second(ledger, "s1")  # once the others are gone


def test_a_session_alone_records_each_item_once(tmp_path) -> None:
    model = Recording([[_call(1, "weather", "Paris")], [_say("Sunny.")], [_call(2, "weather", "Rome")], [_say("Ok.")]])
    agent = Agent(name="w", instructions="You report the weather.", tools=[weather], model=model)
    with Ledger.open(f"sqlite:///{tmp_path}/s.db") as ledger:
        session = LedgerSession(ledger, "s1")
        for question in ("Weather in Paris?", "And Rome?"):
            asyncio.run(Runner.run(agent, question, session=session))
        records = list(ledger.store.records("default", "s1"))
        users = [r.content for r in records if getattr(r, "role", None) == "user"]
        assert users == ["Weather in Paris?", "And Rome?"]
        assert [r.call_id for r in records if r.kind.value == "tool_call"] == ["call_1", "call_2"]


def _responses_server(bodies: list[dict[str, Any]]) -> Any:
    """A real ``OpenAIResponsesModel`` whose HTTP transport is scripted (no network): it keeps each request body."""
    import json

    import httpx2
    from agents import OpenAIResponsesModel
    from openai import AsyncOpenAI

    def handle(request: Any) -> Any:
        bodies.append(json.loads(request.content))
        message = {"type": "message", "id": f"msg_{len(bodies)}", "role": "assistant", "status": "completed"}
        message["content"] = [{"type": "output_text", "text": "Refund issued.", "annotations": []}]
        usage = {"input_tokens": 50, "output_tokens": 5, "total_tokens": 55}
        usage |= {"input_tokens_details": {"cached_tokens": 0}, "output_tokens_details": {"reasoning_tokens": 0}}
        return httpx2.Response(
            200,
            json={
                "id": f"resp_{len(bodies)}",
                "object": "response",
                "created_at": 1,
                "model": "gpt-4o",
                "status": "completed",
                "output": [message],
                "parallel_tool_calls": True,
                "tool_choice": "auto",
                "tools": [],
                "usage": usage,
            },
        )

    client = AsyncOpenAI(
        api_key="scripted",
        base_url="http://scripted/v1",
        http_client=httpx2.AsyncClient(transport=httpx2.MockTransport(handle)),
    )
    return OpenAIResponsesModel(model="gpt-4o", openai_client=client)


def test_the_request_carries_the_assembled_settings_and_the_reply_reserve(tmp_path) -> None:
    from agents import ModelSettings

    bodies: list[dict[str, Any]] = []
    agent = Agent(name="billing", instructions="You do billing.", model=_responses_server(bodies))
    with Ledger.open(f"sqlite:///{tmp_path}/w.db") as ledger:
        ledger_filter = LedgerInputFilter(ledger, conversation_id="w", window_tokens=8000, output_tokens=700)
        settings = ledger_filter.model_settings(ModelSettings(temperature=0.2))
        config = RunConfig(call_model_input_filter=ledger_filter, model_settings=settings)
        asyncio.run(Runner.run(agent, "Refund order A1", run_config=config, hooks=ledger_filter.hooks()))
        (body,) = bodies
        payload = ledger_filter.assemblies[-1].payload
        for key in ("instructions", "input", "store", "truncation", "include"):
            assert body[key] == payload[key], key  # what went out is what was assembled and stored
        assert body["max_output_tokens"] == 700 and body["temperature"] == 0.2
        assert ledger_filter.model_settings(ModelSettings(max_tokens=300)).max_tokens == 300  # a smaller cap stays
