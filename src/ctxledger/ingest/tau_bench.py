"""Importer for tau-bench historical trajectories (format ``"tau-bench"``).

Source: sierra-research/tau-bench ``historical_trajectories/*.json`` — a JSON array of
``{task_id, trial, reward, info, traj}`` where ``traj`` is OpenAI Chat Completions messages. Each
element becomes one conversation ``<prefix>-task<task_id>-trial<trial>``; ``task_id``, ``trial``,
``reward`` and ``info`` (task instruction, gold actions, reward info) go to the Conversation's
``meta``. A ``tool`` result whose content starts with ``"Error"`` (tau-bench's environment reports
failed actions as ``"Error: …"``) is a ``failed`` artifact. Errors name the trajectory's index and a
``traj[j].…`` path.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ctxledger.errors import InputError
from ctxledger.ingest._batch import ImportBatch, ParsedConversation
from ctxledger.ingest._builder import ConversationBuilder, ParseOptions
from ctxledger.ingest._chat import ChatMapper
from ctxledger.ingest._fields import Loc, as_object, json_type, require
from ctxledger.ingest._load import Loaded
from ctxledger.records import ToolStatus

FORMAT = "tau-bench"


class TauBenchMapper(ChatMapper):
    """Chat mapping with tau-bench's error convention for tool results."""

    def result_status(self, msg: Mapping[str, Any], text: str, loc: Loc) -> ToolStatus:
        """``failed`` when the environment answered ``"Error: …"``."""
        return ToolStatus.FAILED if text.startswith("Error") else ToolStatus.SUCCEEDED


def parse(loaded: Loaded, options: ParseOptions) -> ImportBatch:
    """Parse a tau-bench trajectories file (one conversation per trajectory).

    Raises:
        InputError: bad input (names file, trajectory index and field).
    """
    items = loaded.value
    if not isinstance(items, list):
        raise InputError(f"expected an array of trajectories, got {json_type(items)}", source=options.source)
    seen: set[str] = set()
    conversations: list[ParsedConversation] = []
    for i, item in enumerate(items):
        conversations.append(_trajectory(item, Loc(options.source, i), options, seen))
        options.progress(i + 1, len(items))
    return ImportBatch(source=options.source, format=FORMAT, conversations=conversations)


def _trajectory(item: Any, loc: Loc, options: ParseOptions, seen: set[str]) -> ParsedConversation:
    item = as_object(item, loc, "a trajectory object")
    task_id = require(item, "task_id", (int, str), loc, "a number")
    trial = require(item, "trial", (int, str), loc, "a number")
    traj = require(item, "traj", list, loc, "an array of messages")
    key = f"task{task_id}-trial{trial}"
    if key in seen:
        raise loc.error(f"trajectory {key!r} appears twice in this file", "trial")
    seen.add(key)
    meta = {k: v for k, v in item.items() if k != "traj"}
    builder = ConversationBuilder(
        options.multi_id(key), options, FORMAT, title=f"task {task_id} trial {trial}", meta=meta
    )
    mapper = TauBenchMapper(builder)
    for j, msg in enumerate(traj):
        mapper.feed(msg, Loc(loc.source, loc.index, f"traj[{j}]."))
    mapper.close()
    return builder.finish()
