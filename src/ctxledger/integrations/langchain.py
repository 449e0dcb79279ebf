"""LangChain v1 agents: :class:`LedgerMiddleware`, an ``AgentMiddleware`` that assembles every model call.

``create_agent(model, tools, middleware=[LedgerMiddleware(ledger, window_tokens=16_000)])``: on each model
call, ``wrap_model_call`` / ``awrap_model_call`` record the messages of the agent state not recorded yet
(the thread's history, as it happens), assemble the call under the budget, and call the handler with the
assembled system message and messages. The agent state is left untouched: the checkpoint keeps the
full history, and only the model sees the assembled context. The reply is recorded (its tool calls as one
assistant message with its parallel calls) and its ``usage_metadata`` stored against the assembly.

The conversation is the LangGraph thread (``config["configurable"]["thread_id"]``), else
``conversation_id``. Messages are recorded once each by their LangChain ``id``. Source: LangChain v1
*Custom middleware* (``wrap_model_call``, ``ModelRequest.override``) and ``langchain_core.messages``.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from langchain.agents.middleware import AgentMiddleware, ModelRequest, ModelResponse
from langchain_core.messages import AIMessage, AnyMessage, BaseMessage, SystemMessage, ToolMessage, convert_to_messages
from langchain_core.tools import BaseTool, StructuredTool
from langchain_core.utils.function_calling import convert_to_openai_tool

from ctxledger.assemble.assembler import Assembly
from ctxledger.assemble.recall import RECALL_TOOL, recall_schema
from ctxledger.integrations._loop import Budget, LoopLedger
from ctxledger.ledger import Ledger

__all__ = ["LedgerMiddleware"]


class LedgerMiddleware(AgentMiddleware):
    """Records a LangChain agent's messages and hands the model the assembled context (module docstring).

    Args:
        ledger: the ledger to record into and assemble from.
        window_tokens, output_tokens, margin_tokens: the token budget of every call.
        conversation_id: the conversation when the run has no ``thread_id``.
        model: the model name for the manifest and the tokenizer.
        **assemble_options: further :meth:`~ctxledger.Ledger.assemble` keywords (``policy``, ``counter`` …).
    """

    def __init__(
        self,
        ledger: Ledger,
        *,
        window_tokens: int,
        output_tokens: int = 4_096,
        margin_tokens: int = 512,
        conversation_id: str = "langchain",
        model: str = "gpt-4o",
        **assemble_options: Any,
    ) -> None:
        super().__init__()
        self.loop = LoopLedger(
            ledger, Budget(window_tokens, output_tokens, margin_tokens), model=model, **assemble_options
        )
        self.conversation_id = conversation_id

    @property
    def assemblies(self) -> list[Assembly]:
        """Every assembly made, in call order."""
        return self.loop.assemblies

    def recall_tool(self) -> BaseTool:
        """The ``recall`` tool as a LangChain tool: add it to the agent's tools when the policy enables recall.

        It answers through :meth:`~ctxledger.Ledger.rehydrate` under the hard filters of the thread's latest
        assembly (:mod:`ctxledger.assemble.recall`).
        """
        schema = recall_schema()["function"]

        def recall(ref: str, start: int | None = None, end: int | None = None, unit: str = "bytes") -> str:
            arguments = {k: v for k, v in {"ref": ref, "start": start, "end": end}.items() if v is not None}
            if unit != "bytes":
                arguments["unit"] = unit
            return self.loop.recall(self._thread(), arguments)

        return StructuredTool.from_function(recall, name=RECALL_TOOL, description=schema["description"])

    def wrap_model_call(
        self, request: ModelRequest, handler: Callable[[ModelRequest], ModelResponse]
    ) -> ModelResponse | AIMessage:
        """Record, assemble, call the model with the assembled messages, record the reply and its usage."""
        conversation, asm, assembled = self._before(request)
        response = handler(assembled)
        self._after(conversation, asm, response)
        return response

    async def awrap_model_call(
        self, request: ModelRequest, handler: Callable[[ModelRequest], Awaitable[ModelResponse]]
    ) -> ModelResponse | AIMessage:
        """The async form of :meth:`wrap_model_call`."""
        conversation, asm, assembled = self._before(request)
        response = await handler(assembled)
        self._after(conversation, asm, response)
        return response

    # -- steps -------------------------------------------------------------------------------------

    def _thread(self) -> str:
        try:
            from langgraph.config import get_config

            thread = (get_config().get("configurable") or {}).get("thread_id")
        except RuntimeError:  # outside a runnable context
            thread = None
        return str(thread) if thread else self.conversation_id

    def _before(self, request: ModelRequest) -> tuple[str, Assembly, ModelRequest]:
        conversation = self._thread()
        if request.system_message is not None:
            text = _text(request.system_message)
            self.loop.message(conversation, f"system:{text}", "system", text)
        for position, message in enumerate(request.messages):
            self._record(conversation, message, position)
        tools = [convert_to_openai_tool(t) for t in request.tools] if request.tools else None
        asm = self.loop.assemble(conversation, tools=tools)
        messages = convert_to_messages(asm.payload["messages"])
        system = [m for m in messages if isinstance(m, SystemMessage)]
        rest = [m for m in messages if not isinstance(m, SystemMessage)]
        joined = SystemMessage("\n\n".join(_text(m) for m in system)) if system else None
        return conversation, asm, request.override(messages=rest, system_message=joined)

    def _after(self, conversation: str, asm: Assembly, response: Any) -> None:
        results = response.result if isinstance(response, ModelResponse) else [response]
        for message in results:
            if isinstance(message, AIMessage):
                self._record(conversation, message, None)
                usage = message.usage_metadata or {}
                self.loop.usage(asm, usage.get("input_tokens"), usage.get("output_tokens"))

    def _record(self, conversation: str, message: AnyMessage | BaseMessage, position: int | None) -> None:
        key = message.id or f"position:{position}"
        if isinstance(message, AIMessage):
            calls = [(c["id"] or "", c["name"], json.dumps(c["args"], sort_keys=True)) for c in message.tool_calls]
            if calls:
                self.loop.calls(conversation, key, calls, text=_text(message))
            else:
                self.loop.message(conversation, key, "assistant", _text(message))
        elif isinstance(message, ToolMessage):
            self.loop.result(conversation, message.tool_call_id, _text(message), failed=message.status == "error")
        elif message.type == "human":
            self.loop.message(conversation, key, "user", _text(message))
        elif message.type == "system":
            self.loop.message(conversation, key, "system", _text(message))


def _text(message: BaseMessage) -> str:
    """A message's text: its string content, or its text blocks joined."""
    content = message.content
    if isinstance(content, str):
        return content
    return "".join(b if isinstance(b, str) else str(b.get("text", "")) for b in _blocks(content))


def _blocks(content: Sequence[Any]) -> list[Any]:
    return [b for b in content if isinstance(b, str) or (isinstance(b, dict) and b.get("type") == "text")]
