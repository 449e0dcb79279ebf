"""An assembled payload of any of the three formats, read back as neutral messages a framework can map.

A framework that lets its integration choose the format (LangChain, PydanticAI) assembles in the format of the
model in use, so that format's rules are applied by the serializer that knows them (Anthropic: system text as the
top-level ``system``, user and assistant turns alternating, every ``tool_use`` answered by a ``tool_result`` in
the next user message; OpenAI Chat and Responses: their own pairing rules), and hands the framework the
assembled messages in its own types. :func:`sent_messages` reads the payload back in order:

* ``openai-chat``: one :class:`Sent` per message;
* ``openai-responses``: ``instructions`` as a system message, then the input items grouped as the importer
  groups them (an assistant turn's reasoning, message and function calls are one assistant message);
* ``anthropic-messages``: ``system`` first (one system message per text block), then per message: an
  assistant message with its text, its ``tool_use`` blocks as calls and its thinking blocks; a user message's
  ``tool_result`` blocks as tool messages, in order, then its other blocks as one user message (a framework's
  own provider adapter merges them back into one user message, which is what Anthropic receives).

Tool names the serializer renamed to the provider's grammar are given back under the names the framework's
tools have (``manifest["tools"]["renamed"]``). Each message names the records it was built from when they can be
told (``refs``), so an integration can hand back what it keeps on a record (opaque parts).
"""

from __future__ import annotations

import dataclasses
import json
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ctxledger.assemble.assembler import Assembly
from ctxledger.ingest.openai_responses import chat_messages
from ctxledger.records import Message, Record, ToolArtifact, ToolStatus

APIS = ("openai-chat", "openai-responses", "anthropic-messages")
"""The formats an integration can assemble in."""


@dataclass(frozen=True, slots=True)
class Sent:
    """One message of an assembled payload.

    Attributes:
        role: ``system``, ``user``, ``assistant`` or ``tool``.
        text: the message's text (text parts joined).
        content: the content as the payload has it (a string, or the format's own parts or blocks).
        calls: an assistant message's calls ``(call_id, tool name, arguments JSON)``.
        call_id: the call a ``tool`` message answers.
        is_error: a ``tool`` message reports a failure (Anthropic's ``is_error``, or a result recorded as failed).
        thinking: an assistant message's provider-pinned items (Anthropic thinking blocks, Responses
            reasoning and compaction items), as sent.
        refs: the records the message was built from, when they can be told (else empty).
    """

    role: str
    text: str
    content: Any = None
    calls: tuple[tuple[str, str, str], ...] = ()
    call_id: str | None = None
    is_error: bool = False
    thinking: tuple[Mapping[str, Any], ...] = ()
    refs: tuple[str, ...] = field(default=())


def sent_messages(asm: Assembly, api: str, records: Mapping[str, Record]) -> list[Sent]:
    """The payload of ``asm`` (assembled as ``api``) as :class:`Sent` messages, in payload order.

    Args:
        asm: the assembly.
        api: the format it was assembled in (one of :data:`APIS`).
        records: the conversation's records by id (to tell which records a message was built from).
    """
    names = {sent: original for original, sent in (asm.manifest.get("tools", {}).get("renamed") or {}).items()}
    if api == "anthropic-messages":
        out = _anthropic(asm.payload, names)
    elif api == "openai-responses":
        out = _responses(asm.payload, names)
    else:
        out = [_chat(m, names) for m in asm.payload["messages"]]
    refs = asm.turn_refs
    return _with_failures(_with_refs(out, refs, records, merged=api != "openai-chat"), refs, records)


def _with_failures(out: list[Sent], turn_refs: Sequence[str], records: Mapping[str, Record]) -> list[Sent]:
    """``out`` with each tool message that answers a call recorded as failed marked ``is_error``.

    OpenAI Chat and Responses carry no error flag on a tool result, so a framework that has one (LangChain's
    ``ToolMessage.status``, PydanticAI's ``ToolReturnPart.outcome``) learns it from the recorded result: the
    message's own record when it names one (``refs``), else the one result of the payload under its call id (a
    call id several sent results share, renamed in the payload, marks nothing). Only the payload's records
    (``turn_refs``) are read, so the cost follows what is sent, not the history.
    """
    sent = (records.get(ref) for ref in turn_refs)
    artifacts = [r for r in sent if isinstance(r, ToolArtifact)]
    uses = Counter(a.call_id for a in artifacts)
    failed = [a for a in artifacts if a.status is ToolStatus.FAILED]
    failed_refs = {a.id for a in failed}
    failed_calls = {a.call_id for a in failed if uses[a.call_id] == 1}

    def is_error(m: Sent) -> bool:
        if m.refs:
            return any(ref in failed_refs for ref in m.refs)
        return m.call_id in failed_calls

    return [
        dataclasses.replace(m, is_error=True) if m.role == "tool" and not m.is_error and is_error(m) else m for m in out
    ]


def flat_text(content: Any) -> str:
    """The text of a content value: the string, or its ``text`` parts joined."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    return "".join(str(p.get("text", "")) for p in content if isinstance(p, Mapping))


def _chat(message: Mapping[str, Any], names: Mapping[str, str]) -> Sent:
    calls = tuple(
        (c["id"], names.get(c["function"]["name"], c["function"]["name"]), c["function"]["arguments"])
        for c in message.get("tool_calls") or ()
    )
    return Sent(
        role="system" if message["role"] in ("system", "developer") else message["role"],
        text=flat_text(message.get("content")),
        content=message.get("content"),
        calls=calls,
        call_id=message.get("tool_call_id"),
        thinking=tuple(item for _, item in message.get("thinking") or ()),
    )


def _responses(payload: Mapping[str, Any], names: Mapping[str, str]) -> list[Sent]:
    out = [Sent("system", payload["instructions"], payload["instructions"])] if payload.get("instructions") else []
    items = list(payload["input"])
    read = chat_messages(items, "<assembled payload>")
    return out + [_output_text(_chat(m, names), items[loc.index or 0]) for m, loc in read]


def _output_text(sent: Sent, item: Mapping[str, Any]) -> Sent:
    """A tool message of a ``function_call_output`` whose output is parts: the parts' text as text and content.

    The importer reads such an output as the parts' JSON (it records them); a framework is handed the text the
    parts hold, the tool-output image's placeholder included.
    """
    output = item.get("output") if sent.role == "tool" else None
    if not isinstance(output, list):
        return sent
    text = flat_text(output)
    return dataclasses.replace(sent, text=text, content=text)


def _anthropic(payload: Mapping[str, Any], names: Mapping[str, str]) -> list[Sent]:
    system = payload.get("system")
    blocks = [system] if isinstance(system, str) else system or []
    out = [Sent("system", flat_text([b]) if isinstance(b, Mapping) else b, b) for b in blocks]
    for message in payload["messages"]:
        blocks = message["content"]
        if isinstance(blocks, str):
            blocks = [{"type": "text", "text": blocks}]
        if message["role"] == "assistant":
            calls = tuple(
                (b["id"], names.get(b["name"], b["name"]), json.dumps(b.get("input") or {}, ensure_ascii=False))
                for b in blocks
                if b.get("type") == "tool_use"
            )
            texts = [b for b in blocks if b.get("type") == "text"]
            thinking = tuple(b for b in blocks if b.get("type") in ("thinking", "redacted_thinking"))
            out.append(Sent("assistant", flat_text(texts), texts, calls=calls, thinking=thinking))
            continue
        for b in blocks:
            if b.get("type") == "tool_result":
                content = b.get("content")
                error = bool(b.get("is_error"))
                out.append(Sent("tool", flat_text(content), content, call_id=b["tool_use_id"], is_error=error))
        rest = [b for b in blocks if b.get("type") != "tool_result"]
        if rest:
            out.append(Sent("user", flat_text(rest), rest))
    return out


def _side(record: Record | None) -> str:
    """Which payload message a turn of this record ends up in: ``system``, ``assistant`` or ``user``."""
    if isinstance(record, Message):
        return {"system": "system", "developer": "system", "assistant": "assistant"}.get(record.role.value, "user")
    return "assistant" if record is not None and record.kind.value == "tool_call" else "user"


def _with_refs(out: list[Sent], turn_refs: Sequence[str], records: Mapping[str, Record], *, merged: bool) -> list[Sent]:
    """``out`` with each message's records, when the turns line up with the messages (else unchanged).

    An OpenAI Chat payload has one message per turn (system turns included). A Responses or Anthropic payload
    hoists system turns and groups consecutive assistant turns (Anthropic all turns of a side, its tool results
    and user text read back as several messages): only their assistant messages get refs.
    """
    if not merged:
        if len(turn_refs) != len(out):
            return out
        return [dataclasses.replace(m, refs=(ref,)) for m, ref in zip(out, turn_refs, strict=True)]
    groups: list[tuple[str, list[str]]] = []
    for ref in turn_refs:
        side = _side(records.get(ref))
        if side == "system":
            continue
        if groups and groups[-1][0] == side:
            groups[-1][1].append(ref)
        else:
            groups.append((side, [ref]))
    assistants = [refs for side, refs in groups if side == "assistant"]
    spoken = [i for i, m in enumerate(out) if m.role == "assistant"]
    if len(assistants) != len(spoken):
        return out
    for i, refs in zip(spoken, assistants, strict=True):
        out[i] = dataclasses.replace(out[i], refs=tuple(refs))
    return out
