"""LedgerCapability in a real PydanticAI agent run driven by a scripted FunctionModel (no network)."""

from __future__ import annotations

from pydantic_ai import Agent
from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart, ThinkingPart, ToolCallPart, ToolReturnPart
from pydantic_ai.models.function import AgentInfo, FunctionModel
from pydantic_ai.usage import RequestUsage

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

        result = agent.run_sync("Look up Paris, Oslo and Rome.")
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


def test_the_recall_tool_reads_back_under_the_hard_filters(tmp_path) -> None:
    import dataclasses

    from integration_recall import recall_calls

    from ctxledger.policy.base import RehydrationParams
    from ctxledger.policy.default import default_policy

    policy = dataclasses.replace(default_policy(), rehydration=RehydrationParams(recall_tool=True))
    seen: list[list[ModelMessage]] = []

    def scripted(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        seen.append(messages)
        if len(seen) == 1:
            return ModelResponse(parts=[ToolCallPart("lookup", {"city": "Oslo"}, tool_call_id="c1")])
        if len(seen) == 2:
            shown = " ".join(str(getattr(p, "content", "")) for m in messages for p in m.parts)
            ref = recall_calls(shown)[0]["ref"]
            assert "recall" in [t.name for t in info.function_tools]
            return ModelResponse(parts=[ToolCallPart("recall", {"ref": ref, "start": 0, "end": 50}, tool_call_id="c2")])
        return ModelResponse(parts=[TextPart("Read it.")])

    with Ledger.open(f"sqlite:///{tmp_path}/r.db") as ledger:
        capability = LedgerCapability(
            ledger, conversation_id="pr", window_tokens=2000, output_tokens=200, margin_tokens=100
        )
        capability.loop.assemble_options["policy"] = policy
        agent = Agent(FunctionModel(scripted), capabilities=[capability], tools=[capability.recall_tool()])

        @agent.tool_plain
        def lookup(city: str) -> str:
            """Look a city up."""
            return f"{city}: ok. " + BIG

        assert agent.run_sync("Look up Oslo.").output == "Read it."
        oslo = next(
            r for r in ledger.store.records("default", "pr") if r.kind.value == "tool_artifact" and r.call_id == "c1"
        )
        returns = [
            p
            for m in seen[-1]
            for p in getattr(m, "parts", ())
            if isinstance(p, ToolReturnPart) and p.tool_call_id == "c2"
        ]
        assert ledger.rehydrate(oslo.id, (0, 50)).decode() in str(returns[0].content)
        recalls = ledger.get_assembly(capability.assemblies[-1].id)["recalls"]
        assert [(r["ref"], r["decision"]) for r in recalls] == [(oslo.id, "answered")]
