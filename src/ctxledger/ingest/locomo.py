"""Importer for LoCoMo conversations (format ``"locomo"``).

Source: snap-research/LoCoMo ``data/locomo10.json`` (Maharana et al., ACL 2024; CC BY-NC 4.0 — read it
from where the user keeps it, never bundle it). A JSON array of samples ``{sample_id, conversation, qa,
…}``. Each sample becomes one conversation ``<prefix>-<sample_id>`` between its two speakers (two
humans: both are ``user`` participants; an ``assistant`` participant is added for the agent that will
use the history). Only ``conversation`` is imported; ``qa`` and the generated summaries stay in the
dataset for evaluation.

Turns of every ``session_<n>`` *list*, sessions in numeric order (some records have
``session_<n>_date_time`` keys without a list), become ``Message(role=user, name=<speaker>)`` owned
by the speaker's participant, ``external_id = dia_id`` (``"D1:3"``), ``created_at`` = the session's
``session_<n>_date_time`` (``"1:56 pm on 8 May, 2023"``, read as UTC) + the turn's position in seconds.
Image turns get `` [shares an image: <blip_caption>]`` appended to their text; ``img_url``, ``query``,
``blip_caption`` and ``re-download`` go to ``meta``. Errors name the sample index and a
``conversation.session_<n>[t].…`` path.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from datetime import UTC, datetime, timedelta
from typing import Any

from ctxledger.errors import InputError
from ctxledger.ingest._batch import ImportBatch, ParsedConversation
from ctxledger.ingest._builder import ConversationBuilder, ParseOptions
from ctxledger.ingest._fields import Loc, as_object, json_type, optional, require
from ctxledger.ingest._load import Loaded
from ctxledger.records import Message, Role, Trust

FORMAT = "locomo"
_SESSION = re.compile(r"session_(\d+)")
_DATE_FORMAT = "%I:%M %p on %d %B, %Y"
_IMAGE_KEYS = ("img_url", "query", "blip_caption", "re-download")


def session_time(text: str) -> datetime:
    """Parse a LoCoMo session time such as ``"1:56 pm on 8 May, 2023"`` as an aware UTC datetime.

    Raises:
        ValueError: ``text`` is not in that form.
    """
    return datetime.strptime(text.strip(), _DATE_FORMAT).replace(tzinfo=UTC)


def parse(loaded: Loaded, options: ParseOptions) -> ImportBatch:
    """Parse a LoCoMo file (one conversation per sample).

    Raises:
        InputError: bad input (names file, sample index and field).
    """
    samples = loaded.value
    if not isinstance(samples, list):
        raise InputError(f"expected an array of samples, got {json_type(samples)}", source=options.source)
    seen: set[str] = set()
    conversations: list[ParsedConversation] = []
    for i, sample in enumerate(samples):
        conversations.append(_sample(sample, Loc(options.source, i), options, seen))
        options.progress(i + 1, len(samples))
    return ImportBatch(source=options.source, format=FORMAT, conversations=conversations)


def _sample(sample: Any, loc: Loc, options: ParseOptions, seen: set[str]) -> ParsedConversation:
    sample = as_object(sample, loc, "a sample object")
    sample_id = require(sample, "sample_id", str, loc, "a string")
    if sample_id in seen:
        raise loc.error(f"sample {sample_id!r} appears twice in this file", "sample_id")
    seen.add(sample_id)
    cloc = loc.child("conversation")
    conv = as_object(require(sample, "conversation", dict, loc, "an object"), cloc)
    speakers = [require(conv, key, str, cloc, "a string") for key in ("speaker_a", "speaker_b")]
    builder = ConversationBuilder(
        options.multi_id(sample_id),
        options,
        FORMAT,
        title=" & ".join(speakers),
        meta={"sample_id": sample_id, "speaker_a": speakers[0], "speaker_b": speakers[1]},
    )
    owners = {name: builder.participant(name, role="user", name=name) for name in speakers}
    builder.participant("assistant", role="assistant", name="assistant")
    for n, key in _sessions(conv):
        _session(builder, conv, n, key, cloc, owners)
    return builder.finish()


def _sessions(conv: Mapping[str, Any]) -> list[tuple[int, str]]:
    found = ((_SESSION.fullmatch(key), key) for key in conv)
    return sorted((int(m.group(1)), key) for m, key in found if m and isinstance(conv[key], list))


def _session(
    builder: ConversationBuilder,
    conv: Mapping[str, Any],
    n: int,
    key: str,
    cloc: Loc,
    owners: Mapping[str, str],
) -> None:
    date_key = f"{key}_date_time"
    raw_date = require(conv, date_key, str, cloc, "a date string")
    try:
        start = session_time(raw_date)
    except ValueError as exc:
        raise cloc.error(
            f"cannot read session time {raw_date!r} (expected e.g. '1:56 pm on 8 May, 2023')", date_key
        ) from exc
    for t, turn in enumerate(conv[key]):
        _turn(builder, turn, cloc.child(f"{key}[{t}]"), start + timedelta(seconds=t), n, owners)


def _turn(
    builder: ConversationBuilder, turn: Any, loc: Loc, at: datetime, n: int, owners: Mapping[str, str]
) -> None:
    turn = as_object(turn, loc, "a turn object")
    speaker = require(turn, "speaker", str, loc, "a string")
    if speaker not in owners:
        raise loc.error(f"speaker {speaker!r} is neither speaker_a nor speaker_b", "speaker")
    dia_id = require(turn, "dia_id", str, loc, "a string")
    text = require(turn, "text", str, loc, "a string")
    caption = optional(turn, "blip_caption", str, loc, "a string")
    if caption is not None:
        text = f"{text} [shares an image: {caption}]"
    meta = {k: turn[k] for k in _IMAGE_KEYS if k in turn} | {"session": n}
    builder.add(
        Message,
        loc,
        owner=owners[speaker],
        trust=Trust.USER,
        at=at,
        external_id=dia_id,
        meta=meta,
        role=Role.USER,
        content=text,
        name=speaker,
    )
