"""PydanticAI: :class:`LedgerCapability`, a capability whose ``wrap_model_request`` assembles every model call.

``Agent(model, capabilities=[LedgerCapability(ledger, conversation_id="c", window_tokens=16_000)])``: each
model request records the run's messages not recorded yet, assembles the call under the budget, and hands
the model the assembled messages (``dataclasses.replace(request_context, messages=...)``). It changes what
the model sees, not the run's message history. The response is recorded as it comes (its tool calls as one
assistant message with its parallel calls) and its usage stored against the assembly.

Mapping of PydanticAI message parts (``pydantic_ai.messages``): ``SystemPromptPart`` → a system message,
the agent's instructions (``instructions=``, ``@agent.instructions``, as ``ModelRequestParameters.instruction_parts``
joined) → the system message in force (:meth:`~ctxledger.integrations._loop.LoopLedger.instructions`: a change
supersedes the earlier ones; they are counted in the budget and sent as PydanticAI sends instructions),
``UserPromptPart`` → a user message (text), ``TextPart`` → assistant text, ``ToolCallPart`` → a tool call,
``ToolReturnPart`` → its result (a failed one when its ``outcome`` is ``failed`` or ``retried``: a tool that
raised, ``ModelRetry``, arguments that did not validate; handed back with ``outcome="failed"``),
``RetryPromptPart`` answering a call → a failed result. ``ThinkingPart``
and ``CompactionPart`` are opaque, provider-pinned records: kept whole on the assistant message
(``meta["pydantic_ai_parts"]``) and handed back, unchanged, on the assistant turn they belong to, so that
PydanticAI sends them to the provider that made them.

Each request is assembled in the format of the model in use (:func:`model_api`), so that provider's rules are
applied before PydanticAI's own adapter maps the messages: ``anthropic-messages`` for an ``AnthropicModel``
(whatever its provider: Anthropic, Bedrock, Vertex), ``openai-responses`` for an ``OpenAIResponsesModel``,
``openai-chat`` otherwise; ``api=`` fixes it. The assembled payload is read back as PydanticAI messages
(:mod:`ctxledger.integrations._payload`): system text as ``SystemPromptPart`` s of the first request, each
assistant message as one ``ModelResponse``, and the user side between two responses as one ``ModelRequest``
(Anthropic's ``tool_result`` blocks as ``ToolReturnPart`` s before its text). Source: PydanticAI
*Capabilities* (``AbstractCapability.wrap_model_request``, ``ModelRequestContext``), ``pydantic_ai.messages``
and ``pydantic_ai.models`` (``WrapperModel.wrapped``).
"""

from __future__ import annotations

import base64
import dataclasses
import hashlib
import json
from collections.abc import Sequence
from typing import Any

from pydantic_ai import RunContext, Tool
from pydantic_ai.capabilities import AbstractCapability
from pydantic_ai.messages import (
    BinaryContent,
    CachePoint,
    CompactionPart,
    FileUrl,
    InstructionPart,
    ModelMessage,
    ModelMessagesTypeAdapter,
    ModelRequest,
    ModelResponse,
    RetryPromptPart,
    StructuredContent,
    SystemPromptPart,
    TextContent,
    TextPart,
    ThinkingPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
)
from pydantic_ai.models import ModelRequestContext

from ctxledger.assemble.assembler import Assembly
from ctxledger.assemble.recall import RECALL_TOOL, recall_schema
from ctxledger.budget import DEFAULT_BUDGET
from ctxledger.errors import ConfigurationError
from ctxledger.integrations._loop import Budget, LoopLedger
from ctxledger.integrations._payload import APIS, sent_messages
from ctxledger.ledger import Ledger
from ctxledger.policy.base import Policy

__all__ = ["LedgerCapability", "model_api"]

_FORMATS = (
    ("pydantic_ai.models.anthropic", "AnthropicModel", "anthropic-messages"),
    ("pydantic_ai.models.openai", "OpenAIResponsesModel", "openai-responses"),
)


def model_api(model: Any) -> str:
    """The format a PydanticAI model speaks: ``anthropic-messages``, ``openai-responses`` or ``openai-chat``.

    Told by class, without importing the provider packages: an ``AnthropicModel`` (or a subclass) speaks
    Anthropic Messages, an ``OpenAIResponsesModel`` Responses, any other model OpenAI Chat. A wrapper
    (``WrapperModel``: instrumentation, concurrency limits) is read through its ``wrapped`` model.
    """
    while hasattr(model, "wrapped"):
        model = model.wrapped
    for cls in type(model).__mro__:
        for module, name, api in _FORMATS:
            if cls.__name__ == name and cls.__module__.startswith(module):
                return api
    return "openai-chat"


OPAQUE_PARTS = "pydantic_ai_parts"
"""``meta`` key holding an assistant message's thinking and compaction parts as PydanticAI serialises them."""

_FAILED_OUTCOMES = ("failed", "retried")
"""``ToolReturnPart.outcome`` values that report a failed call (``denied`` and ``interrupted`` are results)."""


@dataclasses.dataclass
class LedgerCapability(AbstractCapability[Any]):
    """Records a PydanticAI run and hands each model request the assembled context (module docstring).

    Args:
        ledger: the ledger to record into and assemble from.
        conversation_id: the conversation the run belongs to.
        window_tokens, output_tokens, margin_tokens: the token budget of every call (default
            :data:`~ctxledger.budget.DEFAULT_BUDGET`, as :meth:`~ctxledger.Ledger.assemble`: 128,000, 4,096, 512).
        model: the model name for the manifest and the tokenizer (default: the model's ``model_name`` when its
            tokenizer is known, else the format's default: ``LoopLedger.model_for``).
        api: the format to assemble in (default: the model's, :func:`model_api`).
        policy: the policy to assemble under (default: the ledger's).

    Raises:
        ConfigurationError: ``api`` is not one of ``openai-chat``, ``openai-responses``, ``anthropic-messages``.
    """

    ledger: Ledger
    conversation_id: str
    window_tokens: int = DEFAULT_BUDGET.window_tokens
    output_tokens: int = DEFAULT_BUDGET.output_tokens
    margin_tokens: int = DEFAULT_BUDGET.margin_tokens
    model: str | None = None
    api: str | None = None
    policy: Policy | None = None
    loop: LoopLedger = dataclasses.field(init=False)

    def __post_init__(self) -> None:
        """Create the loop that records and assembles for this capability."""
        if self.api is not None and self.api not in APIS:
            raise ConfigurationError(f"unknown api {self.api!r}; use one of {', '.join(APIS)}")
        options = {"policy": self.policy} if self.policy is not None else {}
        budget = Budget(self.window_tokens, self.output_tokens, self.margin_tokens)
        self.loop = LoopLedger(self.ledger, budget, **options)

    @property
    def assemblies(self) -> list[Assembly]:
        """Every assembly made, in call order."""
        return self.loop.assemblies

    def recall_tool(self) -> Tool[Any]:
        """The ``recall`` tool as a PydanticAI tool (pass it in the agent's ``tools`` when the policy enables recall).

        It answers through :meth:`~ctxledger.Ledger.rehydrate` under the hard filters of the latest assembly
        (:mod:`ctxledger.assemble.recall`).
        """

        def recall(ref: str, start: int | None = None, end: int | None = None, unit: str = "bytes") -> str:
            arguments: dict[str, Any] = {
                k: v for k, v in {"ref": ref, "start": start, "end": end}.items() if v is not None
            }
            if unit != "bytes":
                arguments["unit"] = unit
            return self.loop.recall(self.conversation_id, arguments)

        return Tool(recall, name=RECALL_TOOL, description=recall_schema()["function"]["description"], takes_ctx=False)

    async def wrap_model_request(
        self, ctx: RunContext[Any], *, request_context: ModelRequestContext, handler: Any
    ) -> ModelResponse:
        """Record the new messages, assemble, send the assembled messages, record the response and its usage."""
        for index, message in enumerate(request_context.messages):
            self._record(message, f"m{index}")
        params = request_context.model_request_parameters
        instructions = InstructionPart.join(params.instruction_parts or ())
        self.loop.instructions(self.conversation_id, instructions)
        tools = [
            {
                "type": "function",
                "function": {
                    "name": t.name,
                    "description": t.description or "",
                    "parameters": t.parameters_json_schema,
                },
            }
            for t in [*params.function_tools, *params.output_tools]
        ]
        api = self.api or model_api(request_context.model)
        model = self.model or self.loop.model_for(api, getattr(request_context.model, "model_name", None))
        asm = self.loop.assemble(self.conversation_id, tools=tools or None, api=api, model=model)
        messages = self._to_messages(asm, api, instructions)
        settings = self._settings(request_context)
        response = await handler(dataclasses.replace(request_context, messages=messages, model_settings=settings))
        self._record(response, "")
        self.loop.usage(asm, response.usage.input_tokens, response.usage.output_tokens)
        return response

    def _settings(self, request_context: ModelRequestContext) -> Any:
        """The request's model settings with the reply capped at the reserve ``O`` and Responses state off.

        ``max_tokens`` becomes ``output_tokens`` (a smaller one set on the model, agent or run is kept). For an
        ``OpenAIResponsesModel``, ``openai_store=False`` and ``openai_truncation="disabled"`` unless set, as
        the assembled Responses payload has them.
        """
        settings: dict[str, Any] = dict(request_context.model_settings or {})
        cap = settings.get("max_tokens")
        settings["max_tokens"] = min(cap, self.output_tokens) if cap else self.output_tokens
        if model_api(request_context.model) == "openai-responses":
            settings.setdefault("openai_store", False)
            settings.setdefault("openai_truncation", "disabled")
        return settings

    # -- recording ---------------------------------------------------------------------------------

    def _record(self, message: ModelMessage, key: str) -> None:
        conv = self.conversation_id
        if isinstance(message, ModelResponse):
            key = _response_key(message)
            text = "".join(p.content for p in message.parts if isinstance(p, TextPart))
            calls = [
                (p.tool_call_id, p.tool_name, p.args_as_json_str())
                for p in message.parts
                if isinstance(p, ToolCallPart)
            ]
            opaque = [p for p in message.parts if isinstance(p, ThinkingPart | CompactionPart)]
            meta = {OPAQUE_PARTS: _dump(opaque)} if opaque else None
            if calls:
                self.loop.calls(conv, key, calls, text=text or None, meta=meta)
            elif text:
                self.loop.message(conv, key, "assistant", text, meta=meta)
            return
        for j, part in enumerate(message.parts):
            part_key = f"{key}:{j}:{_digest(repr(part))}"
            if isinstance(part, SystemPromptPart):
                self.loop.message(conv, f"system:{_digest(part.content)}", "system", part.content)
            elif isinstance(part, UserPromptPart):
                content = part.content if isinstance(part.content, str) else _user_text(part.content)
                self.loop.message(conv, part_key, "user", content)
            elif isinstance(part, ToolReturnPart):
                failed = getattr(part, "outcome", "success") in _FAILED_OUTCOMES
                self.loop.result(conv, part.tool_call_id, _tool_output(part), failed=failed)
            elif isinstance(part, RetryPromptPart) and part.tool_name and part.tool_call_id:
                self.loop.result(conv, part.tool_call_id, part.model_response(), failed=True)

    # -- the assembled messages ------------------------------------------------------------------------

    def _to_messages(self, asm: Assembly, api: str, instructions: str | None) -> list[ModelMessage]:
        """The assembled payload as PydanticAI messages (requests and responses alternate).

        The agent's ``instructions`` are assembled as a system turn but go to the model as PydanticAI sends
        them (``ModelRequestParameters.instruction_parts``), so they are left out of the system prompt parts.
        """
        out: list[ModelMessage] = []
        parts: list[Any] = []
        names: dict[str, str] = {}
        records = self.loop.recorder(self.conversation_id).records
        for sent in sent_messages(asm, api, records):
            if sent.role == "assistant":
                if parts:
                    out.append(ModelRequest(parts=parts))
                    parts = []
                response_parts: list[Any] = []
                kept = next((records[r].meta.get(OPAQUE_PARTS) for r in sent.refs if r in records), None)
                if kept:
                    response_parts += ModelMessagesTypeAdapter.validate_python([{"kind": "response", "parts": kept}])[
                        0
                    ].parts
                if sent.text:
                    response_parts.append(TextPart(sent.text))
                for call_id, tool, arguments in sent.calls:
                    names[call_id] = tool
                    response_parts.append(ToolCallPart(tool, arguments, tool_call_id=call_id))
                out.append(ModelResponse(parts=response_parts))
            elif sent.role == "tool":
                call_id = sent.call_id or ""
                part = ToolReturnPart(names.get(call_id, "tool"), sent.text, tool_call_id=call_id)
                parts.append(dataclasses.replace(part, outcome="failed") if sent.is_error else part)
            elif sent.role == "system":
                text = sent.text
                if instructions:
                    text, found = _without(text, instructions)
                    instructions = None if found else instructions
                if text:
                    parts.append(SystemPromptPart(text))
            else:
                parts.append(UserPromptPart(sent.text))
        if parts:
            out.append(ModelRequest(parts=parts))
        return out


def _tool_output(part: ToolReturnPart) -> str:
    """A tool return's output text, with the files it returned (``part.files``) on lines of their own.

    An image with its bytes (``BinaryContent``, a ``data:`` URL) is kept as a ``data:`` URL, so the output's bytes
    hold it and the tool-output image handling shows it (a placeholder; an image block for Anthropic); any other
    file is named by a note (:func:`_user_text`'s), never dropped.
    """
    text = part.model_response_str()
    files = list(getattr(part, "files", None) or ())
    return "\n".join(t for t in [text, *map(_file_text, files)] if t)


def _file_text(file: Any) -> str:
    if isinstance(file, BinaryContent) and file.media_type.startswith("image/"):
        return f"data:{file.media_type};base64,{base64.b64encode(file.data).decode('ascii')}"
    if isinstance(file, FileUrl) and file.url.startswith("data:image/"):
        return file.url
    return _user_text([file])


def _user_text(parts: Sequence[Any]) -> str:
    """A multi-part user prompt as text: its text parts, and a note for each part that is not text.

    Only text is recorded: an image, audio, video or document (bytes, URL or uploaded file) is named by a short
    note (its media type and size or URL), never dumped as its Python repr; a cache point adds nothing.
    """
    out: list[str] = []
    for part in parts:
        if isinstance(part, str):
            out.append(part)
        elif isinstance(part, TextContent | StructuredContent):
            out.append(str(part.content))
        elif isinstance(part, BinaryContent):
            out.append(f"[{part.media_type}, {len(part.data):,} bytes: not recorded]")
        elif isinstance(part, FileUrl):
            out.append(f"[{part.media_type} {part.url}: not recorded]")
        elif not isinstance(part, CachePoint):
            out.append(f"[{getattr(part, 'kind', type(part).__name__)}: not recorded]")
    return " ".join(out)


def _without(text: str, instructions: str) -> tuple[str, bool]:
    """``text`` without the ``instructions`` it holds, and whether it held them.

    They are the whole text, or one of the system texts the Responses serializer joins with a blank line.
    """
    sep = "\n\n"
    if text == instructions:
        return "", True
    if text.startswith(instructions + sep):
        return text[len(instructions + sep) :], True
    if text.endswith(sep + instructions):
        return text[: -len(sep + instructions)], True
    if sep + instructions + sep in text:
        return text.replace(sep + instructions + sep, sep, 1), True
    return text, False


def _dump(parts: list[Any]) -> list[Any]:
    """Parts as PydanticAI serialises them (JSON), to be loaded back unchanged."""
    return ModelMessagesTypeAdapter.dump_python([ModelResponse(parts=parts)], mode="json")[0]["parts"]


def _response_key(message: ModelResponse) -> str:
    """A response's key: its parts' identity (the same response object reappears in later requests)."""
    return "response:" + _digest(json.dumps(_dump(list(message.parts)), sort_keys=True))


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]
