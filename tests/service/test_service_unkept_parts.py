"""The service keeps the parts the importers keep and refuses the rest before writing, naming the field.

``POST /v1/imports`` applies the importers' rule (:mod:`ctxledger.serialize.parts`), so an ``input_audio`` or
``file`` part answers 422 and no conversation appears. ``POST …/messages`` keeps a message's text and a user
message's images (as ``image_url`` parts, in order) and refuses any other part with 422 naming
``messages[i].content[j].type``, writing nothing, where it used to store the text alone.
"""

from __future__ import annotations

import itertools
import json
from typing import TYPE_CHECKING, Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ctxledger.ledger import Ledger
from ctxledger.records import Message

if TYPE_CHECKING:
    from service_helpers import Served

_names = itertools.count()
_TEXTS = st.text(alphabet="abcdefghijklmnopqrstuvwxyz ?", min_size=1, max_size=12).filter(str.strip)
AUDIO = {"type": "input_audio", "input_audio": {"data": "AAAA", "format": "wav"}}
FILE = {"type": "file", "file": {"file_id": "file-abc"}}
B64 = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg=="
PNG = f"data:image/png;base64,{B64}"

UNKEPT = {  # format: (its text part, the parts the endpoint must refuse)
    "openai-chat": ({"type": "text"}, [AUDIO, FILE, {"type": "refusal", "refusal": "no"}]),
    "openai-responses": ({"type": "input_text"}, [AUDIO, {"type": "input_file", "file_id": "file-abc"}]),
    "anthropic-messages": (
        {"type": "text"},
        [
            {"type": "document", "source": {"type": "url", "url": "https://x.test/a.pdf"}},
            {"type": "audio", "source": {"data": "AAAA"}},
            {"type": "thinking", "thinking": "hm", "signature": "s"},
        ],
    ),
}
IMAGES = {  # format: the image parts a user message keeps, each with the URL it is kept under
    "openai-chat": [
        ({"type": "image_url", "image_url": {"url": PNG}}, PNG),
        ({"type": "image_url", "image_url": {"url": "https://x.test/a.png", "detail": "low"}}, "https://x.test/a.png"),
    ],
    "openai-responses": [({"type": "input_image", "image_url": PNG}, PNG)],
    "anthropic-messages": [
        ({"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": B64}}, PNG),
        ({"type": "image", "source": {"type": "url", "url": "https://x.test/b.png"}}, "https://x.test/b.png"),
    ],
}
BAD_IMAGES = [  # (format, an image no format can send, the field named below content[j])
    ("openai-chat", {"type": "image_url", "image_url": {"url": ""}}, "image_url.url"),
    ("openai-chat", {"type": "image_url", "image_url": {"url": PNG, "detail": "max"}}, "image_url.detail"),
    ("openai-chat", {"type": "image_url", "image_url": {"url": "data:image/png;base64,a b"}}, "image_url.url"),
    ("openai-responses", {"type": "input_image", "image_url": PNG, "detail": "max"}, "detail"),
    ("anthropic-messages", {"type": "image", "source": {"type": "base64", "media_type": "image/png"}}, "source"),
]


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


def _shown(part: Any) -> dict[str, Any]:
    if part["type"] == "text":
        return {"type": "text", "text": part["text"]}
    return {"type": part["type"], "url": part["image_url"]["url"]}


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data(), fmt=st.sampled_from(list(IMAGES)))
def test_a_user_messages_images_are_kept_in_order_and_sent(served: Served, data: st.DataObject, fmt: str) -> None:
    text = UNKEPT[fmt][0]
    drawn = data.draw(st.lists(st.one_of(_TEXTS, st.sampled_from(IMAGES[fmt])), min_size=1, max_size=4))
    if not any(isinstance(d, tuple) for d in drawn):
        drawn.append(IMAGES[fmt][0])
    parts = [{**text, "text": d} if isinstance(d, str) else d[0] for d in drawn]
    expected = [
        {"type": "text", "text": d} if isinstance(d, str) else {"type": "image_url", "url": d[1]} for d in drawn
    ]
    conversation = f"img-{next(_names)}"
    url = f"/v1/conversations/{conversation}/messages"
    answer = served.client.post(
        url, headers=served.auth("acme"), json={"format": fmt, "messages": [{"role": "user", "content": parts}]}
    )
    assert answer.status_code == 201, answer.text
    with Ledger.open(served.url) as ledger:
        stored = [r for r in ledger.store.records("acme", conversation) if isinstance(r, Message)]
        kept = [_shown(p) for p in stored[0].content]
        assert kept == expected
        for api in ("openai-chat", "anthropic-messages", "openai-responses"):
            ledger.assemble(conversation, tenant_id="acme", api=api, persist=False)


@settings(max_examples=10, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(case=st.sampled_from(BAD_IMAGES), before=st.lists(_TEXTS, max_size=2))
def test_an_image_no_format_can_send_is_refused_naming_its_field(
    served: Served, case: tuple[str, dict[str, Any], str], before: list[str]
) -> None:
    fmt, image, field = case
    parts = [{**UNKEPT[fmt][0], "text": t} for t in before] + [image]
    conversation = f"badimg-{next(_names)}"
    url = f"/v1/conversations/{conversation}/messages"
    answer = served.client.post(
        url, headers=served.auth("acme"), json={"format": fmt, "messages": [{"role": "user", "content": parts}]}
    )
    assert answer.status_code == 422, answer.text
    assert answer.json()["field"] == f"messages[0].content[{len(before)}].{field}", answer.json()
    assert _listed(served, conversation) is None


def test_an_image_outside_a_user_message_is_refused(served: Served) -> None:
    image = {"type": "image_url", "image_url": {"url": PNG}}
    for role in ("system", "assistant"):
        body = {"messages": [{"role": role, "content": [{"type": "text", "text": "x"}, image]}]}
        answer = served.client.post("/v1/conversations/img-role/messages", headers=served.auth("acme"), json=body)
        assert answer.status_code == 422 and answer.json()["field"] == "messages[0].content[1].type", answer.text
    assert _listed(served, "img-role") is None
