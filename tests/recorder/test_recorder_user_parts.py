"""``Recorder.user`` takes content parts under the importers' rule: kept as given, or refused naming ``text[k]``."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ctxledger import Ledger
from ctxledger.errors import InputError
from ctxledger.records import Message
from ctxledger.serialize.parts import inline_image_problem, part_problem
from ctxledger.testing import MemoryStore

PNG = (
    "data:image/png;base64,"
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg=="
)
PARTS = st.one_of(
    st.text(min_size=1, max_size=8).map(lambda t: {"type": "text", "text": t}),
    st.sampled_from(
        [
            {"type": "image_url", "image_url": {"url": PNG, "detail": "low"}},
            {"type": "image_url", "image_url": "https://x.test/a.png"},
            {"type": "image_url", "image_url": {"url": ""}},
            {"type": "image_url", "image_url": {"url": "data:image/png;base64,@@"}},
            {"type": "image_url", "image_url": {"url": PNG, "detail": "max"}},
            {"type": "input_audio", "input_audio": {"data": "AAAA", "format": "wav"}},
            {"type": "file", "file": {"file_id": "file-abc"}},
            {"type": "text", "text": 3},
        ]
    ),
)


@settings(max_examples=40, deadline=None)
@given(parts=st.lists(PARTS, min_size=1, max_size=4))
def test_user_parts_are_kept_as_given_or_refused_naming_the_first_bad_one(parts: list[dict[str, Any]]) -> None:
    ledger = Ledger(MemoryStore())
    rec = ledger.recorder("c")
    before = len(rec.records)
    problems = [(k, part_problem(p) or inline_image_problem(p)) for k, p in enumerate(parts)]
    bad = [(k, p) for k, p in problems if p is not None]
    if bad:
        k, problem = bad[0]
        with pytest.raises(InputError) as caught:
            rec.user(parts)
        assert caught.value.field == f"text[{k}].{problem.field}"
        assert len(rec.records) == before
        return
    rid = rec.user(parts)
    stored = ledger.store.get("default", rid)
    assert isinstance(stored, Message) and list(stored.content) == parts
    for api in ("openai-chat", "anthropic-messages", "openai-responses"):
        ledger.assemble("c", api=api, persist=False)


def test_parts_are_for_user_messages_only_and_never_empty() -> None:
    rec = Ledger(MemoryStore()).recorder("c")
    with pytest.raises(InputError) as caught:
        rec.user([])
    assert caught.value.field == "text"
    with pytest.raises(InputError):
        rec.assistant([{"type": "text", "text": "x"}])  # type: ignore[arg-type]
