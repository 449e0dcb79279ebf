"""LedgerCapability in a real PydanticAI agent run driven by a scripted FunctionModel (no network)."""

from __future__ import annotations

import asyncio
import itertools
from typing import Any

import pytest
from pydantic_ai import Agent
from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart, ThinkingPart, ToolCallPart, ToolReturnPart
from pydantic_ai.models.function import AgentInfo, FunctionModel
from pydantic_ai.usage import RequestUsage
from scripted_provider_http import scripted_reply

from ctxledger import Ledger
from ctxledger.integrations.pydantic_ai import LedgerCapability

BIG = " ".join(f"line {i}: value {i * 31 % 89}" for i in range(900))


def test_every_request_is_assembled_and_the_run_history_is_untouched(tmp_path) -> None:
    seen: list[list[ModelMessage]] = []

    def scripted(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        seen.append(messages)
        usage = RequestUsage(input_tokens=90, output_tokens=10)
        step = len(seen)
        if step == 1:
            return ModelResponse(
                parts=[
                    ThinkingPart("two lookups", signature="sig-1", provider_name="anthropic"),
                    ToolCallPart("lookup", {"city": "Paris"}, tool_call_id="c1"),
                    ToolCallPart("lookup", {"city": "Oslo"}, tool_call_id="c2"),
                ],
                usage=usage,
            )
        if step == 2:
            return ModelResponse(parts=[ToolCallPart("lookup", {"city": "Rome"}, tool_call_id="c3")], usage=usage)
        return ModelResponse(parts=[TextPart("All three looked up.")], usage=usage)

    with Ledger.open(f"sqlite:///{tmp_path}/p.db") as ledger:
        capability = LedgerCapability(
            ledger, conversation_id="pa", window_tokens=3000, output_tokens=300, margin_tokens=100
        )
        agent = Agent(FunctionModel(scripted), system_prompt="You look things up.", capabilities=[capability])

        @agent.tool_plain
        def lookup(city: str) -> str:
            """Look a city up."""
            return f"{city}: ok. " + (BIG if city == "Oslo" else "")

        result = asyncio.run(agent.run("Look up Paris, Oslo and Rome."))
        assert result.output == "All three looked up."
        assert len(capability.assemblies) == len(seen) == 3
        for asm in capability.assemblies:
            manifest = ledger.get_assembly(asm.id)
            assert manifest["tokens"]["estimated_input"] <= 3000 - 300 - 100
            assert manifest["tokens"]["observed_input"] == 90
        # the run's own history keeps the whole Oslo output; the model saw it shrunk
        returns = [p for m in result.all_messages() for p in getattr(m, "parts", ()) if isinstance(p, ToolReturnPart)]
        assert any(BIG in str(p.content) for p in returns)
        assert BIG not in repr(seen[-1])
        # the thinking part went back unchanged on its own assistant turn
        thinking = [p for m in seen[1] for p in getattr(m, "parts", ()) if isinstance(p, ThinkingPart)]
        assert [(p.content, p.signature, p.provider_name) for p in thinking] == [("two lookups", "sig-1", "anthropic")]
        records = list(ledger.store.records("default", "pa"))
        calls = [r for r in records if r.kind.value == "tool_call"]
        assert [(c.call_id, c.index) for c in calls] == [("c1", 0), ("c2", 1), ("c3", 0)]
        assert sum(r.kind.value == "tool_artifact" for r in records) == 3
        assert records[-1].content == "All three looked up."
        oslo = next(r for r in records if r.kind.value == "tool_artifact" and r.call_id == "c2")
        why = ledger.explain(capability.assemblies[-1].id, oslo.id)
        assert why["status"] in ("included", "omitted") and why["reason"]


@pytest.mark.parametrize("kind", ["function", "anthropic"])
def test_the_recall_tool_reads_back_under_the_hard_filters(tmp_path, kind: str) -> None:
    import dataclasses

    from integration_recall import recall_calls

    from ctxledger.policy.base import RehydrationParams
    from ctxledger.policy.default import default_policy

    policy = dataclasses.replace(default_policy(), rehydration=RehydrationParams(recall_tool=True))
    seen: list[list[ModelMessage]] = []
    vault: list[str] = []

    def script(messages: list[ModelMessage], tools: list[str]) -> ModelResponse:
        if len(seen) == 1:
            return ModelResponse(parts=[ToolCallPart("lookup", {"city": "Oslo"}, tool_call_id="toolu_1")])
        if len(seen) == 2:  # read the shrunk result back as its hint says, and try the private record
            shown = " ".join(str(getattr(p, "content", "")) for m in messages for p in m.parts)
            ref = recall_calls(shown)[0]["ref"]
            assert "recall" in tools and vault[0] not in shown
            return ModelResponse(
                parts=[
                    ToolCallPart("recall", {"ref": ref, "start": 0, "end": 50}, tool_call_id="toolu_2"),
                    ToolCallPart("recall", {"ref": vault[0]}, tool_call_id="toolu_3"),
                ]
            )
        return ModelResponse(parts=[TextPart("Read it.")])

    if kind == "anthropic":
        from pydantic_ai.models.anthropic import AnthropicModel
        from pydantic_ai.providers.anthropic import AnthropicProvider

        class ScriptedAnthropic(AnthropicModel):
            async def request(self, messages: list[ModelMessage], model_settings: Any, params: Any) -> ModelResponse:
                seen.append(list(messages))
                return script(messages, [t.name for t in params.function_tools])

        model: Any = ScriptedAnthropic("claude-sonnet-4-5", provider=AnthropicProvider(api_key="scripted"))
    else:

        def scripted(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
            seen.append(messages)
            return script(messages, [t.name for t in info.function_tools])

        model = FunctionModel(scripted)

    with Ledger.open(f"sqlite:///{tmp_path}/r.db") as ledger:
        earlier = ledger.recorder("pr")  # recorded before the run: a result the policy keeps private
        earlier.user("Open the vault.")
        vault.append(earlier.tool_call("vault", {"q": "key"}, "vault contents", privacy_class="secret").artifact)
        capability = LedgerCapability(
            ledger, conversation_id="pr", window_tokens=2000, output_tokens=200, margin_tokens=100, policy=policy
        )
        agent = Agent(model, capabilities=[capability], tools=[capability.recall_tool()])

        @agent.tool_plain
        def lookup(city: str) -> str:
            """Look a city up."""
            return f"{city}: ok. " + BIG

        assert asyncio.run(agent.run("Look up Oslo.")).output == "Read it."
        assert {a.manifest["api"] for a in capability.assemblies} == {
            "anthropic-messages" if kind == "anthropic" else "openai-chat"
        }
        oslo = next(
            r
            for r in ledger.store.records("default", "pr")
            if r.kind.value == "tool_artifact" and r.call_id == "toolu_1"
        )
        returns = {
            p.tool_call_id: str(p.content)
            for m in seen[-1]
            for p in getattr(m, "parts", ())
            if isinstance(p, ToolReturnPart)
        }
        assert ledger.rehydrate(oslo.id, (0, 50)).decode() in returns["toolu_2"]
        assert "vault contents" not in returns["toolu_3"] and "refused" in returns["toolu_3"]
        recalls = ledger.get_assembly(capability.assemblies[-1].id)["recalls"]
        assert [(r["ref"], r["decision"]) for r in recalls] == [(oslo.id, "answered"), (vault[0], "refused")]
        assert recalls[0]["reason"] == "read_back" and recalls[1]["reason"].startswith("privacy")


# -- the format of the model in use ------------------------------------------------------------------------------


def _scripted_steps(seen: list[list[ModelMessage]]) -> ModelResponse:
    """Two parallel lookups, one more, then the answer (what a model would reply to each request)."""
    usage = RequestUsage(input_tokens=90, output_tokens=10)
    if len(seen) == 1:
        return ModelResponse(
            parts=[
                ThinkingPart("two lookups", signature="sig-1", provider_name="anthropic"),
                ToolCallPart("lookup", {"city": "Paris"}, tool_call_id="toolu_1"),
                ToolCallPart("lookup", {"city": "Oslo"}, tool_call_id="toolu_2"),
            ],
            usage=usage,
        )
    if len(seen) == 2:
        return ModelResponse(parts=[ToolCallPart("lookup", {"city": "Rome"}, tool_call_id="toolu_3")], usage=usage)
    return ModelResponse(parts=[TextPart("All three looked up.")], usage=usage)


def _anthropic_model(seen: list[list[ModelMessage]]) -> Any:
    """A real ``AnthropicModel`` whose request is scripted (no network): it keeps what it was handed."""
    from pydantic_ai.models.anthropic import AnthropicModel
    from pydantic_ai.providers.anthropic import AnthropicProvider

    class ScriptedAnthropic(AnthropicModel):
        async def request(self, messages: list[ModelMessage], model_settings: Any, params: Any) -> ModelResponse:
            seen.append(list(messages))
            return _scripted_steps(seen)

    return ScriptedAnthropic("claude-sonnet-4-5", provider=AnthropicProvider(api_key="scripted"))


def _run(model: Any, ledger: Ledger, **options: Any) -> tuple[LedgerCapability, Any]:
    capability = LedgerCapability(
        ledger, conversation_id="pa", window_tokens=3000, output_tokens=300, margin_tokens=100, **options
    )
    agent = Agent(model, system_prompt="You look things up.", capabilities=[capability])

    @agent.tool_plain
    def lookup(city: str) -> str:
        """Look a city up."""
        return f"{city}: ok. " + (BIG if city == "Oslo" else "")

    result = asyncio.run(agent.run("Look up Paris, Oslo and Rome."))
    return capability, result


def test_an_anthropic_model_gets_an_anthropic_assembly(tmp_path) -> None:
    from ctxledger.integrations.pydantic_ai import model_api

    seen: list[list[ModelMessage]] = []
    model = _anthropic_model(seen)
    assert model_api(model) == "anthropic-messages"
    with Ledger.open(f"sqlite:///{tmp_path}/a.db") as ledger:
        capability, result = _run(model, ledger)
        assert result.output == "All three looked up."
        assert len(capability.assemblies) == len(seen) == 3
        for asm, messages in zip(capability.assemblies, seen, strict=True):
            manifest = ledger.get_assembly(asm.id)
            assert (manifest["api"], manifest["model"]) == ("anthropic-messages", "claude-sonnet-4-5")
            assert asm.payload["system"] == "You look things up."  # top-level system text
            roles = [m["role"] for m in asm.payload["messages"]]
            assert roles[0] == "user" and all(a != b for a, b in itertools.pairwise(roles))
            assert manifest["tokens"]["estimated_input"] <= 3000 - 300 - 100
            assert manifest["tokens"]["observed_input"] == 90
            # handed to the model: requests and responses alternate, every call answered in the next request
            assert [type(m).__name__ for m in messages][::2] == ["ModelRequest"] * len(messages[::2])
            for response, answer in zip(messages[1::2], messages[2::2], strict=False):
                calls = {p.tool_call_id for p in response.parts if isinstance(p, ToolCallPart)}
                returned = {p.tool_call_id for p in answer.parts if isinstance(p, ToolReturnPart)}
                assert calls == returned
        # the thinking part went back unchanged on its own response, for the provider that made it
        thinking = [p for m in seen[1] for p in getattr(m, "parts", ()) if isinstance(p, ThinkingPart)]
        assert [(p.content, p.signature, p.provider_name) for p in thinking] == [("two lookups", "sig-1", "anthropic")]
        assert BIG not in repr(seen[-1])


def test_openai_models_keep_their_format_and_api_can_be_fixed(tmp_path) -> None:
    from pydantic_ai.models.openai import OpenAIResponsesModel
    from pydantic_ai.providers.openai import OpenAIProvider

    from ctxledger.integrations.pydantic_ai import model_api

    assert model_api(OpenAIResponsesModel("gpt-4o", provider=OpenAIProvider(api_key="scripted"))) == "openai-responses"
    seen: list[list[ModelMessage]] = []

    def scripted(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        seen.append(messages)
        return _scripted_steps(seen)

    assert model_api(FunctionModel(scripted)) == "openai-chat"
    with Ledger.open(f"sqlite:///{tmp_path}/o.db") as ledger:
        capability, _ = _run(FunctionModel(scripted), ledger, api="openai-responses")
        assert {a.manifest["api"] for a in capability.assemblies} == {"openai-responses"}
        assert all(a.payload["instructions"] == "You look things up." for a in capability.assemblies)
        thinking = [p for m in seen[1] for p in getattr(m, "parts", ()) if isinstance(p, ThinkingPart)]
        assert len(thinking) == 1  # the opaque part is handed back in this format too
    with pytest.raises(Exception, match="unknown api"):
        LedgerCapability(ledger, conversation_id="x", window_tokens=1000, api="gemini")


# -- the agent's instructions --------------------------------------------------------------------------------------

RULES = "Policy rule: always double-check the refund amount against the ledger. " * 300


def _instructions_run(
    model: Any, ledger: Ledger, window: int, instructions: Any, runs: int = 1, **options: Any
) -> LedgerCapability:
    capability = LedgerCapability(ledger, conversation_id="i", window_tokens=window, output_tokens=500, **options)
    agent = Agent(model, instructions=instructions, system_prompt="You help with refunds.", capabilities=[capability])
    history = None
    for k in range(runs):
        history = asyncio.run(agent.run(f"question {k}", message_history=history)).all_messages()
    return capability


@pytest.mark.parametrize("api", ["openai-chat", "openai-responses", "anthropic-messages"])
def test_instructions_are_recorded_counted_and_sent_once(tmp_path, api: str) -> None:
    got: list[tuple[str | None, list[ModelMessage]]] = []

    def scripted(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        got.append((info.instructions, messages))
        return ModelResponse(parts=[TextPart("ok")], usage=RequestUsage(input_tokens=90, output_tokens=10))

    with Ledger.open(f"sqlite:///{tmp_path}/i.db") as ledger:
        capability = _instructions_run(FunctionModel(scripted), ledger, 12_000, RULES, runs=2, api=api)
        for asm, (instructions, messages) in zip(capability.assemblies, got, strict=True):
            assert instructions == RULES.strip()  # as PydanticAI sends them, once
            system = [p.content for m in messages for p in m.parts if p.part_kind == "system-prompt"]
            assert system == ["You help with refunds."]  # not repeated as a system prompt part
            counted = sum(i["tokens"] for i in asm.manifest["included"] if i["reason"] == "instruction")
            assert counted >= len(RULES) // 6  # charged in the budget
            assert asm.manifest["tokens"]["estimated_input"] >= counted
        records = [r for r in ledger.store.records("default", "i") if getattr(r, "role", None) == "system"]
        assert [r.content for r in records] == ["You help with refunds.", RULES.strip()]  # recorded once


def test_instructions_too_large_for_the_window_are_refused(tmp_path) -> None:
    from ctxledger.errors import RequiredBlocksDoNotFit

    def scripted(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        raise AssertionError("a request over the budget must not reach the model")

    with Ledger.open(f"sqlite:///{tmp_path}/b.db") as ledger, pytest.raises(RequiredBlocksDoNotFit):
        _instructions_run(FunctionModel(scripted), ledger, 2000, RULES)


def test_changed_instructions_supersede_the_earlier_ones(tmp_path) -> None:
    got: list[str | None] = []

    def scripted(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        got.append(info.instructions)
        return ModelResponse(parts=[TextPart("ok")])

    days = iter(["Monday", "Tuesday", "Wednesday"])
    with Ledger.open(f"sqlite:///{tmp_path}/c.db") as ledger:
        capability = _instructions_run(FunctionModel(scripted), ledger, 4000, lambda: f"Today is {next(days)}.", 3)
        assert got == ["Today is Monday.", "Today is Tuesday.", "Today is Wednesday."]
        for asm, day in zip(capability.assemblies, ["Monday", "Tuesday", "Wednesday"], strict=True):
            sent = [i for i in asm.manifest["included"] if i["reason"] == "instruction"]
            texts = [ledger.store.get("default", i["ref"]).content for i in sent]
            assert f"Today is {day}." in texts and not any(t.startswith("Today") and day not in t for t in texts)


# -- what the request carries besides the messages ------------------------------------------------------------------


def _wire(kind: str, bodies: list[dict[str, Any]]) -> Any:
    """A real Anthropic or OpenAI Responses model whose HTTP transport is scripted (no network); keeps each body."""
    import httpx2

    handle = scripted_reply(kind, bodies)

    http = httpx2.AsyncClient(transport=httpx2.MockTransport(handle))
    if kind == "anthropic":
        from anthropic import AsyncAnthropic
        from pydantic_ai.models.anthropic import AnthropicModel
        from pydantic_ai.providers.anthropic import AnthropicProvider

        client = AsyncAnthropic(api_key="scripted", base_url="http://scripted", http_client=http)
        return AnthropicModel("claude-sonnet-5-5", provider=AnthropicProvider(anthropic_client=client))
    from openai import AsyncOpenAI
    from pydantic_ai.models.openai import OpenAIResponsesModel
    from pydantic_ai.providers.openai import OpenAIProvider

    client = AsyncOpenAI(api_key="scripted", base_url="http://scripted/v1", http_client=http)
    return OpenAIResponsesModel("gpt-4o", provider=OpenAIProvider(openai_client=client))


@pytest.mark.parametrize("kind", ["anthropic", "responses"])
def test_the_reply_is_capped_at_the_reserve_and_responses_state_is_off(tmp_path, kind: str) -> None:
    bodies: list[dict[str, Any]] = []
    with Ledger.open(f"sqlite:///{tmp_path}/w.db") as ledger:
        capability = LedgerCapability(ledger, conversation_id="w", window_tokens=4000, output_tokens=500)
        agent = Agent(_wire(kind, bodies), instructions="Answer briefly.", capabilities=[capability])
        asyncio.run(agent.run("hello"))
        asyncio.run(agent.run("again", model_settings={"max_tokens": 200}))  # a smaller cap is kept
        first, second = bodies
        if kind == "anthropic":
            assert (first["max_tokens"], second["max_tokens"]) == (500, 200)
            assert first["system"] == "Answer briefly." or first["system"][0]["text"] == "Answer briefly."
        else:
            assert (first["max_output_tokens"], second["max_output_tokens"]) == (500, 200)
            assert (first["store"], first["truncation"]) == (False, "disabled")
            assert first["instructions"] == capability.assemblies[0].payload["instructions"] == "Answer briefly."
