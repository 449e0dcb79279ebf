"""Importer for BFCL v4 memory prerequisite conversations (format ``"bfcl-memory"``).

Source: ShishirPatil/gorilla ``berkeley-function-call-leaderboard/bfcl_eval/data/
memory_prereq_conversation/memory_<scenario>.json`` — JSON Lines of ``{id, topic, question,
scenario, involved_classes}`` where ``question`` is a list of turns, each a list of OpenAI-style
messages (user-only: the agent side is generated at evaluation time). Each line becomes one
conversation ``<prefix>-<id>``; its messages are mapped like OpenAI chat messages in turn order, with
``meta["turn"]`` the turn index. ``topic``, ``scenario`` and ``involved_classes`` go to the Conversation's
``meta``. Errors name the line's index and a ``question[t][k].…`` path.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ctxledger.errors import InputError
from ctxledger.ingest._batch import ImportBatch, ParsedConversation
from ctxledger.ingest._builder import ConversationBuilder, ParseOptions
from ctxledger.ingest._chat import ChatMapper
from ctxledger.ingest._fields import Loc, json_type, require
from ctxledger.ingest._load import Loaded

FORMAT = "bfcl-memory"


class BfclMapper(ChatMapper):
    """Chat mapping that records each message's turn index."""

    turn = 0

    def extra_meta(self, role: str, msg: Mapping[str, Any], loc: Loc) -> dict[str, Any]:
        """Non-schema fields plus ``turn``."""
        return {**super().extra_meta(role, msg, loc), "turn": self.turn}


def parse(loaded: Loaded, options: ParseOptions) -> ImportBatch:
    """Parse a BFCL memory prerequisite-conversation file (one conversation per line).

    Raises:
        InputError: bad input (names file, line index and field).
    """
    lines = loaded.value if isinstance(loaded.value, list) else [loaded.value]
    if not all(isinstance(line, dict) for line in lines):
        bad = next(i for i, line in enumerate(lines) if not isinstance(line, dict))
        raise InputError(f"expected an object, got {json_type(lines[bad])}", source=options.source, index=bad)
    seen: set[str] = set()
    conversations: list[ParsedConversation] = []
    for i, line in enumerate(lines):
        conversations.append(_line(line, Loc(options.source, i), options, seen))
        options.progress(i + 1, len(lines))
    return ImportBatch(source=options.source, format=FORMAT, conversations=conversations)


def _line(line: Mapping[str, Any], loc: Loc, options: ParseOptions, seen: set[str]) -> ParsedConversation:
    line_id = require(line, "id", str, loc, "a string")
    if line_id in seen:
        raise loc.error(f"conversation {line_id!r} appears twice in this file", "id")
    seen.add(line_id)
    turns = require(line, "question", list, loc, "an array of turns")
    meta = {k: v for k, v in line.items() if k not in ("question", "id")} | {"bfcl_id": line_id}
    topic = line.get("topic")
    builder = ConversationBuilder(
        options.multi_id(line_id), options, FORMAT, title=topic if isinstance(topic, str) else "", meta=meta
    )
    mapper = BfclMapper(builder)
    for t, turn in enumerate(turns):
        if not isinstance(turn, list):
            raise loc.error(f"expected an array of messages, got {json_type(turn)}", f"question[{t}]")
        mapper.turn = t
        for k, msg in enumerate(turn):
            mapper.feed(msg, loc.child(f"question[{t}][{k}]"))
    mapper.close()
    return builder.finish()
