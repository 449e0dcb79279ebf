"""Checks and normalisation of neutral turns that every serializer shares.

Both providers require that every tool call is answered by its results *immediately* after the
assistant turn that made it (parallel results together, before any other turn) and that no result
appears without its call. The assembler keeps tool units whole; this module is the
last line of defence before a payload is built, and names the offending turns when that promise is
broken. It also reduces OpenAI-style content parts to the keys a provider accepts, so that
store-only fields on a part (``id``, ``tokens``, ``meta`` …) can never reach a payload.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ctxledger.errors import InputError, ProviderContractError
from ctxledger.serialize.base import Turn
from ctxledger.serialize.parts import part_problem, sent_part
from ctxledger.serialize.tool_names import wire_tool_name

_ROLES = ("system", "developer", "user", "assistant", "tool")


def speaker_label(name: str, text: str) -> str:
    """``"<name>: <text>"``: how a named author is shown inside a turn's text (``"<name>:"`` for no text)."""
    return f"{name}: {text}" if text else f"{name}:"


def check_turns(turns: Sequence[Turn]) -> None:
    """Check roles, per-role fields and tool pairing of ``turns`` in order.

    Raises:
        ProviderContractError: a tool call is unanswered, a result has no call right before it, a call
            id repeats within one turn, or a field is used on a role that cannot carry it. The error's
            ``index`` is the offending turn's position and ``refs`` names the turns involved.
    """
    pending: dict[str, str] = {}
    caller: tuple[int, str] | None = None
    for index, turn in enumerate(turns):
        _check_fields(index, turn)
        if turn.role == "tool":
            _answer(index, turn, pending, caller)
            continue
        if pending and caller is not None:
            _unanswered(caller, pending, before=(index, turn.ref))
        pending = {call.call_id: call.name for call in turn.tool_calls}
        caller = (index, turn.ref)
    if pending and caller is not None:
        _unanswered(caller, pending, before=None)


def _check_fields(index: int, turn: Turn) -> None:
    """Reject roles and fields that no provider message of that role can carry."""
    if turn.role not in _ROLES:
        raise ProviderContractError(
            f"turn {turn.ref!r} (index {index}) has unknown role {turn.role!r}",
            rule="unknown_role",
            index=index,
            refs=(turn.ref,),
        )
    if turn.tool_calls and turn.role != "assistant":
        raise ProviderContractError(
            f"turn {turn.ref!r} (index {index}, role {turn.role}) carries tool calls; only assistants can",
            rule="tool_calls_on_non_assistant",
            index=index,
            refs=(turn.ref,),
        )
    if turn.role == "assistant" and not turn.tool_calls and not has_content(turn):
        raise ProviderContractError(
            f"assistant turn {turn.ref!r} (index {index}) has neither content nor tool calls",
            rule="empty_turn",
            index=index,
            refs=(turn.ref,),
        )
    ids = [call.call_id for call in turn.tool_calls]
    if len(set(ids)) != len(ids):
        raise ProviderContractError(
            f"assistant turn {turn.ref!r} (index {index}) repeats a tool call id: {ids}",
            rule="duplicate_tool_call_id",
            index=index,
            refs=(turn.ref,),
        )


def _answer(index: int, turn: Turn, pending: dict[str, str], caller: tuple[int, str] | None) -> None:
    """Consume the pending call a tool turn answers, or fail naming the orphan result."""
    if turn.tool_call_id is None:
        raise ProviderContractError(
            f"tool turn {turn.ref!r} (index {index}) has no tool_call_id",
            rule="tool_call_id_missing",
            index=index,
            refs=(turn.ref,),
        )
    if turn.tool_call_id not in pending:
        after = f"assistant turn {caller[1]!r}" if caller else "no assistant turn"
        raise ProviderContractError(
            f"tool turn {turn.ref!r} (index {index}) answers call {turn.tool_call_id!r}, which is not an "
            f"unanswered call of the turn right before its results ({after}); a result must follow its call",
            rule="tool_result_without_call",
            index=index,
            refs=(turn.ref,),
        )
    del pending[turn.tool_call_id]


def _unanswered(caller: tuple[int, str], pending: Mapping[str, str], before: tuple[int, str] | None) -> None:
    """Fail for calls of ``caller`` that got no result before the next non-tool turn (or the end)."""
    where = f"before turn {before[1]!r} (index {before[0]})" if before else "before the end of the turns"
    raise ProviderContractError(
        f"assistant turn {caller[1]!r} (index {caller[0]}) has tool calls with no result {where}: "
        f"{sorted(pending)}; every call needs its result right after it",
        rule="tool_call_unanswered",
        index=caller[0],
        refs=(caller[1],) + ((before[1],) if before else ()),
    )


def at(turn: Turn, index: int | None) -> str:
    """``"turn 'ref' (index i)"`` for error messages; the index is left out when it is not known."""
    return f"turn {turn.ref!r}" + ("" if index is None else f" (index {index})")


def has_content(turn: Turn) -> bool:
    """True when the turn's content is a non-empty string or a non-empty tuple of parts."""
    return bool(turn.content)


def content_parts(index: int | None, turn: Turn) -> list[dict[str, Any]]:
    """The turn's content as OpenAI-style parts reduced to provider keys.

    A string becomes one ``text`` part; ``None`` becomes no part. A part keeps only ``type`` and
    ``text`` (text parts) or ``type`` and ``image_url.url`` / ``image_url.detail`` (image parts).

    Raises:
        InputError: a part breaks the rule of :mod:`ctxledger.serialize.parts`; the source is
            ``"turn '<ref>'"``, the index the turn's position (when known), the field e.g. ``content[0].type``.
    """
    if turn.content is None:
        return []
    if isinstance(turn.content, str):
        return [{"type": "text", "text": turn.content}]
    return [_part(index, turn, j, part) for j, part in enumerate(turn.content)]


def _part(index: int | None, turn: Turn, j: int, part: Any) -> dict[str, Any]:
    """Reduce one content part to its provider keys, or fail naming where it breaks :func:`part_problem`."""
    problem = part_problem(part)
    if problem is None:
        return sent_part(part)
    field = f"content[{j}]" + (f".{problem.field}" if problem.field else "")
    remedy = (
        "; a stored record holding it cannot be sent: forget its conversation (ctxledger forget --conversation ID) "
        "and import the source again without such parts"
    )
    raise InputError(problem.problem + remedy, source=f"turn {turn.ref!r}", index=index, field=field)


TOOLS_SOURCE = "<tools>"
"""``InputError.source`` for problems in the tool definitions passed to a serializer."""


def function_definitions(tools: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Reduce OpenAI ``tools`` entries to their function definitions with provider keys only.

    Each entry is ``{"type": "function", "function": {"name", "description"?, "parameters"?,
    "strict"?}}`` (OpenAI Chat Completions, "tools"); store-only keys such as ``tokens`` are dropped. The
    name is the one sent (:func:`~ctxledger.serialize.tool_names.wire_tool_name`).

    Raises:
        InputError: an entry is not a function tool or has no string name (names index and field).
    """
    out = []
    for index, tool in enumerate(tools):
        function = tool.get("function") if isinstance(tool, Mapping) else None
        if not isinstance(tool, Mapping) or tool.get("type", "function") != "function":
            raise InputError("only function tools are supported", source=TOOLS_SOURCE, index=index, field="type")
        if not isinstance(function, Mapping) or not isinstance(function.get("name"), str):
            raise InputError("tool has no function name", source=TOOLS_SOURCE, index=index, field="function.name")
        definition = {key: function[key] for key in ("name", "description", "parameters", "strict") if key in function}
        definition["name"] = wire_tool_name(definition["name"])
        out.append(definition)
    return out
