"""Content parts no format sends back are refused at import, before anything is written; the rest always assembles.

One rule (:func:`ctxledger.serialize.parts.part_problem`) says which parts a message keeps: every importer that
takes content parts applies it up front, and the serializers apply it to what they send. So an import either
refuses a part, naming the file, the message and ``content[k].<field>``, with the store left empty, or keeps
it and every API can assemble the conversation.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ctxledger.errors import InputError
from ctxledger.ledger import Ledger
from ctxledger.serialize.parts import KEPT_PART_TYPES, part_problem

APIS = ("openai-chat", "anthropic-messages", "openai-responses")
_TYPE_NAMES = st.text(alphabet="abcdefghijklmnopqrstuvwxyz_", min_size=1, max_size=12)
_TEXTS = st.text(alphabet=st.characters(codec="utf-8", exclude_categories=("Cs", "Cc")), min_size=1, max_size=20)


def _unkept(known: list[dict[str, Any]]) -> st.SearchStrategy[dict[str, Any]]:
    """Valid parts of the format that no message keeps, and parts of made-up types."""
    made_up = _TYPE_NAMES.filter(lambda t: t not in KEPT_PART_TYPES).map(lambda t: {"type": t, t: {"x": 1}})
    return st.sampled_from(known) | made_up


CHAT_UNKEPT = _unkept(
    [
        {"type": "input_audio", "input_audio": {"data": "AAAA", "format": "wav"}},
        {"type": "file", "file": {"file_id": "file-abc"}},
        {"type": "file", "file": {"file_data": "data:application/pdf;base64,AAAA", "filename": "a.pdf"}},
        {"type": "refusal", "refusal": "no"},
    ]
)
RESPONSES_UNKEPT = _unkept(
    [
        {"type": "input_audio", "input_audio": {"data": "AAAA", "format": "wav"}},
        {"type": "input_file", "file_id": "file-abc"},
        {"type": "input_file", "file_data": "data:application/pdf;base64,AAAA", "filename": "a.pdf"},
    ]
)
ANTHROPIC_UNKEPT = _unkept(
    [
        {"type": "document", "source": {"type": "base64", "media_type": "application/pdf", "data": "AAAA"}},
        {"type": "search_result", "source": "x", "title": "t", "content": []},
        {"type": "container_upload", "file_id": "file-abc"},
    ]
)
PNG = (
    "data:image/png;base64,"
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg=="
)


def _chat(parts: list[dict[str, Any]]) -> tuple[dict[str, Any], int]:
    return {"messages": [{"role": "system", "content": "sys"}, {"role": "user", "content": parts}]}, 1


def _responses(parts: list[dict[str, Any]]) -> tuple[dict[str, Any], int]:
    return {"instructions": "sys", "input": [{"role": "user", "content": parts}]}, 0


def _anthropic(parts: list[dict[str, Any]]) -> tuple[dict[str, Any], int]:
    return {"system": "sys", "messages": [{"role": "user", "content": parts}]}, 0


FORMATS: dict[str, tuple[Callable[..., tuple[dict[str, Any], int]], Any, Any, Any]] = {
    # format: (document, a kept text part, a kept image part, the unkept parts)
    "openai-chat": (
        _chat,
        _TEXTS.map(lambda t: {"type": "text", "text": t}),
        st.just({"type": "image_url", "image_url": {"url": PNG, "detail": "low"}}),
        CHAT_UNKEPT,
    ),
    "openai-responses": (
        _responses,
        _TEXTS.map(lambda t: {"type": "input_text", "text": t}),
        st.just({"type": "input_image", "image_url": PNG}),
        RESPONSES_UNKEPT,
    ),
    "anthropic-messages": (
        _anthropic,
        _TEXTS.map(lambda t: {"type": "text", "text": t}),
        st.just({"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": PNG.split(",")[1]}}),
        ANTHROPIC_UNKEPT,
    ),
}


@st.composite
def with_one_unkept(draw: st.DrawFn, fmt: str) -> tuple[list[dict[str, Any]], int]:
    """Kept parts of ``fmt`` with one unkept part at a drawn position, and that position."""
    _, text, image, unkept = FORMATS[fmt]
    kept = draw(st.lists(text | image, max_size=4))
    k = draw(st.integers(0, len(kept)))
    return [*kept[:k], draw(unkept), *kept[k:]], k


def _nothing_stored(ledger: Ledger) -> None:
    assert ledger.store.conversations("default") == []


@pytest.mark.parametrize("fmt", list(FORMATS))
@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_an_unkept_part_is_refused_by_import_file_naming_file_message_and_type(
    tmp_path: Path, fmt: str, data: st.DataObject
) -> None:
    parts, k = data.draw(with_one_unkept(fmt))
    document, index = FORMATS[fmt][0](parts)
    path = tmp_path / f"{fmt}.json"
    path.write_text(json.dumps(document), encoding="utf-8")
    with Ledger.open("memory://") as ledger:
        with pytest.raises(InputError) as caught:
            ledger.import_file(path, fmt, count_tokens_for="gpt-4o")
        assert (caught.value.source, caught.value.index, caught.value.field) == (
            str(path),
            index,
            f"content[{k}].type",
        ), str(caught.value)
        _nothing_stored(ledger)
        with pytest.raises(InputError):  # the in-memory entry point applies the same rule
            ledger.import_messages(
                document.get("messages") or document["input"],
                api=fmt,
                **({"system": "sys"} if fmt != "openai-chat" else {}),
            )
        _nothing_stored(ledger)


def test_the_trial_transcripts_audio_and_file_parts_are_refused_and_nothing_is_listed(tmp_path: Path) -> None:
    """The shape a user hit: an image turn, an answer, then a user turn opening with an audio (or file) part."""
    for n, part in enumerate(
        [
            {"type": "input_audio", "input_audio": {"data": "AAAA", "format": "wav"}},
            {"type": "file", "file": {"file_id": "file-abc"}},
        ]
    ):
        image = [{"type": "text", "text": "What is in this image?"}, {"type": "image_url", "image_url": {"url": PNG}}]
        messages = [
            {"role": "system", "content": "sys"},
            {"role": "user", "content": image},
            {"role": "assistant", "content": "A pixel.", "refusal": None},
            {"role": "user", "content": [part, {"type": "text", "text": "and this?"}]},
        ]
        path = tmp_path / "mm.json"
        path.write_text(json.dumps({"messages": messages}), encoding="utf-8")
        with Ledger.open(f"sqlite:///{tmp_path / f'x{n}.db'}") as ledger:
            with pytest.raises(InputError) as caught:
                ledger.import_file(path, count_tokens_for="gpt-4o")
            assert (caught.value.index, caught.value.field) == (3, "content[0].type")
            assert "mm.json" in str(caught.value) and repr(part["type"]) in str(caught.value)
            _nothing_stored(ledger)
            messages[3]["content"] = messages[3]["content"][1:]  # without the part it imports and assembles
            path.write_text(json.dumps({"messages": messages}), encoding="utf-8")
            ledger.import_file(path, count_tokens_for="gpt-4o")
            assert ledger.store.conversations("default") == ["mm"]
            ledger.assemble("mm", persist=False)


IMAGE_URLS = st.sampled_from([PNG, "https://x.test/a.png", ""])
DETAILS = st.sampled_from(["low", "high", "auto", "max", None])


@st.composite
def chat_part(draw: st.DrawFn) -> dict[str, Any]:
    """Any OpenAI Chat user part: text, an image (some with an empty URL or a bad detail), or an unkept one."""
    which = draw(st.sampled_from(["text", "image", "unkept"]))
    if which == "text":
        return {"type": "text", "text": draw(_TEXTS)}
    if which == "image":
        image: dict[str, Any] = {"url": draw(IMAGE_URLS)}
        detail = draw(DETAILS)
        if detail is not None:
            image["detail"] = detail
        return {"type": "image_url", "image_url": image}
    return draw(CHAT_UNKEPT)


@settings(max_examples=30, deadline=None)
@given(parts=st.lists(chat_part(), min_size=1, max_size=4))
def test_an_import_refuses_exactly_the_parts_that_would_fail_an_assembly(parts: list[dict[str, Any]]) -> None:
    """What an import keeps assembles in every API; the first part the rule refuses is the one named."""
    messages = [{"role": "user", "content": parts}, {"role": "assistant", "content": "ok"}]
    problems = [(k, p) for k, p in enumerate(map(part_problem, parts)) if p is not None]
    with Ledger.open("memory://") as ledger:
        if problems:
            k, problem = problems[0]
            with pytest.raises(InputError) as caught:
                ledger.import_messages(messages, conversation_id="c")
            assert caught.value.field == f"content[{k}].{problem.field}"
            _nothing_stored(ledger)
            return
        ledger.import_messages(messages, conversation_id="c")
        for api in APIS:
            ledger.assemble("c", api=api, persist=False)


BAD_IMAGES = [  # (format, an image part the rule refuses, the field named below content[k])
    ("openai-chat", {"type": "image_url", "image_url": {"url": ""}}, "image_url.url"),
    ("openai-chat", {"type": "image_url", "image_url": {"url": PNG, "detail": "max"}}, "image_url.detail"),
    ("openai-responses", {"type": "input_image", "image_url": ""}, "image_url"),
    ("openai-responses", {"type": "input_image", "image_url": PNG, "detail": "max"}, "detail"),
    ("anthropic-messages", {"type": "image", "source": {"type": "url", "url": ""}}, "source.url"),
]


@pytest.mark.parametrize(("fmt", "image", "field"), BAD_IMAGES)
@settings(max_examples=10, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_an_image_no_format_can_send_is_refused_naming_the_source_field(
    tmp_path: Path, fmt: str, image: dict[str, Any], field: str, data: st.DataObject
) -> None:
    """An empty URL or an unknown ``detail`` breaks every assembly: refused at import, in the format's own names."""
    document, text = FORMATS[fmt][0], FORMATS[fmt][1]
    kept = data.draw(st.lists(text, max_size=3))
    k = data.draw(st.integers(0, len(kept)))
    doc, index = document([*kept[:k], image, *kept[k:]])
    path = tmp_path / "img.json"
    path.write_text(json.dumps(doc), encoding="utf-8")
    with Ledger.open("memory://") as ledger:
        with pytest.raises(InputError) as caught:
            ledger.import_file(path, fmt, count_tokens_for="gpt-4o")
        assert (caught.value.index, caught.value.field) == (index, f"content[{k}].{field}"), str(caught.value)
        _nothing_stored(ledger)


def test_an_inline_image_whose_base64_is_not_base64_is_refused_in_a_responses_message() -> None:
    """The base64 check every edge adds to the rule also covers a Responses message's ``input_image``."""
    image = {"type": "input_image", "image_url": "data:image/png;base64,a b"}
    items = [{"role": "user", "content": [{"type": "input_text", "text": "x"}, image]}]
    with Ledger.open("memory://") as ledger:
        with pytest.raises(InputError) as caught:
            ledger.import_messages(items, api="openai-responses")
        assert (caught.value.index, caught.value.field) == (0, "content[1].image_url")
        _nothing_stored(ledger)
