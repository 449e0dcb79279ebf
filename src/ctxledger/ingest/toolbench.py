"""Importer for ToolBench answer files (format ``"toolbench"``).

Source: OpenBMB/ToolBench ``data_example/answer/G*_answer/*_ChatGPT_DFS_woFilter_w2.json``:
``{win, tree, forward_args, compare_candidates, answer_generation}``. Imported:

* ``answer_generation.train_messages[-1]`` — the full final trajectory, legacy OpenAI
  ``function_call`` / ``role: "function"`` messages (the earlier entries are its prefixes; ``tree``
  holds abandoned DFS branches and is not imported);
* ``answer_generation.function`` (function schemas) → a ``SkillState``;
* ``query``, ``final_answer``, ``finish_type``, ``valid_data``, ``query_count``, ``total_tokens`` and
  ``win`` → the Conversation's ``meta``.

A ``function`` result is ``{"error": "...", "response": "..."}`` (sometimes cut off by ToolBench, so
not always valid JSON); a non-empty ``error`` makes the artifact ``failed``. The closing ``Finish``
call has no result and stays pending. Errors name the message index in ``train_messages[-1]``. A failed run
(a ``tree`` but no ``train_messages``) raises :class:`~ctxledger.errors.NothingToImport`.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from ctxledger.errors import NothingToImport
from ctxledger.ingest._batch import ImportBatch
from ctxledger.ingest._builder import ConversationBuilder, ParseOptions
from ctxledger.ingest._chat import ChatMapper
from ctxledger.ingest._fields import Loc, as_object, optional, require
from ctxledger.ingest._load import Loaded
from ctxledger.ingest._tools import openai_tools
from ctxledger.json_text import UNDECODABLE, decode_json
from ctxledger.records import ToolStatus

FORMAT = "toolbench"
_ERROR_PREFIX = re.compile(r'^\s*\{\s*"error"\s*:\s*"((?:[^"\\]|\\.)*)"')
_META_KEYS = ("query", "final_answer", "finish_type", "valid_data", "query_count", "total_tokens")


def result_error(text: str) -> str:
    """The ``error`` field of a ToolBench function result ("" when none), even if the JSON is cut off."""
    value = decode_json(text)
    if value is UNDECODABLE:
        match = _ERROR_PREFIX.match(text)
        return match.group(1) if match else ""
    error = value.get("error") if isinstance(value, dict) else None
    return error if isinstance(error, str) else ""


class ToolBenchMapper(ChatMapper):
    """Chat mapping with ToolBench's ``{"error", "response"}`` results."""

    def result_status(self, msg: Mapping[str, Any], text: str, loc: Loc) -> ToolStatus:
        """``failed`` when the result's ``error`` is non-empty."""
        return ToolStatus.FAILED if result_error(text) else ToolStatus.SUCCEEDED


def parse(loaded: Loaded, options: ParseOptions) -> ImportBatch:
    """Parse one ToolBench answer file.

    Raises:
        InputError: bad input (names file, message index and field).
    """
    top = as_object(loaded.value, Loc(options.source), "an answer object")
    gen_loc = Loc(options.source, None, "answer_generation.")
    gen = as_object(require(top, "answer_generation", dict, Loc(options.source), "an object"), gen_loc)
    if not gen.get("train_messages") and top.get("tree") is not None:
        raise NothingToImport("failed run: a search tree and no 'train_messages' trajectory", source=options.source)
    train = require(gen, "train_messages", list, gen_loc, "an array of message lists")
    if not train:
        raise gen_loc.error("no trajectory in 'train_messages'", "train_messages")
    last = len(train) - 1
    messages = train[last]
    if not isinstance(messages, list):
        raise gen_loc.error("expected an array of messages", f"train_messages[{last}]")
    tools_loc = Loc(options.source, None, "answer_generation.function.")
    functions = optional(gen, "function", list, gen_loc, "an array of function schemas")
    tools = None if functions is None else openai_tools(functions, tools_loc)
    meta = {key: gen.get(key) for key in _META_KEYS} | {"win": top.get("win")}
    query = gen.get("query")
    builder = ConversationBuilder(
        options.single_id(), options, FORMAT, title=query[:80] if isinstance(query, str) else "", meta=meta
    )
    mapper = ToolBenchMapper(builder, tools=tools, tools_loc=tools_loc)
    for j, msg in enumerate(messages):
        mapper.feed(msg, Loc(options.source, j))
        options.progress(j + 1, len(messages))
    mapper.close()
    return ImportBatch(source=options.source, format=FORMAT, conversations=[builder.finish()])
