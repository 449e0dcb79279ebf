"""No integration loses an image silently. In every framework (the Agents SDK, LangChain, PydanticAI):

* an image, file or other media part of a user turn is recorded (and sent) as a note naming it
  (``[image/png, N bytes: not recorded]``, ``[file a.pdf: not recorded]``), never dropped, never its bytes;
* an image a tool returns is recorded: the tool output's bytes hold it (as a ``data:`` URL), ``rehydrate`` gives it
  back, and the model is sent the tool-output image handling's placeholder (``[image 1: image/png, WxH px]``), not
  base64 text.

Images are real PNGs of hypothesis-drawn sizes.
"""

from __future__ import annotations

import asyncio
import base64
import io
from collections.abc import Callable
from typing import Any

import pytest
from agents import Agent, RunConfig, Runner, ToolOutputImage, function_tool
from agents.testing import ScriptedModel, assistant_message, function_call
from hypothesis import given, settings
from hypothesis import strategies as st
from langchain.agents import create_agent
from langchain_core.messages import AIMessage, HumanMessage
from langchain_core.tools import tool
from PIL import Image
from pydantic_ai import Agent as PydanticAgent
from pydantic_ai import BinaryContent, DocumentUrl
from pydantic_ai.messages import ModelResponse, TextPart, ToolCallPart
from pydantic_ai.models.function import FunctionModel
from test_langchain import ScriptedModel as ScriptedChatModel

from ctxledger import Ledger
from ctxledger.integrations.langchain import LedgerMiddleware
from ctxledger.integrations.openai_agents import LedgerInputFilter
from ctxledger.integrations.pydantic_ai import LedgerCapability
from ctxledger.records import Message, ToolArtifact


def _png(width: int, height: int) -> bytes:
    buf = io.BytesIO()
    Image.new("RGB", (width, height), (width % 256, height % 256, 7)).save(buf, "PNG")
    return buf.getvalue()


def _agents(ledger: Ledger, png: bytes) -> str:
    url = "data:image/png;base64," + base64.b64encode(png).decode()

    @function_tool
    def shot() -> ToolOutputImage:
        """A screenshot."""
        return ToolOutputImage(image_url=url)

    model = ScriptedModel([[function_call("shot", {}, call_id="c1")], [assistant_message("red")]])
    ctx = LedgerInputFilter(ledger, conversation_id="m", window_tokens=8000, output_tokens=300)
    agent = Agent(name="a", instructions="Look.", tools=[shot], model=model)
    parts = [
        {"type": "input_text", "text": "What is this?"},
        {"type": "input_image", "image_url": url, "detail": "auto"},
        {"type": "input_file", "filename": "a.pdf", "file_data": "data:application/pdf;base64,JVBERi0="},
    ]
    config = RunConfig(call_model_input_filter=ctx, tool_error_formatter=ctx.tool_error_formatter())
    asyncio.run(Runner.run(agent, [{"role": "user", "content": parts}], run_config=config, hooks=ctx.hooks()))
    return str(model.calls[-1].input)


def _langchain(ledger: Ledger, png: bytes) -> str:
    b64 = base64.b64encode(png).decode()

    @tool
    def shot() -> list[dict[str, Any]]:
        """A screenshot."""
        return [{"type": "image", "base64": b64, "mime_type": "image/png"}]

    model = ScriptedChatModel(
        messages=iter([AIMessage("", tool_calls=[{"id": "c1", "name": "shot", "args": {}}]), AIMessage("red")])
    )
    model.seen = []
    middleware = LedgerMiddleware(ledger, window_tokens=8000, output_tokens=300, conversation_id="m")
    agent = create_agent(model, [shot], system_prompt="Look.", middleware=[middleware])
    content = [
        {"type": "text", "text": "What is this?"},
        {"type": "image", "base64": b64, "mime_type": "image/png"},
        {"type": "file", "url": "https://x.test/a.pdf", "mime_type": "application/pdf"},
    ]
    agent.invoke({"messages": [HumanMessage(content=content)]})
    return " ".join(str(m.content) for m in model.seen[-1])


def _pydantic_ai(ledger: Ledger, png: bytes) -> str:
    seen: list[Any] = []

    def scripted(messages: list[Any], info: Any) -> ModelResponse:
        seen.append(messages)
        if len(seen) == 1:
            return ModelResponse(parts=[ToolCallPart("shot", {}, tool_call_id="c1")])
        return ModelResponse(parts=[TextPart("red")])

    ctx = LedgerCapability(ledger, conversation_id="m", window_tokens=8000, output_tokens=300)
    agent = PydanticAgent(FunctionModel(scripted), system_prompt="Look.", capabilities=[ctx])

    @agent.tool_plain
    def shot() -> BinaryContent:
        """A screenshot."""
        return BinaryContent(data=png, media_type="image/png")

    prompt = ["What is this?", BinaryContent(data=png, media_type="image/png"), DocumentUrl("https://x.test/a.pdf")]
    asyncio.run(agent.run(prompt))
    return str(seen[-1])


RUNS: dict[str, Callable[[Ledger, bytes], str]] = {
    "agents": _agents,
    "langchain": _langchain,
    "pydantic_ai": _pydantic_ai,
}


@pytest.mark.parametrize("framework", sorted(RUNS))
@settings(max_examples=3, deadline=None)
@given(width=st.integers(1, 300), height=st.integers(1, 300))
def test_images_are_recorded_or_noted_never_silently_dropped(framework: str, width: int, height: int) -> None:
    png = _png(width, height)
    with Ledger.open("memory://") as ledger:
        sent = RUNS[framework](ledger, png)
        records = list(ledger.store.records("default", "m"))
        user = next(r for r in records if isinstance(r, Message) and r.role.value == "user")
        assert f"[image/png, {len(png):,} bytes: not recorded]" in str(user.content), user.content
        assert "a.pdf: not recorded]" in str(user.content), user.content
        (artifact,) = (r for r in records if isinstance(r, ToolArtifact))
        held = ledger.rehydrate(artifact.id).decode()
        assert base64.b64decode(held[held.index("base64,") + 7 :].split()[0]) == png  # the tool's image is recorded
        assert f"[image 1: image/png, {width}x{height} px]" in sent
        if framework == "agents":  # Responses takes images in a tool output: the image itself goes along
            assert "'type': 'input_image'" in sent
        else:  # OpenAI Chat tool messages take text only: a reference names the artifact that holds it
            assert base64.b64encode(png).decode()[:40] not in sent and f"rehydrate {artifact.id}" in sent
