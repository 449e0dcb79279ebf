"""OpenAI Chat Completions messages → graph records (shared by every OpenAI-shaped format).

Follows the Chat Completions message reference (roles ``system``, ``developer``, ``user``,
``assistant``, ``tool`` and the legacy ``function``; assistant ``tool_calls`` and legacy
``function_call``). Mapping:

* ``system`` / ``developer`` → ``Message`` with trust ``system`` / ``developer``;
* ``user`` → ``Message`` (trust ``user``), content strings or content parts kept intact (``text`` and
  ``image_url`` parts only, the ones every format sends back; ``input_audio`` and ``file`` parts, valid
  Chat Completions input, are refused: :mod:`ctxledger.serialize.parts`);
* ``assistant`` → ``Message`` (trust ``verified_internal``, ``content`` may be ``None``) plus one
  ``ToolCall`` per call, ``arguments`` kept exactly as given, ``index`` = position among parallel calls;
* ``tool`` → ``ToolArtifact`` whose bytes are the UTF-8 content; ``function`` → the same, answering the
  latest unanswered legacy ``function_call`` of that name (legacy calls get ``call_id = "fc_<n>"``,
  ``n`` the message's position, and ``meta["legacy_function_call"] = True``);
* tool schemas → one ``SkillState`` placed after the leading system/developer messages.

Source fields outside the provider schema go to ``meta`` (never to content); a message ``id`` becomes
``external_id``. Formats with their own extras (mini-swe-agent, SWE-agent, ToolBench, tau-bench)
subclass :class:`ChatMapper` and override its hook methods.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any

from ctxledger.ingest._builder import ConversationBuilder
from ctxledger.ingest._fields import Loc, as_object, json_type, optional, require
from ctxledger.ingest._tools import ToolSet, add_skill_state
from ctxledger.json_text import media_type_of
from ctxledger.records import Message, Role, ToolStatus, Trust
from ctxledger.serialize.parts import inline_image_problem, part_problem

STANDARD_KEYS: Mapping[str, frozenset[str]] = {
    "system": frozenset({"role", "content", "name"}),
    "developer": frozenset({"role", "content", "name"}),
    "user": frozenset({"role", "content", "name"}),
    "assistant": frozenset({"role", "content", "name", "tool_calls", "function_call", "refusal", "audio"}),
    "tool": frozenset({"role", "content", "tool_call_id", "name"}),
    "function": frozenset({"role", "content", "name"}),
}
"""Provider fields per role (Chat Completions); every other field of a message goes to ``meta``."""

PART_TYPES: Mapping[str, frozenset[str]] = {
    "system": frozenset({"text"}),
    "developer": frozenset({"text"}),
    "user": frozenset({"text", "image_url", "input_audio", "file"}),
    "assistant": frozenset({"text", "refusal"}),
    "tool": frozenset({"text"}),
    "function": frozenset({"text"}),
}
"""Content part types each role may carry (Chat Completions)."""

_INSTRUCTION_ROLES = frozenset({"system", "developer"})


class ChatMapper:
    """Feeds OpenAI chat messages, one at a time, into a :class:`ConversationBuilder`.

    Call :meth:`feed` per message (with its :class:`Loc`), then :meth:`close` once.
    """

    def __init__(
        self,
        builder: ConversationBuilder,
        *,
        tools: ToolSet | None = None,
        tools_loc: Loc | None = None,
        assistant_model: str | None = None,
    ) -> None:
        """Create the user and assistant participants; ``tools`` become a SkillState."""
        self.b = builder
        self.user = builder.participant("user", role="user", name="user")
        self.assistant = builder.participant(
            "assistant", role="assistant", name="assistant", model=assistant_model
        )
        self._tools = tools if tools and tools.schemas else None
        self._tools_loc = tools_loc or Loc(builder.options.source)
        self._legacy_open: list[tuple[str, str]] = []
        self.position = 0

    def feed(self, msg: Any, loc: Loc) -> None:
        """Map one message.

        Raises:
            InputError: a missing or wrong-typed field, an unknown role, or a tool result whose call is
                unknown or already answered (names ``loc`` and the field).
        """
        msg = as_object(msg, loc, "a message object")
        role = require(msg, "role", str, loc, "a string")
        if role not in _INSTRUCTION_ROLES:
            self._emit_tools()
        handler = {
            "system": self._instruction,
            "developer": self._instruction,
            "user": self._user,
            "assistant": self._assistant,
            "tool": self._tool,
            "function": self._function,
        }.get(role)
        if handler is None:
            self.other_role(role, msg, loc)
        else:
            handler(msg, loc)
        self.position += 1

    def close(self) -> None:
        """Finish: emit the SkillState if no non-instruction message came."""
        self._emit_tools()

    # -- hooks -----------------------------------------------------------------------------------

    def extra_meta(self, role: str, msg: Mapping[str, Any], loc: Loc) -> dict[str, Any]:
        """Store-only fields of ``msg``: everything outside the provider schema except ``id``."""
        standard = STANDARD_KEYS.get(role, frozenset({"role", "content"}))
        return {k: v for k, v in msg.items() if k not in standard and k != "id"}

    def external_id(self, msg: Mapping[str, Any], loc: Loc) -> str | None:
        """The source's id of the message (``id``), if it has one."""
        value = optional(msg, "id", (str, int), loc, "a string")
        return None if value is None else str(value)

    def timestamp(self, msg: Mapping[str, Any], loc: Loc) -> datetime | None:
        """The source's timestamp of the message, if it has one (default: none)."""
        return None

    def model_run(self, msg: Mapping[str, Any], loc: Loc) -> str | None:
        """Record the generation that produced an assistant message; return its id (default: none)."""
        return None

    def result_status(self, msg: Mapping[str, Any], text: str, loc: Loc) -> ToolStatus:
        """Whether a tool result is an error (default: ``succeeded``)."""
        return ToolStatus.SUCCEEDED

    def result_call_ids(self, msg: Mapping[str, Any], loc: Loc) -> list[tuple[str, str]]:
        """The call ids a ``tool`` message answers, each with the field it came from."""
        return [(require(msg, "tool_call_id", str, loc, "a string"), "tool_call_id")]

    def other_role(self, role: str, msg: Mapping[str, Any], loc: Loc) -> None:
        """Handle a role outside Chat Completions (default: refuse it)."""
        known = ", ".join(sorted(STANDARD_KEYS))
        raise loc.error(f"unknown role {role!r}; expected one of {known}", "role")

    # -- roles -----------------------------------------------------------------------------------

    def _instruction(self, msg: Mapping[str, Any], loc: Loc) -> None:
        role = msg["role"]
        self._message(msg, loc, role=Role(role), trust=Trust(role), owner=self.assistant)

    def _user(self, msg: Mapping[str, Any], loc: Loc) -> None:
        self._message(msg, loc, role=Role.USER, trust=Trust.USER, owner=self.user)

    def _message(
        self,
        msg: Mapping[str, Any],
        loc: Loc,
        *,
        role: Role,
        trust: Trust,
        owner: str,
        nullable: bool = False,
        run_id: str | None = None,
    ) -> Message:
        content = self.content(msg, loc, role.value, nullable=nullable)
        if content is None and role is Role.ASSISTANT:  # a refusal comes with no content: its text is what was said
            content = optional(msg, "refusal", str, loc, "a string") or None
        name = optional(msg, "name", str, loc, "a string")
        return self.b.add(
            Message,
            loc,
            owner=owner,
            trust=trust,
            at=self.timestamp(msg, loc),
            external_id=self.external_id(msg, loc),
            meta=self.extra_meta(role.value, msg, loc),
            owner_model_run_id=run_id,
            role=role,
            content=content,
            name=name,
        )

    def _assistant(self, msg: Mapping[str, Any], loc: Loc) -> Message:
        calls = self._tool_calls(msg, loc)
        legacy = optional(msg, "function_call", dict, loc, "an object")
        if calls and legacy is not None:
            raise loc.error("a message cannot carry both 'tool_calls' and 'function_call'", "function_call")
        run_id = self.model_run(msg, loc)
        message = self._message(
            msg,
            loc,
            role=Role.ASSISTANT,
            trust=Trust.VERIFIED_INTERNAL,
            owner=self.assistant,
            nullable=True,
            run_id=run_id,
        )
        for k, (call_id, name, arguments) in enumerate(calls):
            self.b.add_call(
                message, loc, f"tool_calls[{k}].id", call_id=call_id, name=name, arguments=arguments, index=k
            )
        if legacy is not None:
            self._legacy_call(message, legacy, loc)
        return message

    def _tool_calls(self, msg: Mapping[str, Any], loc: Loc) -> list[tuple[str, str, str]]:
        calls = optional(msg, "tool_calls", list, loc, "an array of tool calls", default=[])
        out: list[tuple[str, str, str]] = []
        for k, call in enumerate(calls):
            cloc = loc.child(f"tool_calls[{k}]")
            call = as_object(call, cloc, "a tool call object")
            call_id = require(call, "id", str, cloc, "a string")
            kind = optional(call, "type", str, cloc, "a string", default="function")
            if kind != "function":
                raise cloc.error(f"unsupported tool call type {kind!r} (only 'function')", "type")
            floc = cloc.child("function")
            function = as_object(require(call, "function", dict, cloc, "an object"), floc)
            name = require(function, "name", str, floc, "a string")
            arguments = require(function, "arguments", str, floc, "a JSON string")
            out.append((call_id, name, arguments))
        return out

    def _legacy_call(self, message: Message, legacy: Mapping[str, Any], loc: Loc) -> None:
        floc = loc.child("function_call")
        name = require(legacy, "name", str, floc, "a string")
        arguments = require(legacy, "arguments", str, floc, "a JSON string")
        call_id = f"fc_{self.position}"
        self.b.add_call(
            message,
            loc,
            "function_call",
            call_id=call_id,
            name=name,
            arguments=arguments,
            index=0,
            meta={"legacy_function_call": True},
        )
        self._legacy_open.append((name, call_id))

    def _tool(self, msg: Mapping[str, Any], loc: Loc) -> None:
        text, parts_meta = self._result_text(msg, loc)
        for call_id, field in self.result_call_ids(msg, loc):
            self._check_name(msg, call_id, loc)
            self._result(msg, loc, field, call_id, text, parts_meta)

    def _function(self, msg: Mapping[str, Any], loc: Loc) -> None:
        name = require(msg, "name", str, loc, "a string")
        for i in range(len(self._legacy_open) - 1, -1, -1):
            if self._legacy_open[i][0] == name:
                call_id = self._legacy_open.pop(i)[1]
                break
        else:
            raise loc.error(
                f"function result {name!r} answers no unanswered function_call of that name", "name"
            )
        text, parts_meta = self._result_text(msg, loc)
        self._result(msg, loc, "name", call_id, text, {**parts_meta, "legacy_function_call": True})

    def _check_name(self, msg: Mapping[str, Any], call_id: str, loc: Loc) -> None:
        name = optional(msg, "name", str, loc, "a string")
        call = self.b.open_call(call_id)
        if name is not None and call is not None and call.name != name:
            raise loc.error(f"tool result names {name!r} but call {call_id!r} called {call.name!r}", "name")

    def _result(
        self, msg: Mapping[str, Any], loc: Loc, field: str, call_id: str, text: str, meta: Mapping[str, Any]
    ) -> None:
        self._legacy_open = [(n, c) for n, c in self._legacy_open if c != call_id]
        self.b.add_result(
            loc,
            field,
            call_id=call_id,
            data=text.encode("utf-8"),
            media_type=media_type_of(text),
            status=self.result_status(msg, text, loc),
            owner=self.assistant,
            at=self.timestamp(msg, loc),
            external_id=self.external_id(msg, loc),
            meta={**self.extra_meta(msg["role"], msg, loc), **meta},
        )

    # -- content ---------------------------------------------------------------------------------

    def content(
        self, msg: Mapping[str, Any], loc: Loc, role: str, *, nullable: bool = False
    ) -> str | tuple[Mapping[str, Any], ...] | None:
        """The message content: a string, content parts kept intact, or ``None`` when allowed.

        Raises:
            InputError: missing, null where not allowed, of another type, a part type the role
                cannot carry, or a part a message cannot keep (:func:`~ctxledger.serialize.parts.part_problem`:
                ``input_audio`` and ``file`` parts are refused, naming ``content[k].type``; an assistant's
                ``refusal`` part is kept as a text part).
        """
        if msg.get("content") is None:
            if nullable:
                return None
            problem = "missing required field 'content'" if "content" not in msg else "content is null"
            raise loc.error(problem, "content")
        value = msg["content"]
        if isinstance(value, str):
            return value
        if isinstance(value, list):
            return self._parts(value, loc, role)
        null = " or null" if nullable else ""
        raise loc.error(
            f"expected a string, an array of content parts{null}; got {json_type(value)}", "content"
        )

    def _parts(self, parts: list[Any], loc: Loc, role: str) -> tuple[Mapping[str, Any], ...]:
        allowed = PART_TYPES.get(role, frozenset({"text"}))
        out: list[Mapping[str, Any]] = []
        for k, part in enumerate(parts):
            ploc = loc.child(f"content[{k}]")
            part = as_object(part, ploc, "a content part object")
            kind = require(part, "type", str, ploc, "a string")
            if kind not in allowed:
                raise ploc.error(f"{role} messages cannot carry {kind!r} parts", "type")
            if kind == "text":
                require(part, "text", str, ploc, "a string")
            elif kind == "refusal":  # the model's refusal text, kept as text (as the Responses importer keeps it)
                part = {"type": "text", "text": require(part, "refusal", str, ploc, "a string")}
            elif kind == "image_url":
                _check_image_url(part, ploc)
            problem = part_problem(part) or inline_image_problem(part)
            if problem is not None:
                raise ploc.error(problem.problem, problem.field)
            out.append(dict(part))
        return tuple(out)

    def _result_text(self, msg: Mapping[str, Any], loc: Loc) -> tuple[str, dict[str, Any]]:
        parts = self.content(msg, loc, msg["role"])
        if isinstance(parts, str):
            return parts, {}
        assert parts is not None
        return "".join(str(p["text"]) for p in parts), {"content_parts": len(parts)}

    def _emit_tools(self) -> None:
        if self._tools is not None:
            add_skill_state(self.b, self._tools, self._tools_loc, self.assistant)
            self._tools = None


def _check_image_url(part: Mapping[str, Any], loc: Loc) -> None:
    """An ``image_url`` part holds an object with ``url``, a string (the URL itself: :mod:`ctxledger.serialize.parts`).

    Raises:
        InputError: names ``content[k].image_url`` or ``content[k].image_url.url`` and what is wrong.
    """
    iloc = loc.child("image_url")
    image = as_object(require(part, "image_url", dict, loc, "an object"), iloc)
    require(image, "url", str, iloc, "a string")
