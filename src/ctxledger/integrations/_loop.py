"""What every integration does per model call: record what is new, assemble, record the reply and its usage.

A framework hands its integration the whole message list on every model call. :class:`LoopLedger` keeps
one :class:`~ctxledger.recorder.Recorder` per conversation and records each message once, under a key
the framework gives it (its message id, or its position), so the history is recorded as it happens
however often the framework repeats it. Tool calls are written as one assistant message with its parallel
calls (:meth:`~ctxledger.recorder.Recorder.tool_calls`), results as they arrive; each reply's usage is
stored against the assembly it was made with (:meth:`~ctxledger.Ledger.record_usage`).

The agent's instructions (the system prompt a framework sends with every call, not a message of its history)
are recorded by :meth:`LoopLedger.instructions`: when they differ from the ones in force, as a new system
message that supersedes them, so the model is sent the instructions of the current agent, every earlier
version stays recorded, and the policy leaves the old ones out as ``superseded``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ctxledger.assemble.assembler import Assembly
from ctxledger.assemble.recall import RECALL_TOOL, answer_recall
from ctxledger.budget import DEFAULT_BUDGET
from ctxledger.errors import ConfigurationError
from ctxledger.json_text import decode_json
from ctxledger.ledger import Ledger
from ctxledger.recorder import Recorder
from ctxledger.serialize import default_model
from ctxledger.tokens import counter_for_model

"""The model recorded (and counted for) when the framework's model names none ctxledger has a tokenizer for."""

FRAMEWORK_KEY = "framework_key"
"""``meta`` key of a recorded message: the key the framework's message was recorded under."""

INSTRUCTIONS = "framework_instructions"
"""``meta`` key of a system message recorded as the agent's instructions (``True``)."""


@dataclass(frozen=True, slots=True)
class Budget:
    """The token budget of every call: window ``W``, reserved output ``O``, margin ``M`` (tokens).

    Defaults are :data:`ctxledger.budget.DEFAULT_BUDGET`'s, as :meth:`ctxledger.Ledger.assemble` has.
    """

    window_tokens: int = DEFAULT_BUDGET.window_tokens
    output_tokens: int = DEFAULT_BUDGET.output_tokens
    margin_tokens: int = DEFAULT_BUDGET.margin_tokens


@dataclass(slots=True)
class _Conversation:
    recorder: Recorder
    seen: set[str] = field(default_factory=set)
    calls: dict[str, str] = field(default_factory=dict)  # provider call id -> ToolCall record id
    answered: set[str] = field(default_factory=set)
    recalls: dict[str, list[dict[str, Any]]] = field(default_factory=dict)  # ref -> recall decisions not yet stored
    instructions: list[str] = field(default_factory=list)  # ids of the instruction records in force


class LoopLedger:
    """Records a framework's messages once each and assembles every model call (see the module docstring).

    Args:
        ledger: the ledger to record into and assemble from.
        budget: the token budget of every call.
        api: the payload format assembled by default (``openai-chat``, ``openai-responses`` or
            ``anthropic-messages``); the integration converts it to the framework's messages.
        model: the model name recorded in manifests by default (selects the tokenizer).
        assemble_options: further :meth:`~ctxledger.Ledger.assemble` keywords (``policy``, ``counter`` …).
    """

    def __init__(
        self,
        ledger: Ledger,
        budget: Budget,
        *,
        api: str = "openai-chat",
        model: str = "gpt-4o",
        **assemble_options: Any,
    ) -> None:
        self.ledger = ledger
        self.budget = budget
        self.api = api
        self.model = model
        self.assemble_options = assemble_options
        self._conversations: dict[str, _Conversation] = {}
        self.assemblies: list[Assembly] = []
        """Every assembly made, in call order (the last one is the call in flight)."""

    def _conv(self, conversation_id: str) -> _Conversation:
        if conversation_id not in self._conversations:
            rec = self.ledger.recorder(conversation_id)
            conv = _Conversation(rec)
            replaced: set[str] = set()
            for record in rec.records.values():  # a continued conversation: what it already holds
                if record.meta.get(INSTRUCTIONS) is True:
                    conv.instructions.append(record.id)
                replaced.update(getattr(record, "supersedes", ()))
                if isinstance(record.meta.get(FRAMEWORK_KEY), str):
                    conv.seen.add(record.meta[FRAMEWORK_KEY])
                call_id = getattr(record, "call_id", None)
                if call_id and record.kind.value == "tool_call":
                    conv.calls[call_id] = record.id
                elif call_id:
                    conv.answered.add(call_id)
            conv.instructions = [i for i in conv.instructions if i not in replaced]
            self._conversations[conversation_id] = conv
        return self._conversations[conversation_id]

    def recorder(self, conversation_id: str) -> Recorder:
        """The recorder of a conversation (created on first use)."""
        return self._conv(conversation_id).recorder

    # -- recording ---------------------------------------------------------------------------------

    def message(
        self, conversation_id: str, key: str, role: str, text: str, *, meta: Mapping[str, Any] | None = None
    ) -> None:
        """Record a ``system`` / ``developer`` / ``user`` / ``assistant`` text message once under ``key``."""
        conv = self._conv(conversation_id)
        if key in conv.seen or not text:
            return
        conv.seen.add(key)
        rec = conv.recorder
        write = {"system": rec.system, "developer": rec.developer, "user": rec.user}.get(role, rec.assistant)
        write(text, meta={**(meta or {}), FRAMEWORK_KEY: key})

    def instructions(self, conversation_id: str, text: str | None) -> None:
        """Record the instructions the framework sends with this call, replacing the ones in force.

        Nothing is written when ``text`` is empty or equals the instructions in force. Otherwise ``text`` is
        recorded as a system message (``meta[INSTRUCTIONS]``) that supersedes the instructions in force: the
        model is sent ``text`` alone, and the earlier versions stay recorded, left out as ``superseded``.
        """
        conv = self._conv(conversation_id)
        if not text:
            return
        records = conv.recorder.records
        if [records[i].content for i in conv.instructions if i in records] == [text]:
            return
        rid = conv.recorder.system(text, supersedes=conv.instructions, meta={INSTRUCTIONS: True})
        conv.instructions = [rid]

    def calls(
        self,
        conversation_id: str,
        key: str,
        calls: Sequence[tuple[str, str, str]],
        *,
        text: str | None = None,
        thinking: Sequence[Mapping[str, Any]] = (),
        meta: Mapping[str, Any] | None = None,
    ) -> None:
        """Record an assistant message with its parallel calls ``(call_id, tool, arguments JSON)`` once."""
        conv = self._conv(conversation_id)
        if key in conv.seen:
            return
        conv.seen.add(key)
        fresh = [c for c in calls if c[0] not in conv.calls]
        if not fresh:
            return
        exchange = conv.recorder.tool_calls(
            [{"call_id": cid, "tool": tool, "arguments": args or "{}"} for cid, tool, args in fresh],
            text=text or None,
            thinking=thinking,
            meta={**(meta or {}), FRAMEWORK_KEY: key},
        )
        conv.calls.update(zip([c[0] for c in fresh], exchange.calls, strict=True))

    def knows_call(self, conversation_id: str, call_id: Any) -> bool:
        """Whether a call with this provider call id was recorded in the conversation."""
        return call_id in self._conv(conversation_id).calls

    def result(self, conversation_id: str, call_id: str, output: str, *, failed: bool = False) -> None:
        """Record the result of call ``call_id`` once (a result of an unknown call is ignored)."""
        conv = self._conv(conversation_id)
        if call_id in conv.answered or call_id not in conv.calls:
            return
        conv.answered.add(call_id)
        call = conv.recorder.records[conv.calls[call_id]]
        pending = conv.recalls.get(str(_arguments(call).get("ref"))) if call.name == RECALL_TOOL else None
        recall = pending.pop(0) if pending else None
        conv.recorder.tool_result(
            call.id,
            output,
            status="failed" if failed else "succeeded",
            **({"meta": {"recall": recall}} if recall else {}),
        )

    def recall(self, conversation_id: str, arguments: Mapping[str, Any]) -> str:
        """Answer a ``recall`` tool call under the hard filters of the conversation's latest assembly.

        The decision is stored on the call's result when it is recorded (``meta["recall"]``), so the next
        manifest lists it (:func:`~ctxledger.assemble.recall.answer_recall`).
        """
        mine = [a for a in self.assemblies if a.manifest.get("conversation_id") == conversation_id]
        manifest = mine[-1].manifest if mine else {"candidates": []}
        text, decision = answer_recall(self.ledger, manifest, arguments)
        self._conv(conversation_id).recalls.setdefault(decision["ref"], []).append(decision)
        return text

    # -- assembling --------------------------------------------------------------------------------

    def assemble(
        self,
        conversation_id: str,
        *,
        tools: Sequence[Mapping[str, Any]] | None = None,
        api: str | None = None,
        model: str | None = None,
    ) -> Assembly:
        """Assemble the next call of ``conversation_id`` under the budget; persisted, kept in :attr:`assemblies`.

        ``api`` and ``model`` override :attr:`api` and :attr:`model` for this call (the model in use).
        """
        options = dict(self.assemble_options)
        if tools is not None:
            options["tools"] = tuple(tools)
        asm = self.ledger.assemble(
            conversation_id,
            api=api or self.api,
            model=model or self.model,
            window_tokens=self.budget.window_tokens,
            output_tokens=self.budget.output_tokens,
            margin_tokens=self.budget.margin_tokens,
            **options,
        )
        self.assemblies.append(asm)
        return asm

    def model_for(self, api: str, name: Any) -> str:
        """The framework model's ``name`` when it can be counted, else the default model of ``api``.

        A name can be counted when ctxledger knows its tokenizer, or a counter was given (``counter=``, or the
        ledger's). A scripted or self-hosted model (``function:…``, ``llama-…``) with none is recorded as its
        format's default model; pass ``model=`` (and ``counter=``) to the integration to name it.
        """
        if isinstance(name, str) and name:
            try:
                counter_for_model(name, self.assemble_options.get("counter") or self.ledger.counter)
            except ConfigurationError:
                pass
            else:
                return name
        return default_model(api)

    def usage(self, assembly: Assembly, input_tokens: int | None, output_tokens: int | None) -> None:
        """Store a reply's reported usage against the assembly it was made with (nothing when none reported)."""
        if input_tokens is not None and output_tokens is not None:
            self.ledger.record_usage(assembly.id, int(input_tokens), int(output_tokens))


def _arguments(call: Any) -> dict[str, Any]:
    """A recorded call's arguments as a mapping (``{}`` when they are not a JSON object or do not decode)."""
    parsed = decode_json(call.arguments)
    return parsed if isinstance(parsed, dict) else {}
