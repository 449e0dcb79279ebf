"""The service refuses content parts it cannot keep, before writing, naming the field: never a 200 that drops them.

``POST /v1/imports`` applies the importers' rule (:func:`ctxledger.serialize.parts.part_problem`), so an
``input_audio`` or ``file`` part answers 422 and no conversation appears. ``POST …/messages`` records a
message's text: any other part (those same parts, and images too) answers 422 naming
``messages[i].content[j].type`` and writes nothing, where it used to store the text alone.
"""

from __future__ import annotations

import itertools
import json
from typing import TYPE_CHECKING, Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

if TYPE_CHECKING:
    from service_helpers import Served

_names = itertools.count()
_TEXTS = st.text(alphabet="abcdefghijklmnopqrstuvwxyz ?", min_size=1, max_size=12).filter(str.strip)
AUDIO = {"type": "input_audio", "input_audio": {"data": "AAAA", "format": "wav"}}
FILE = {"type": "file", "file": {"file_id": "file-abc"}}
IMAGE = {"type": "image_url", "image_url": {"url": "https://x.test/a.png"}}

UNKEPT = {  # format: (its text part, the non-text parts the endpoint must refuse)
    "openai-chat": ({"type": "text"}, [AUDIO, FILE, IMAGE, {"type": "refusal", "refusal": "no"}]),
    "openai-responses": (
        {"type": "input_text"},
        [AUDIO, {"type": "input_file", "file_id": "file-abc"}, {"type": "input_image", "image_url": "https://x.test/a"}],
    ),
    "anthropic-messages": (
        {"type": "text"},
        [
            {"type": "image", "source": {"type": "url", "url": "https://x.test/a.png"}},
            {"type": "document", "source": {"type": "url", "url": "https://x.test/a.pdf"}},
            {"type": "audio", "source": {"data": "AAAA"}},
        ],
    ),
}


def _listed(served: Served, conversation: str) -> int | None:
    listed = served.client.get("/v1/conversations", headers=served.auth("acme")).json()
    return next((c["events"] for c in listed if c["id"] == conversation), None)


@st.composite
def parts_with_one_unkept(draw: st.DrawFn, fmt: str) -> tuple[list[dict[str, Any]], int]:
    text, unkept = UNKEPT[fmt]
    texts = [{**text, "text": t} for t in draw(st.lists(_TEXTS, min_size=1, max_size=3))]
    j = draw(st.integers(0, len(texts)))
    return [*texts[:j], draw(st.sampled_from(unkept)), *texts[j:]], j


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data(), fmt=st.sampled_from(list(UNKEPT)), before=st.integers(0, 2), existing=st.booleans())
def test_a_message_with_a_part_other_than_text_is_refused_and_nothing_is_written(
    served: Served, data: st.DataObject, fmt: str, before: int, existing: bool
) -> None:
    conversation = f"parts-{next(_names)}"
    url = f"/v1/conversations/{conversation}/messages"
    auth = served.auth("acme")
    if existing:
        seeded = served.client.post(url, headers=auth, json={"messages": [{"role": "user", "content": "seed"}]})
        assert seeded.status_code == 201, seeded.text
    head = _listed(served, conversation)
    parts, j = data.draw(parts_with_one_unkept(fmt))
    turns = ["user", "assistant"] * 2
    messages = [{"role": turns[i], "content": f"turn {i}"} for i in range(before)]
    messages.append({"role": "user", "content": parts})
    answer = served.client.post(url, headers=auth, json={"format": fmt, "messages": messages})
    assert answer.status_code == 422, answer.text
    problem = answer.json()
    assert problem["field"] == f"messages[{before}].content[{j}].type", problem
    assert problem.get("index") == before
    assert _listed(served, conversation) == head  # nothing written: no text alone, no new conversation


def test_text_parts_alone_are_still_recorded(served: Served) -> None:
    url = "/v1/conversations/parts-text/messages"
    parts = [{"type": "text", "text": "one"}, {"type": "text", "text": "two"}]
    body = {"messages": [{"role": "user", "content": parts}]}
    answer = served.client.post(url, headers=served.auth("acme"), json=body)
    assert answer.status_code == 201, answer.text
    assert _listed(served, "parts-text") == answer.json()["head_seq"]


DOCUMENTS = {  # format: (a transcript whose user message has ``part`` at content[0], that message's index)
    "openai-chat": (
        lambda part: {"messages": [{"role": "system", "content": "s"}, {"role": "user", "content": [part]}]},
        1,
    ),
    "openai-responses": (lambda part: {"instructions": "s", "input": [{"role": "user", "content": [part]}]}, 0),
    "anthropic-messages": (lambda part: {"system": "s", "messages": [{"role": "user", "content": [part]}]}, 0),
}


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data(), fmt=st.sampled_from(list(DOCUMENTS)))
def test_an_import_with_an_unkept_part_answers_422_and_no_conversation_appears(
    served: Served, data: st.DataObject, fmt: str
) -> None:
    document, index = DOCUMENTS[fmt]
    part = data.draw(st.sampled_from([p for p in UNKEPT[fmt][1] if "image" not in p["type"]]))
    conversation = f"imp-{next(_names)}"
    body = {
        "content": json.dumps(document(part)),
        "filename": "mm.json",
        "format": fmt,
        "conversation_id": conversation,
    }
    answer = served.client.post("/v1/imports", headers=served.auth("acme"), json=body)
    assert answer.status_code == 422, answer.text
    problem = answer.json()
    assert (problem.get("index"), problem["field"]) == (index, "content[0].type"), problem
    assert repr(part["type"]) in problem["detail"] and "<turns>" not in problem["detail"], problem
    assert _listed(served, conversation) is None
