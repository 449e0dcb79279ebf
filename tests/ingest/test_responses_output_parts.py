"""A Responses ``function_call_output`` whose output is an array of parts keeps every part.

Text parts alone import as their texts joined. An array holding an ``input_image`` or ``input_file`` imports as the
array's JSON (what the Anthropic importer does with a ``tool_result`` holding image blocks), so the artifact holds
every part and an inline image reaches the model as an image (Responses, Anthropic) or as a reference (Chat), never
as base64 text. What cannot be kept (a part given by file id, a ``data:`` URL that is not base64, a part of another
type, a part that is not an object) is refused naming the item and ``output[k]``. Outputs are generated: real PNGs
of drawn sizes among drawn text, remote images and files, in drawn order.
"""

from __future__ import annotations

import base64
import io
import json
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from PIL import Image

from ctxledger import Ledger
from ctxledger.errors import InputError
from ctxledger.ingest import parse_openai_responses
from ctxledger.records import ToolArtifact
from ctxledger.testing import MemoryStore

CALL = {"type": "function_call", "call_id": "c1", "name": "shot", "arguments": "{}"}
TEXT = st.text(st.characters(blacklist_categories=("Cs",)), max_size=40)


def _png(width: int, height: int) -> str:
    buffer = io.BytesIO()
    Image.new("RGB", (width, height), (width % 256, height % 256, 9)).save(buffer, "PNG")
    return "data:image/png;base64," + base64.b64encode(buffer.getvalue()).decode()


@st.composite
def _image(draw: st.DrawFn) -> dict[str, Any]:
    part = {"type": "input_image", "image_url": _png(draw(st.integers(1, 90)), draw(st.integers(1, 90)))}
    detail = draw(st.sampled_from([None, "auto", "low", "high"]))
    return part if detail is None else {**part, "detail": detail}


_TEXT_PART = TEXT.map(lambda text: {"type": "input_text", "text": text})
_REMOTE = st.sampled_from(["https://img.example/a.png", "https://img.example/chart.jpg"]).map(
    lambda url: {"type": "input_image", "image_url": url}
)
_FILE = st.sampled_from(
    [
        {"type": "input_file", "filename": "a.pdf", "file_data": "data:application/pdf;base64,JVBERi0xLjQK"},
        {"type": "input_file", "file_url": "https://files.example/report.pdf"},
    ]
)


@st.composite
def _output(draw: st.DrawFn) -> list[dict[str, Any]]:
    """An output array with at least one inline image, among text, remote images and files."""
    others = draw(st.lists(st.one_of(_TEXT_PART, _REMOTE, _FILE), max_size=4))
    images = draw(st.lists(_image(), min_size=1, max_size=3))
    order = draw(st.permutations([*others, *images]))
    return list(order)


def _items(output: Any) -> list[dict[str, Any]]:
    return [
        {"role": "user", "content": "Take a screenshot."},
        CALL,
        {"type": "function_call_output", "call_id": "c1", "output": output},
    ]


def _artifact(output: Any) -> tuple[ToolArtifact, bytes]:
    (conversation,) = parse_openai_responses(_items(output), conversation_id="s").conversations
    (artifact,) = [r for r in conversation.records if isinstance(r, ToolArtifact)]
    return artifact, conversation.blobs[artifact.sha256][0]


def _inline(output: list[dict[str, Any]]) -> list[str]:
    return [p["image_url"] for p in output if p["type"] == "input_image" and p["image_url"].startswith("data:")]


@settings(max_examples=40, deadline=None)
@given(output=_output())
def test_every_part_of_an_output_with_images_is_kept(output: list[dict[str, Any]]) -> None:
    artifact, data = _artifact(output)
    assert json.loads(data) == output
    assert artifact.media_type == "application/json" and artifact.meta["responses_parts"] is True


@settings(max_examples=40, deadline=None)
@given(texts=st.lists(TEXT, max_size=5))
def test_text_parts_alone_are_their_texts_joined(texts: list[str]) -> None:
    artifact, data = _artifact([{"type": "input_text", "text": t} for t in texts])
    assert data.decode() == "".join(texts) and "responses_parts" not in artifact.meta


MODELS = {"openai-responses": "gpt-4o", "anthropic-messages": "claude-sonnet-4-5", "openai-chat": "gpt-4o"}


def _assemble(output: list[dict[str, Any]], api: str) -> Any:
    ledger = Ledger(MemoryStore())
    items = [*_items(output), {"role": "user", "content": "What does it show?"}]
    ledger.import_messages(items, api="openai-responses", conversation_id="s")
    return ledger.assemble("s", api=api, model=MODELS[api], window_tokens=60_000, output_tokens=500)


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(output=_output())
def test_an_inline_image_is_sent_as_an_image_never_as_base64_text(output: list[dict[str, Any]]) -> None:
    images = _inline(output)
    responses = _assemble(output, "openai-responses").payload
    (sent,) = [i["output"] for i in responses["input"] if i["type"] == "function_call_output"]
    assert [p["image_url"] for p in sent if p["type"] == "input_image"] == images
    texts = " ".join(p["text"] for p in sent if p["type"] == "input_text")
    assert all(url.split(",")[1][:60] not in texts for url in images)
    assert [f"[image {n}: image/png" in texts for n in range(1, len(images) + 1)] == [True] * len(images)
    anthropic = _assemble(output, "anthropic-messages").payload
    blocks = [b for m in anthropic["messages"] if isinstance(m["content"], list) for b in m["content"]]
    (result,) = [b for b in blocks if b["type"] == "tool_result"]
    assert [b["source"]["data"] for b in result["content"] if b["type"] == "image"] == [
        url.split(",")[1] for url in images
    ]
    chat = json.dumps(_assemble(output, "openai-chat").payload)  # Chat tool messages take text: a reference
    assert all(url.split(",")[1][:60] not in chat for url in images) and "of this tool result not shown" in chat


@pytest.mark.parametrize(
    ("part", "field", "says"),
    [
        ({"type": "input_image", "file_id": "file-abc"}, "output[1].image_url", "given only by file id is not kept"),
        ({"type": "input_image", "image_url": "data:image/png;base64,iVBO R"}, "output[1].image_url", "base64"),
        ({"type": "input_file", "file_id": "file-abc", "filename": "a.pdf"}, "output[1].file_data", "file id"),
        ({"type": "input_audio", "input_audio": {"data": "AAAA"}}, "output[1].type", "input_audio"),
        ({"type": "input_text"}, "output[1].text", "missing"),
        ("just text", "output[1]", "content part object"),
    ],
)
def test_a_part_that_cannot_be_kept_is_refused_naming_it(part: Any, field: str, says: str) -> None:
    with pytest.raises(InputError, match=says) as caught:
        parse_openai_responses(_items([{"type": "input_text", "text": "here:"}, part]))
    assert caught.value.index == 2 and caught.value.field == field
