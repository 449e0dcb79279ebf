"""LangChain v1 agents: :class:`LedgerMiddleware`, an ``AgentMiddleware`` that assembles every model call.

``create_agent(model, tools, middleware=[LedgerMiddleware(ledger, window_tokens=16_000)])``: on each model
call, ``wrap_model_call`` / ``awrap_model_call`` record the messages of the agent state not recorded yet
(the thread's history, as it happens), assemble the call under the budget, and call the handler with the
assembled system message and messages. The agent state is left untouched: the checkpoint keeps the
full history, and only the model sees the assembled context. The reply is recorded (its tool calls as one
assistant message with its parallel calls) and its ``usage_metadata`` stored against the assembly.

The call is assembled in the format of the chat model in use (:func:`model_api`), so that provider's rules
are applied: ``anthropic-messages`` for an Anthropic chat model (``ChatAnthropic``, whose ``_llm_type`` is
``anthropic-chat``; Bedrock's ``anthropic-bedrock-chat`` too), ``openai-responses`` for a ``ChatOpenAI`` with
``use_responses_api=True``, ``openai-chat`` otherwise; ``api=`` fixes it. The assembled payload is read back as
LangChain messages (:mod:`ctxledger.integrations._payload`): Anthropic's top-level ``system`` as the system
message, its ``tool_result`` blocks as ``ToolMessage`` s (``ChatAnthropic`` merges them back into one user
message), thinking blocks and Responses reasoning items as content blocks of their ``AIMessage``.

The conversation is the LangGraph thread (``config["configurable"]["thread_id"]``), else
``conversation_id``; a run with neither is refused (``ConfigurationError``) rather than recorded into one
conversation every such run would share, whose earlier messages each model call would be handed. Messages
are recorded once each by their LangChain ``id``. Source: LangChain v1
*Custom middleware* (``wrap_model_call``, ``ModelRequest.override``), ``langchain_core.messages`` and
``BaseChatModel._llm_type``.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from langchain.agents.middleware import AgentMiddleware, ModelRequest, ModelResponse
from langchain_core.messages import AIMessage, AnyMessage, BaseMessage, HumanMessage, SystemMessage, ToolMessage
from langchain_core.tools import BaseTool, StructuredTool
from langchain_core.utils.function_calling import convert_to_openai_tool

from ctxledger.assemble.assembler import Assembly
from ctxledger.assemble.recall import RECALL_TOOL, recall_schema
from ctxledger.budget import DEFAULT_BUDGET
from ctxledger.errors import ConfigurationError
from ctxledger.integrations._loop import Budget, LoopLedger
from ctxledger.integrations._media import DATA_URL, note, url_note
from ctxledger.integrations._payload import APIS, Sent, sent_messages
from ctxledger.json_text import decode_json
from ctxledger.ledger import Ledger
from ctxledger.serialize.openai_responses import ENCRYPTED_REASONING

__all__ = ["LedgerMiddleware", "call_settings", "model_api"]


def model_api(model: Any) -> str:
    """The format a LangChain chat model speaks: ``anthropic-messages``, ``openai-responses`` or ``openai-chat``.

    An Anthropic chat model reports an ``_llm_type`` starting with ``anthropic`` (``ChatAnthropic``:
    ``anthropic-chat``); a ``ChatOpenAI`` with ``use_responses_api=True`` (or ``output_version="responses/v1"``)
    speaks Responses; everything else is taken as OpenAI Chat, LangChain's own message form. A model bound
    with tools (a ``RunnableBinding``) is read through its ``bound`` model.
    """
    while hasattr(model, "bound") and not hasattr(model, "_llm_type"):
        model = model.bound
    try:
        llm_type = str(model._llm_type)
    except (AttributeError, NotImplementedError):
        llm_type = ""
    if llm_type.startswith("anthropic"):
        return "anthropic-messages"
    if getattr(model, "use_responses_api", None) is True or getattr(model, "output_version", None) == "responses/v1":
        return "openai-responses"
    return "openai-chat"


def call_settings(model: Any, api: str, settings: Mapping[str, Any], reserve: int) -> dict[str, Any]:
    """The call's ``model_settings`` (bind keywords) with the reply capped at ``reserve`` and Responses state off.

    Only keywords the chat model has as settings are added (``ChatOpenAI``, ``ChatAnthropic``): ``max_tokens``
    = ``reserve`` (the budget's ``O``; a smaller one on the model or in ``settings`` is kept); for a model that
    speaks Responses (``api``), ``store=False``, ``truncation="disabled"`` and ``include`` with
    ``reasoning.encrypted_content``, as the assembled Responses payload has them, unless set on the model or in
    ``settings``. Another chat model gets ``settings`` unchanged.
    """
    while hasattr(model, "bound") and not hasattr(model, "_llm_type"):
        model = model.bound
    fields = getattr(type(model), "model_fields", {})
    out = dict(settings)
    if "max_tokens" in fields:
        caps = [c for c in (out.get("max_tokens"), getattr(model, "max_tokens", None)) if isinstance(c, int)]
        out["max_tokens"] = min([*caps, reserve])
    if api == "openai-responses":
        for key, value in (("store", False), ("truncation", "disabled")):
            if key in fields and key not in out and getattr(model, key, None) is None:
                out[key] = value
        if "include" in fields and "include" not in out:
            include = list(getattr(model, "include", None) or [])
            out["include"] = include + ([] if ENCRYPTED_REASONING in include else [ENCRYPTED_REASONING])
    return out


def _model_name(model: Any) -> str | None:
    for attr in ("model_name", "model"):
        name = getattr(model, attr, None)
        if isinstance(name, str) and name:
            return name
    return None


class LedgerMiddleware(AgentMiddleware):
    """Records a LangChain agent's messages and hands the model the assembled context (module docstring).

    Args:
        ledger: the ledger to record into and assemble from.
        window_tokens, output_tokens, margin_tokens: the token budget of every call (default
            :data:`~ctxledger.budget.DEFAULT_BUDGET`, as :meth:`~ctxledger.Ledger.assemble`: 128,000, 4,096, 512).
        conversation_id: the conversation when the run has no ``thread_id`` (default none: such a run is refused).
        model: the model name for the manifest and the tokenizer (default: the chat model's ``model_name``
            when it can be counted, else the format's default: ``LoopLedger.model_for``).
        api: the format to assemble in (default: the chat model's, :func:`model_api`).
        **assemble_options: further :meth:`~ctxledger.Ledger.assemble` keywords (``policy``, ``counter`` …).

    Raises:
        ConfigurationError: ``api`` is not one of ``openai-chat``, ``openai-responses``, ``anthropic-messages``;
            on a model call, the run has no ``thread_id`` and no ``conversation_id`` was given.
    """

    def __init__(
        self,
        ledger: Ledger,
        *,
        window_tokens: int = DEFAULT_BUDGET.window_tokens,
        output_tokens: int = DEFAULT_BUDGET.output_tokens,
        margin_tokens: int = DEFAULT_BUDGET.margin_tokens,
        conversation_id: str | None = None,
        model: str | None = None,
        api: str | None = None,
        **assemble_options: Any,
    ) -> None:
        super().__init__()
        if api is not None and api not in APIS:
            raise ConfigurationError(f"unknown api {api!r}; use one of {', '.join(APIS)}")
        self.loop = LoopLedger(ledger, Budget(window_tokens, output_tokens, margin_tokens), **assemble_options)
        self.conversation_id = conversation_id
        self.model = model
        self.api = api
        self._threads: dict[str, list[tuple[Any, ...]]] = {}  # conversation -> shapes of its messages, in order

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
        if thread:
            return str(thread)
        if self.conversation_id is None:
            raise ConfigurationError(
                "the run has no thread_id, so there is no conversation to record it in: invoke the agent with "
                "config={'configurable': {'thread_id': ...}} (one per conversation), or give "
                "LedgerMiddleware(conversation_id=...)"
            )
        return self.conversation_id

    def _before(self, request: ModelRequest) -> tuple[str, Assembly, ModelRequest]:
        conversation = self._thread()
        if request.system_message is not None:
            self.loop.instructions(conversation, _text(request.system_message))
        known = self._threads.setdefault(conversation, [])
        for position, message in enumerate(request.messages):
            shape = _shape(message)
            if position < len(known) and known[position] == shape:
                continue  # recorded from an earlier run: a client without a checkpointer resends it with a new id
            del known[position:]
            known.append(shape)
            self._record(conversation, message, position)
        tools = [convert_to_openai_tool(t) for t in request.tools] if request.tools else None
        api = self.api or model_api(request.model)
        model = self.model or self.loop.model_for(api, _model_name(request.model))
        asm = self.loop.assemble(conversation, tools=tools, api=api, model=model)
        messages = [_to_langchain(m) for m in sent_messages(asm, api, self.loop.recorder(conversation).records)]
        system = [m for m in messages if isinstance(m, SystemMessage)]
        rest = [m for m in messages if not isinstance(m, SystemMessage)]
        joined = SystemMessage("\n\n".join(_text(m) for m in system)) if system else None
        settings = call_settings(request.model, api, request.model_settings, self.loop.budget.output_tokens)
        return conversation, asm, request.override(messages=rest, system_message=joined, model_settings=settings)

    def _after(self, conversation: str, asm: Assembly, response: Any) -> None:
        results = response.result if isinstance(response, ModelResponse) else [response]
        for message in results:
            if isinstance(message, AIMessage):
                self._threads.setdefault(conversation, []).append(_shape(message))
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


def _shape(message: AnyMessage | BaseMessage) -> tuple[Any, ...]:
    """What makes a message the same message at the same place in a thread: its type, text, calls or call id."""
    if isinstance(message, AIMessage):
        calls = tuple((c["id"], c["name"], json.dumps(c["args"], sort_keys=True)) for c in message.tool_calls)
        return ("ai", _text(message), calls)
    if isinstance(message, ToolMessage):
        return ("tool", _text(message), message.tool_call_id, message.status)
    return (message.type, _text(message))


def _to_langchain(sent: Sent) -> BaseMessage:
    """One assembled message as a LangChain message (see the module docstring)."""
    if sent.role == "system":
        return SystemMessage(sent.text)
    if sent.role == "tool":
        content = sent.content if isinstance(sent.content, str | list) else sent.text
        return ToolMessage(content, tool_call_id=sent.call_id or "", status="error" if sent.is_error else "success")
    if sent.role == "assistant":
        calls = [{"id": cid, "name": name, "args": _args(arguments)} for cid, name, arguments in sent.calls]
        content: str | list[Any] = [*map(dict, sent.thinking), *_text_blocks(sent)] if sent.thinking else sent.text
        return AIMessage(content, tool_calls=calls)
    return HumanMessage(sent.content if isinstance(sent.content, str | list) else sent.text)


def _text_blocks(sent: Sent) -> list[dict[str, Any]]:
    return [{"type": "text", "text": sent.text}] if sent.text else []


def _args(arguments: str) -> dict[str, Any]:
    """Arguments as a mapping (``{}`` when they are not a JSON object or do not decode)."""
    parsed = decode_json(arguments or "{}")
    return parsed if isinstance(parsed, dict) else {}


def _text(message: BaseMessage) -> str:
    """A message's text: its string content, or its text blocks joined, with a note for each media block.

    An image, audio, video or file block is not recorded: a note takes its place (:mod:`._media`: its media type
    and size, URL or file name). In a tool's output an image with its bytes (base64 or a ``data:`` URL) is kept
    as a ``data:`` URL in the output text instead, so the output's bytes hold it and the tool-output image
    handling shows it (a placeholder; an image block for Anthropic). Other blocks (thinking, tool use) are
    recorded elsewhere or not at all.
    """
    content = message.content
    if isinstance(content, str):
        return content
    tool = isinstance(message, ToolMessage)
    out: list[str] = []
    for b in content:
        if isinstance(b, str) or (isinstance(b, dict) and b.get("type") == "text"):
            out.append(b if isinstance(b, str) else str(b.get("text", "")))
        elif isinstance(b, dict) and b.get("type") in _MEDIA_BLOCKS:
            url = _data_url(b)
            out.append(url if tool and url else (" " if out else "") + _block_note(b, url))
    return "".join(out)


_MEDIA_BLOCKS = frozenset({"image", "image_url", "input_image", "file", "input_file", "audio", "input_audio", "video"})
"""LangChain content block types that carry media (standard v1 blocks, OpenAI's and the older LangChain forms)."""


def _data_url(block: Mapping[str, Any]) -> str | None:
    """A media block's bytes as a ``data:`` URL, when it carries them (else ``None``)."""
    url = block.get("url") or block.get("image_url")
    url = url.get("url") if isinstance(url, Mapping) else url
    if isinstance(url, str) and url.startswith(DATA_URL):
        return url
    data = block.get("base64") or (block.get("data") if block.get("source_type") == "base64" else None)
    if isinstance(data, str) and data:
        media = block.get("mime_type") or f"{block.get('type', 'image')}/*"
        return f"data:{media};base64,{data}"
    return None


def _block_note(block: Mapping[str, Any], url: str | None) -> str:
    """The note recorded in place of a media block (:func:`._media.note`)."""
    kind = str(block.get("type")).removeprefix("input_").removesuffix("_url")
    if url is not None:
        return url_note(url, kind)
    where = block.get("url") or block.get("image_url") or block.get("filename") or block.get("id")
    where = where.get("url") if isinstance(where, Mapping) else where
    return url_note(where, kind) if isinstance(where, str) and "://" in where else note(f"{kind} {where or ''}".strip())
