"""The OpenAI Agents SDK: an input filter that assembles every model call, a ``Session``, usage hooks.

* :class:`LedgerInputFilter` is a ``RunConfig(call_model_input_filter=...)``: before each model call it
  records the input items not recorded yet (the user's input, the model's earlier outputs, tool outputs),
  assembles the call under the budget in the Responses format, and returns the assembled instructions and
  input items, so the model sees the assembled context while the run keeps its own items.
* :class:`LedgerHooks` (``Runner.run(..., hooks=...)``) records each response as it comes (its reasoning
  items, message and parallel function calls) and stores its usage against the assembly it was made with.
* :meth:`LedgerInputFilter.tool_error_formatter` (``RunConfig(tool_error_formatter=...)``) tells the filter
  which calls raised: the SDK hands the model an error string in place of the tool's output, and that output
  is recorded as a *failed* result (the policy keeps failed calls). A tool with its own
  ``failure_error_function`` (or ``timeout_error_function``) bypasses the run's formatter; wrap that function in
  :meth:`LedgerInputFilter.failure_error_function`. A call that timed out and got the SDK's default timeout
  message is marked by the hooks. The hooks refuse to run a tool under a ``RunConfig`` without the filter's
  formatter, since its failures would be recorded as successes. The rule is
  :class:`~ctxledger.integrations._agent_failures.ToolFailures`.
* :class:`LedgerSession` implements the SDK's ``Session`` protocol on a ledger conversation; it learns of failed
  calls by the same rule (its own ``tool_error_formatter``, ``failure_error_function`` and ``hooks``). A session
  and a filter both record what they see, so the two on the same conversation of a ledger are refused
  (:class:`~ctxledger.errors.ConfigurationError` from the second one created): use one of them.

State is client-managed: the assembled input is the whole context. A run with ``previous_response_id`` or a
server-side ``conversation_id`` keeps history on OpenAI's servers, which the filter cannot see or budget;
it raises :class:`~ctxledger.errors.ConfigurationError` saying so. Source: Agents SDK ``RunConfig``,
``CallModelData`` / ``ModelInputData``, ``RunConfig.tool_error_formatter`` / ``ToolErrorFormatterArgs``,
``RunHooks.on_llm_end`` / ``on_tool_start`` / ``on_tool_end`` and ``memory.Session``.
"""

from __future__ import annotations

import hashlib
import weakref
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from agents import Agent, FunctionTool, ModelSettings, RunContextWrapper, function_tool
from agents.items import ModelResponse, TResponseInputItem
from agents.memory import SessionABC
from agents.run_config import CallModelData, ModelInputData, ToolErrorFormatterArgs
from agents.tool import default_tool_error_function

from ctxledger.assemble.assembler import Assembly
from ctxledger.assemble.recall import RECALL_TOOL, recall_schema
from ctxledger.budget import DEFAULT_BUDGET
from ctxledger.errors import ConfigurationError, InputError
from ctxledger.hashing import canonical_json
from ctxledger.ingest.openai_responses import chat_messages
from ctxledger.integrations._agent_failures import FailureHooks, Formatter, ToolFailures
from ctxledger.integrations._loop import Budget, LoopLedger
from ctxledger.integrations._media import DATA_URL, note, url_note
from ctxledger.ledger import Ledger
from ctxledger.policy.base import Policy
from ctxledger.serialize.openai_responses import ENCRYPTED_REASONING, OpenAIResponsesSerializer
from ctxledger.units import build_units

__all__ = ["LedgerHooks", "LedgerInputFilter", "LedgerSession"]

SOURCE = "<openai-agents>"

_RECORDERS: weakref.WeakKeyDictionary[Ledger, dict[str, weakref.WeakSet[Any]]] = weakref.WeakKeyDictionary()
"""Per ledger, per conversation: the live filters and sessions that record it (one kind at a time)."""


def _claim(ledger: Ledger, conversation_id: str, owner: LedgerInputFilter | LedgerSession) -> None:
    """Register ``owner`` as a recorder of ``conversation_id``; refuse a filter and a session on the same one.

    Raises:
        ConfigurationError: a live object of the other kind records the same conversation of this ledger.
    """
    owners = _RECORDERS.setdefault(ledger, {}).setdefault(conversation_id, weakref.WeakSet())
    if any(isinstance(o, LedgerSession) != isinstance(owner, LedgerSession) for o in owners):
        raise ConfigurationError(
            f"LedgerSession and LedgerInputFilter both record conversation {conversation_id!r} of this ledger, "
            "so every item would be recorded twice. Use one: LedgerInputFilter alone (no session; pass the "
            "history as the run's input, e.g. result.to_input_list()) or LedgerSession alone (no "
            "call_model_input_filter)"
        )
    owners.add(owner)


class LedgerInputFilter:
    """``call_model_input_filter`` that records new items and returns the assembled input (module docstring).

    Args:
        ledger: the ledger to record into and assemble from.
        conversation_id: the conversation the run belongs to.
        window_tokens, output_tokens, margin_tokens: the token budget of every call (default
            :data:`~ctxledger.budget.DEFAULT_BUDGET`, as :meth:`~ctxledger.Ledger.assemble`: 128,000, 4,096, 512).
        policy: the policy to assemble under (default: the ledger's).
        model: the model name for the manifest and the tokenizer.

    Raises:
        ConfigurationError: a :class:`LedgerSession` of the same ledger records ``conversation_id`` (the two
            would record every item twice: use one of them).
    """

    def __init__(
        self,
        ledger: Ledger,
        *,
        conversation_id: str,
        window_tokens: int = DEFAULT_BUDGET.window_tokens,
        output_tokens: int = DEFAULT_BUDGET.output_tokens,
        margin_tokens: int = DEFAULT_BUDGET.margin_tokens,
        policy: Policy | None = None,
        model: str = "gpt-4o",
    ) -> None:
        options = {"policy": policy} if policy is not None else {}
        self.loop = LoopLedger(
            ledger, Budget(window_tokens, output_tokens, margin_tokens), api="openai-responses", model=model, **options
        )
        self.conversation_id = conversation_id
        self.failures = ToolFailures()
        """Which calls failed (:meth:`tool_error_formatter`, :meth:`failure_error_function`, :meth:`hooks`)."""
        _claim(ledger, conversation_id, self)

    @property
    def failed_calls(self) -> set[str]:
        """Provider call ids of failed calls; their outputs are recorded as failed results."""
        return self.failures.calls

    @property
    def assemblies(self) -> list[Assembly]:
        """Every assembly made, in call order."""
        return self.loop.assemblies

    def __call__(self, data: CallModelData[Any]) -> ModelInputData:
        """Record the new input items, assemble, and return the assembled instructions and input."""
        self.loop.instructions(self.conversation_id, data.model_data.instructions)
        record_items(self.loop, self.conversation_id, data.model_data.input, failed=self.failed_calls)
        unknown = [
            i.get("call_id")
            for i in map(_plain, data.model_data.input)
            if i.get("type") == "function_call_output"
            and not self.loop.knows_call(self.conversation_id, i.get("call_id"))
        ]
        if unknown:
            check_client_state(previous_response_id=f"(outputs for unseen calls {unknown})")
        asm = self.loop.assemble(self.conversation_id, tools=_tools(data.agent))
        return ModelInputData(input=list(asm.payload["input"]), instructions=asm.payload.get("instructions"))

    def model_settings(self, base: ModelSettings | None = None) -> ModelSettings:
        """Model settings that make the SDK's request carry what the assembled payload carries.

        An input filter returns only the instructions and input items; the rest of the request comes from the
        model settings. Pass these as ``RunConfig(model_settings=...)``: ``store=False``,
        ``truncation="disabled"``, ``response_include=["reasoning.encrypted_content"]`` (the assembled
        Responses payload's), and ``max_tokens`` = the reserved reply ``output_tokens`` (the budget's ``O``;
        a smaller ``max_tokens`` in ``base`` is kept). Settings ``base`` gives otherwise are kept.
        """
        base = base or ModelSettings()
        reserve = self.loop.budget.output_tokens
        include = list(base.response_include or [])
        include += [] if ENCRYPTED_REASONING in include else [ENCRYPTED_REASONING]
        return base.resolve(
            ModelSettings(
                store=False,
                truncation="disabled",
                response_include=include,
                max_tokens=min(base.max_tokens, reserve) if base.max_tokens else reserve,
            )
        )

    def tool_error_formatter(self, base: Callable[[ToolErrorFormatterArgs[Any]], Any] | None = None) -> Formatter:
        """A ``RunConfig(tool_error_formatter=...)`` that marks each call whose tool raised as failed.

        The SDK calls it when a function tool raises (``kind="tool_exception"``) or the model calls a tool the
        agent lacks (``tool_not_found``); the call's output (the error string the model gets) is then recorded
        as a failed result. An ``approval_rejected`` call is recorded as a result, not a failure. The message
        the model gets is ``base``'s (sync or async) when given, else the SDK's default. Tools with their own
        ``failure_error_function`` never reach it: see :meth:`failure_error_function`.
        """
        return self.failures.tool_error_formatter(base)

    def failure_error_function(self, base: Callable[[Any, Exception], Any] = default_tool_error_function) -> Any:
        """A tool's ``failure_error_function`` that marks the call as failed, then formats the error.

        Pass it as ``function_tool(f, failure_error_function=...)`` (or ``timeout_error_function``); the message
        the model gets is ``base(context, error)`` (sync or async; default: the SDK's message).
        """
        return self.failures.failure_error_function(base)

    def recall_tool(self) -> FunctionTool:
        """The ``recall`` tool as an Agents SDK function tool (add it to the agent when the policy enables recall).

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

        return function_tool(
            recall, name_override=RECALL_TOOL, description_override=recall_schema()["function"]["description"]
        )

    def hooks(self) -> LedgerHooks:
        """Run hooks that record each response and its usage against this filter's assemblies.

        They also mark a call the SDK answered with its default timeout message as failed, and refuse a run without
        :meth:`tool_error_formatter` (:class:`LedgerHooks`).
        """
        return LedgerHooks(self)


class LedgerHooks(FailureHooks):
    """Records every response as it comes and stores its usage against the call's assembly.

    As :class:`~ctxledger.integrations._agent_failures.FailureHooks`, it marks a call answered with the SDK's
    default timeout message as failed, and refuses to run a tool under a ``RunConfig`` whose ``tool_error_formatter``
    is not the filter's (:meth:`LedgerInputFilter.tool_error_formatter`).

    Raises:
        ConfigurationError: a tool is about to run under a ``RunConfig`` without the filter's formatter, so a
            failure would be recorded as a success.
    """

    def __init__(self, input_filter: LedgerInputFilter) -> None:
        super().__init__(input_filter.failures)
        self.filter = input_filter

    async def on_llm_end(self, context: RunContextWrapper[Any], agent: Agent[Any], response: ModelResponse) -> None:
        """Record the response's output items; its usage goes to the latest assembly.

        The SDK reports a response without usage as 0 input tokens; no call has an empty prompt, so that is
        taken as no usage reported (nothing stored) rather than an observed 0.
        """
        loop = self.filter.loop
        items = [item.model_dump(mode="json", exclude_none=True) for item in response.output]
        record_items(loop, self.filter.conversation_id, items)
        usage = response.usage
        if loop.assemblies and usage.input_tokens > 0:
            loop.usage(loop.assemblies[-1], usage.input_tokens, usage.output_tokens)


class LedgerSession(SessionABC):
    """The SDK's ``Session`` protocol on a ledger conversation (``session_id`` is the conversation id).

    ``add_items`` records the items into the conversation (each once); ``get_items`` returns the
    conversation's whole history as Responses input items, rendered from the graph (the latest ``limit``
    when given). ``pop_item`` and ``clear_session`` would rewrite history, which the ledger never does:
    they raise :class:`~ctxledger.errors.ConfigurationError`.

    A tool output item reaches the session as text alone, so the session learns which calls failed as the filter
    does (:class:`~ctxledger.integrations._agent_failures.ToolFailures`): run with
    ``RunConfig(tool_error_formatter=session.tool_error_formatter())`` and ``hooks=session.hooks()``, and wrap a
    tool's own ``failure_error_function`` / ``timeout_error_function`` in :meth:`failure_error_function`; the output
    of such a call is recorded as a failed result.

    Raises:
        ConfigurationError: a :class:`LedgerInputFilter` of the same ledger records ``session_id`` (use one).
    """

    def __init__(self, ledger: Ledger, session_id: str) -> None:
        _claim(ledger, session_id, self)
        self.ledger = ledger
        self.session_id = session_id
        self.session_settings = None
        self.loop = LoopLedger(ledger, Budget(1_000_000), api="openai-responses")
        self.failures = ToolFailures()
        """Which calls failed (:meth:`tool_error_formatter`, :meth:`failure_error_function`, :meth:`hooks`)."""

    def tool_error_formatter(self, base: Callable[[ToolErrorFormatterArgs[Any]], Any] | None = None) -> Formatter:
        """A ``RunConfig(tool_error_formatter=...)`` that marks each call whose tool raised as failed.

        As :meth:`LedgerInputFilter.tool_error_formatter`: the message the model gets is ``base``'s when given,
        else the SDK's default.
        """
        return self.failures.tool_error_formatter(base)

    def failure_error_function(self, base: Callable[[Any, Exception], Any] = default_tool_error_function) -> Any:
        """A tool's ``failure_error_function`` / ``timeout_error_function`` that marks the call as failed.

        As :meth:`LedgerInputFilter.failure_error_function`.
        """
        return self.failures.failure_error_function(base)

    def hooks(self) -> FailureHooks:
        """Run hooks that mark a call answered with the SDK's default timeout message as failed.

        They refuse to run a tool under a ``RunConfig`` without :meth:`tool_error_formatter`
        (:class:`~ctxledger.errors.ConfigurationError`, raised by the SDK as the cause of its ``UserError``).
        """
        return FailureHooks(self.failures)

    async def get_items(self, limit: int | None = None) -> list[TResponseInputItem]:
        """The history as Responses input items (instructions are the agent's, not session items)."""
        if self.ledger.store.head_seq("default", self.session_id) == 0:
            return []
        records = list(self.ledger.store.records("default", self.session_id))
        units, _ = build_units(records, self.ledger.store.blobs.get)
        turns = [t for u in units for t in u.turns if t.role not in ("system", "developer")]
        if not turns:
            return []
        items = OpenAIResponsesSerializer().build(turns, model="session")["input"]
        return items[-limit:] if limit else items

    async def add_items(self, items: list[TResponseInputItem]) -> None:
        """Record ``items`` (each once); the output of a call that failed (class docstring) as a failed result."""
        record_items(self.loop, self.session_id, [dict(i) for i in items], failed=self.failures.calls)

    async def pop_item(self) -> TResponseInputItem | None:
        """Refused: the ledger is append-only."""
        raise ConfigurationError("a ledger session is append-only: record a correction instead of popping an item")

    async def clear_session(self) -> None:
        """Refused: the ledger is append-only."""
        raise ConfigurationError("a ledger session is append-only; start a new session_id instead of clearing")


def record_items(
    loop: LoopLedger, conversation_id: str, items: Sequence[Any], *, failed: set[str] | frozenset[str] = frozenset()
) -> None:
    """Record Responses input items not recorded yet, grouping a turn's reasoning, message and calls.

    Items with an ``id`` are recorded under it; others under their position and content hash. The output of a
    call whose id is in ``failed`` is recorded as a failed result.

    Raises:
        ConfigurationError: an ``item_reference`` (server-side state the filter cannot see).
        InputError: an item the Responses importer refuses (names its index and field).
    """
    plain = [_plain(i) for i in items]
    for k, item in enumerate(plain):
        if item.get("type") == "item_reference":
            raise ConfigurationError(
                f"input item {k} references server-side state; ctxledger manages state client-side "
                "(no previous_response_id, no server conversation)"
            )
    for message, loc in chat_messages([_text_only(i) for i in plain], SOURCE):
        first = plain[loc.index or 0]
        key = str(first.get("id") or f"{loc.index}:{_digest(canonical_json(first))}")
        role = message["role"]
        if role == "tool":
            call_id = message["tool_call_id"]
            loop.result(conversation_id, call_id, str(message["content"]), failed=call_id in failed)
        elif message.get("tool_calls"):
            calls = [(c["id"], c["function"]["name"], c["function"]["arguments"]) for c in message["tool_calls"]]
            loop.calls(conversation_id, key, calls, text=message.get("content"), thinking=message.get("thinking") or ())
        else:
            loop.message(conversation_id, key, role, _flat(message["content"]))


_TEXT_PARTS = ("input_text", "output_text", "refusal")


def _text_only(item: dict[str, Any]) -> dict[str, Any]:
    """``item`` with each content part that is not text replaced by a note (:mod:`._media`).

    A message's image, file or audio part becomes an ``input_text`` note (its media type and size, its URL or its
    file name). A tool output's image given as a ``data:`` URL is kept as that URL in the output text, so the
    output's bytes hold the image and the tool-output image handling shows it (a placeholder; an image block for
    Anthropic); an image by file id or remote URL and a file become notes.
    """
    if item.get("type") == "function_call_output" and isinstance(item.get("output"), list):
        return {**item, "output": [_output_part(p) for p in item["output"]]}
    content = item.get("content")
    if item.get("type", "message") != "message" or not isinstance(content, list):
        return item
    parts = [p if _is_text(p) else {"type": "input_text", "text": _part_note(p)} for p in content]
    spaced = [{**p, "text": " " + p["text"]} if k and not _is_text(content[k]) else p for k, p in enumerate(parts)]
    return {**item, "content": spaced}


def _is_text(part: Any) -> bool:
    return not isinstance(part, Mapping) or part.get("type") in _TEXT_PARTS


def _output_part(part: Any) -> Any:
    if _is_text(part):
        return part
    url = part.get("image_url")
    if part.get("type") == "input_image" and isinstance(url, str) and url.startswith(DATA_URL):
        return {"type": "input_text", "text": url}
    return {"type": "input_text", "text": _part_note(part)}


def _part_note(part: Mapping[str, Any]) -> str:
    """The note for a Responses content part that is not text (an image, a file, audio)."""
    kind = str(part.get("type") or "part").removeprefix("input_")
    if kind == "image" and part.get("image_url"):
        return url_note(part["image_url"])
    if kind == "file":
        name = part.get("filename") or part.get("file_url") or part.get("file_id")
        return note(f"file {name}" if name else "file")
    if part.get("file_id"):
        return note(f"{kind} {part['file_id']}")
    return note(kind)


def _plain(item: Any) -> dict[str, Any]:
    if isinstance(item, Mapping):
        return dict(item)
    dump = getattr(item, "model_dump", None)
    if callable(dump):
        return dump(mode="json", exclude_none=True)
    raise InputError(f"not an input item: {type(item).__name__}", source=SOURCE)


def _flat(content: Any) -> str:
    if isinstance(content, str):
        return content
    return "".join(str(p.get("text", "")) for p in content or () if isinstance(p, Mapping))


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]


def _tools(agent: Agent[Any]) -> list[dict[str, Any]] | None:
    """The agent's function tools in OpenAI ``tools`` form (what the model is offered)."""
    out = []
    for tool in getattr(agent, "tools", None) or ():
        schema = getattr(tool, "params_json_schema", None)
        if schema is None:
            continue
        function = {"name": tool.name, "description": getattr(tool, "description", "") or "", "parameters": schema}
        if getattr(tool, "strict_json_schema", False):
            function["strict"] = True
        out.append({"type": "function", "function": function})
    return out or None


def check_client_state(previous_response_id: str | None = None, conversation_id: str | None = None) -> None:
    """Refuse server-managed state, which the filter cannot see or budget.

    Raises:
        ConfigurationError: ``previous_response_id`` or a server ``conversation_id`` was given.
    """
    if previous_response_id or conversation_id:
        raise ConfigurationError(
            "ctxledger manages conversation state client-side: the assembled input is the whole context. "
            "Do not pass previous_response_id or a server conversation_id to Runner.run; use LedgerSession "
            "or pass the items yourself"
        )
