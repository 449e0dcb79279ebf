"""Conversation datasets without tools: LoCoMo and the BFCL memory prerequisite conversations."""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from ingest_helpers import load, of_type

from ctxledger.ingest import ImportBatch, parse_file
from ctxledger.ingest.locomo import session_time
from ctxledger.records import Message, Participant, Role


def _sessions(conversation: dict[str, Any]) -> list[list[dict[str, Any]]]:
    keys = [k for k in conversation if re.fullmatch(r"session_\d+", k) and isinstance(conversation[k], list)]
    return [conversation[k] for k in sorted(keys, key=lambda k: int(k.split("_")[1]))]


def test_locomo_turns_keep_dia_ids_in_session_order(locomo_path: Path, locomo_batch: ImportBatch) -> None:
    """Each sample is a conversation of its turns, dia_ids as external ids, sessions in order."""
    raw = load(locomo_path)
    assert [c.conversation_id for c in locomo_batch.conversations] == [
        f"locomo10_conv0-6-{s['sample_id']}" for s in raw
    ]
    for sample, conv in zip(raw, locomo_batch.conversations, strict=True):
        turns = [t for session in _sessions(sample["conversation"]) for t in session]
        messages = of_type(conv, Message)
        assert [m.external_id for m in messages] == [t["dia_id"] for t in turns]
        assert all(
            m.role is Role.USER and m.name == t["speaker"] for m, t in zip(messages, turns, strict=True)
        )
    assert locomo_batch.messages == 4124 and locomo_batch.tool_calls == 0


def test_locomo_sessions_with_ten_or_more_come_after_nine(locomo_batch: ImportBatch) -> None:
    """Sessions sort numerically (D10 after D9), not as strings."""
    ids = [m.external_id for m in of_type(locomo_batch.conversations[0], Message)]
    first_session = [int(i.split(":")[0][1:]) for i in ids]
    assert first_session == sorted(first_session) and max(first_session) >= 10


def test_locomo_dates_come_from_the_session_time(locomo_path: Path, locomo_batch: ImportBatch) -> None:
    """created_at is the session's date (UTC) plus the turn position in seconds."""
    conversation = load(locomo_path)[0]["conversation"]
    messages = {m.external_id: m for m in of_type(locomo_batch.conversations[0], Message)}
    assert conversation["session_1_date_time"] == "1:56 pm on 8 May, 2023"
    assert messages["D1:1"].created_at == datetime(2023, 5, 8, 13, 56, tzinfo=UTC)
    assert messages["D1:3"].created_at == datetime(2023, 5, 8, 13, 56, 2, tzinfo=UTC)
    start = session_time(conversation["session_2_date_time"])
    assert messages["D2:1"].created_at == start
    assert messages["D2:2"].created_at == start + timedelta(seconds=1)


def test_locomo_speakers_are_participants_and_own_their_turns(locomo_batch: ImportBatch) -> None:
    """Both speakers are user participants; every turn is owned by its speaker's participant."""
    conv = locomo_batch.conversations[0]
    participants = {p.name: p for p in of_type(conv, Participant)}
    assert set(participants) == {"Caroline", "Melanie", "assistant"}
    assert participants["Caroline"].role == participants["Melanie"].role == "user"
    for message in of_type(conv, Message):
        assert message.owner_participant_id == participants[message.name or ""].id


def test_locomo_image_turns_carry_the_caption(locomo_path: Path, locomo_batch: ImportBatch) -> None:
    """An image turn's text ends with the BLIP caption; url and query stay in meta only."""
    turn = load(locomo_path)[0]["conversation"]["session_1"][4]
    assert turn["dia_id"] == "D1:5" and "img_url" in turn
    message = next(m for m in of_type(locomo_batch.conversations[0], Message) if m.external_id == "D1:5")
    assert message.content == f"{turn['text']} [shares an image: {turn['blip_caption']}]"
    assert message.meta["img_url"] == turn["img_url"] and message.meta["query"] == turn["query"]
    assert turn["img_url"][0] not in str(message.content)


def test_bfcl_memory_lines_become_user_conversations(bfcl_paths: list[Path]) -> None:
    """Each prerequisite line is a conversation of its user messages, in turn order."""
    assert len(bfcl_paths) == 4
    for path in bfcl_paths:
        lines = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
        batch = parse_file(path)
        assert batch.format == "bfcl-memory"
        assert [c.conversation_id for c in batch.conversations] == [
            f"{path.stem}-{line['id']}" for line in lines
        ]
        for line, conv in zip(lines, batch.conversations, strict=True):
            expected = [(t, m["content"]) for t, turn in enumerate(line["question"]) for m in turn]
            messages = of_type(conv, Message)
            assert [(m.meta["turn"], m.content) for m in messages] == expected
            assert all(m.role is Role.USER for m in messages)
            assert conv.records[0].meta["topic"] == line["topic"]
