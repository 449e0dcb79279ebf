"""A PydanticAI user prompt with non-text parts (an image as bytes or as a URL) is recorded and sent as its text
with a short note per part left out, not as the Python repr of the parts (kilobytes of escaped bytes)."""

from __future__ import annotations

import asyncio

from pydantic_ai import Agent, BinaryContent, ImageUrl
from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart, UserPromptPart
from pydantic_ai.models.function import AgentInfo, FunctionModel

from ctxledger import Ledger
from ctxledger.integrations.pydantic_ai import LedgerCapability


def test_non_text_user_parts_are_noted_not_dumped() -> None:
    seen: list[list[ModelMessage]] = []

    def scripted(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        seen.append(messages)
        return ModelResponse(parts=[TextPart("ok")])

    ledger = Ledger.open("memory://")
    capability = LedgerCapability(ledger, conversation_id="img", window_tokens=8000, output_tokens=300)
    agent = Agent(FunctionModel(scripted), instructions="Describe.", capabilities=[capability])
    png = b"\x89PNG\r\n\x1a\n" + bytes(range(256)) * 40
    prompt = ["What is in these?", BinaryContent(data=png, media_type="image/png"), ImageUrl("https://x.test/a.png")]
    asyncio.run(agent.run(prompt))
    sent = [p.content for m in seen[-1] for p in m.parts if isinstance(p, UserPromptPart)]
    assert sent == [
        "What is in these? [image/png, 10,248 bytes: not recorded] [image/png https://x.test/a.png: not recorded]"
    ]
    assert capability.assemblies[0].input_tokens < 100
