"""Importer for OpenAI Chat Completions transcripts (format ``"openai-chat"``).

Input shapes: see :mod:`ctxledger.ingest._shapes` (a request-like object with ``messages`` and
optional ``tools`` / legacy ``functions``; a JSON array or JSON Lines of messages; or of such objects).
Message mapping: see :mod:`ctxledger.ingest._chat`. The object's other keys (a case's ``id``,
``kind``, ``budget`` …) go to the Conversation record's ``meta``; a string ``title`` becomes its title.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ctxledger.ingest._batch import ImportBatch, ParsedConversation
from ctxledger.ingest._builder import ConversationBuilder, ParseOptions
from ctxledger.ingest._chat import ChatMapper
from ctxledger.ingest._load import Loaded
from ctxledger.ingest._shapes import Shape, below, conversation_shapes
from ctxledger.ingest._tools import ToolSet, openai_tools

FORMAT = "openai-chat"
_PAYLOAD_KEYS = frozenset({"messages", "tools", "functions"})


def parse(loaded: Loaded, options: ParseOptions) -> ImportBatch:
    """Parse an OpenAI Chat Completions transcript.

    Raises:
        InputError: bad input (names file, record index and field); nothing is returned.
    """
    shapes = conversation_shapes(loaded.value, options)
    many = len(shapes) > 1
    conversations: list[ParsedConversation] = []
    for i, shape in enumerate(shapes):
        conversations.append(_conversation(shape, options, report=not many))
        if many:
            options.progress(i + 1, len(shapes))
    return ImportBatch(source=options.source, format=FORMAT, conversations=conversations)


def _conversation(shape: Shape, options: ParseOptions, *, report: bool) -> ParsedConversation:
    payload = shape.payload
    meta = {k: v for k, v in payload.items() if k not in _PAYLOAD_KEYS}
    title = payload.get("title") if isinstance(payload.get("title"), str) else ""
    builder = ConversationBuilder(shape.conversation_id, options, FORMAT, title=str(title), meta=meta)
    mapper = ChatMapper(builder, tools=_tools(payload, shape), tools_loc=shape.top)
    total = len(shape.messages)
    for j, msg in enumerate(shape.messages):
        mapper.feed(msg, shape.message_loc(j))
        if report:
            options.progress(j + 1, total)
    mapper.close()
    return builder.finish()


def _tools(payload: Mapping[str, Any], shape: Shape) -> ToolSet | None:
    for key in ("tools", "functions"):
        if payload.get(key) is not None:
            return openai_tools(payload[key], below(shape.top, key))
    return None
