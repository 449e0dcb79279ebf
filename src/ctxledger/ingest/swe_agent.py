"""Importer for SWE-agent ``.traj`` files (format ``"swe-agent"``).

Source: SWE-agent/SWE-agent trajectories: ``{environment, trajectory, history, info, replay_config}``.
Only ``history`` is imported — the chat messages actually sent to the model; ``trajectory`` (the
agent's step log) and ``replay_config`` are not. History messages are OpenAI-shaped:

* text-command variants: assistant messages whose ``action`` holds the command the agent ran (parsed
  by SWE-agent from the reply text), each followed by a ``user`` message holding its output. Each such
  assistant message keeps its text and gets one ``ToolCall`` named :data:`TEXT_ACTION_TOOL` (``bash``)
  with arguments ``{"command": <action>}`` (call id ``action_<n>``, ``n`` the message's index;
  ``meta["text_action"] = True``); the ``user`` message right after it becomes that call's
  ``ToolArtifact`` (the UTF-8 text the model was shown). ``bash`` is the name SWE-agent's own
  function-calling variants give shell commands; the first word of an action is no valid tool name in
  general (``RsaCtfTool.py``), and SWE-agent runs every text action, its editor commands included, in
  the container's shell. An action with no output after it (the final ``submit``) stays a pending call;
  user messages that answer no action (the task, demonstrations) stay messages;
* function-calling variants: assistant ``tool_calls`` (OpenAI form) and ``role: "tool"`` results that
  name the calls they answer in ``tool_call_ids`` (a list; one artifact per id);
* ``message_type`` (``system_prompt``, ``observation``, ``action``, ``demonstration`` …), ``agent``,
  ``action``, ``is_demo`` → ``meta``; ``thought`` too unless it repeats the content.

``info`` (exit status, submission, model stats; the ``edited_files*`` excerpts aside) and
``environment`` go to the Conversation's ``meta``. Errors name the message index in ``history``.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from ctxledger.ingest._batch import ImportBatch
from ctxledger.ingest._builder import ConversationBuilder, ParseOptions
from ctxledger.ingest._chat import ChatMapper
from ctxledger.ingest._fields import Loc, as_object, optional, require
from ctxledger.ingest._load import Loaded
from ctxledger.records import Message

FORMAT = "swe-agent"

TEXT_ACTION_TOOL = "bash"
"""Tool name of the calls made from text-command actions (see the module docstring)."""


class SweAgentMapper(ChatMapper):
    """Chat mapping with SWE-agent's ``tool_call_ids``, text-command actions and step fields."""

    def __init__(self, builder: ConversationBuilder) -> None:
        """Map one trajectory's ``history`` into ``builder``."""
        super().__init__(builder)
        self._action_call: str | None = None
        """Call id of the latest text action while its output has not come yet."""

    def _assistant(self, msg: Mapping[str, Any], loc: Loc) -> Message:
        """The message (and its ``tool_calls``); a text ``action`` without them becomes a ``bash`` call."""
        message = super()._assistant(msg, loc)
        self._action_call = None
        action = optional(msg, "action", str, loc, "a string")
        if action and action.strip() and not msg.get("tool_calls") and msg.get("function_call") is None:
            call_id = f"action_{self.position}"
            arguments = json.dumps({"command": action}, ensure_ascii=False)
            self.b.add_call(
                message, loc, "action", call_id=call_id, name=TEXT_ACTION_TOOL, arguments=arguments, index=0,
                meta={"text_action": True},
            )  # fmt: skip
            self._action_call = call_id
        return message

    def _user(self, msg: Mapping[str, Any], loc: Loc) -> None:
        """The output of the text action just before it, else a user message."""
        call_id, self._action_call = self._action_call, None
        if call_id is None or not _text_only(msg.get("content")):
            super()._user(msg, loc)
            return
        text, parts_meta = self._result_text(msg, loc)
        self._result(msg, loc, "content", call_id, text, parts_meta)

    def result_call_ids(self, msg: Mapping[str, Any], loc: Loc) -> list[tuple[str, str]]:
        """Ids from ``tool_call_ids`` (a list), else the standard ``tool_call_id``."""
        if "tool_call_ids" not in msg:
            return super().result_call_ids(msg, loc)
        ids = require(msg, "tool_call_ids", list, loc, "an array of call ids")
        if not ids:
            raise loc.error("a tool result must answer at least one call", "tool_call_ids")
        out: list[tuple[str, str]] = []
        for k, value in enumerate(ids):
            if not isinstance(value, str):
                raise loc.error("expected a string call id", f"tool_call_ids[{k}]")
            out.append((value, f"tool_call_ids[{k}]"))
        return out

    def extra_meta(self, role: str, msg: Mapping[str, Any], loc: Loc) -> dict[str, Any]:
        """Step fields to ``meta``; ``thought`` only when it is not a copy of the content."""
        meta = {k: v for k, v in super().extra_meta(role, msg, loc).items() if k != "tool_call_ids"}
        if meta.get("thought") == msg.get("content"):
            meta.pop("thought", None)
        return meta


def _text_only(content: Any) -> bool:
    """Whether ``content`` is a string or a list of text parts (a tool result carries only text)."""
    if isinstance(content, str):
        return True
    return isinstance(content, list) and all(isinstance(p, dict) and p.get("type") == "text" for p in content)


def parse(loaded: Loaded, options: ParseOptions) -> ImportBatch:
    """Parse one SWE-agent trajectory file.

    Raises:
        InputError: bad input (names file, message index in ``history`` and field).
    """
    top = as_object(loaded.value, Loc(options.source), "a trajectory object")
    history = require(top, "history", list, Loc(options.source), "an array of messages")
    info = optional(top, "info", dict, Loc(options.source), "an object", default={})
    meta = {k: v for k, v in info.items() if not k.startswith("edited_files")}
    meta["environment"] = top.get("environment")
    builder = ConversationBuilder(options.single_id(), options, FORMAT, title=options.stem, meta=meta)
    mapper = SweAgentMapper(builder)
    for j, msg in enumerate(history):
        mapper.feed(msg, Loc(options.source, j))
        options.progress(j + 1, len(history))
    mapper.close()
    return ImportBatch(source=options.source, format=FORMAT, conversations=[builder.finish()])
