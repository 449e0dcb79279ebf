"""Importer for SWE-agent ``.traj`` files (format ``"swe-agent"``).

Source: SWE-agent/SWE-agent trajectories: ``{environment, trajectory, history, info, replay_config}``.
Only ``history`` is imported — the chat messages actually sent to the model; ``trajectory`` (the
agent's step log) and ``replay_config`` are not. History messages are OpenAI-shaped:

* text variants: ``system`` / ``user`` / ``assistant`` messages whose commands live in the text;
* function-calling variants: assistant ``tool_calls`` (OpenAI form) and ``role: "tool"`` results that
  name the calls they answer in ``tool_call_ids`` (a list; one artifact per id);
* ``message_type`` (``system_prompt``, ``observation``, ``action``, ``demonstration`` …), ``agent``,
  ``action``, ``is_demo`` → ``meta``; ``thought`` too unless it repeats the content.

``info`` (exit status, submission, model stats; the ``edited_files*`` excerpts aside) and
``environment`` go to the Conversation's ``meta``. Errors name the message index in ``history``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ctxledger.ingest._batch import ImportBatch
from ctxledger.ingest._builder import ConversationBuilder, ParseOptions
from ctxledger.ingest._chat import ChatMapper
from ctxledger.ingest._fields import Loc, as_object, optional, require
from ctxledger.ingest._load import Loaded

FORMAT = "swe-agent"


class SweAgentMapper(ChatMapper):
    """Chat mapping with SWE-agent's ``tool_call_ids`` and step fields."""

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
