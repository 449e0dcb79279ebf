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
                run_config=RunConfig(call_model_input_filter=ledger_filter),
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
                agent, "Oslo?", run_config=RunConfig(call_model_input_filter=ledger_filter), hooks=ledger_filter.hooks()
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
