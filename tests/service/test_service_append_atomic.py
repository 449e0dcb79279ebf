"""``POST /v1/conversations/{id}/messages`` is all or nothing: a bad k-th message writes nothing and says where."""

from __future__ import annotations

import itertools
import threading
from collections.abc import Iterator

import pytest
from fastapi.testclient import TestClient
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from service_helpers import Served

from ctxledger.ledger import Ledger
from ctxledger.service import create_app
from ctxledger.store.keys import create_key

_names = itertools.count()
TOKEN = "ghp_" + "A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8"  # a GitHub token's shape: the scanner finds it


def _call(call_id: str, name: str = "lookup") -> dict:
    call = {"id": call_id, "type": "function", "function": {"name": name, "arguments": "{}"}}
    return {"role": "assistant", "content": None, "tool_calls": [call]}


def _good(kind: str, n: int) -> list[dict]:
    """One or two well-formed OpenAI Chat messages (a call and its result share a fresh call id)."""
    if kind == "user":
        return [{"role": "user", "content": f"question {n}"}]
    if kind == "assistant":
        return [{"role": "assistant", "content": [{"type": "text", "text": f"answer {n}"}]}]
    return [_call(f"c{n}"), {"role": "tool", "tool_call_id": f"c{n}", "content": f'{{"n": {n}}}'}]


BAD = [  # (message, the field the problem must name after messages[k])
    ({"role": "robot", "content": "hi"}, ".role"),
    ({"role": "user", "content": ""}, ".content"),
    ({"role": "user", "content": 7}, ".content"),
    ({"role": "user", "content": [{"type": "text", "text": 3}]}, ".content[0].text"),
    ({"role": "tool", "tool_call_id": "never-called", "content": "x"}, ".tool_call_id"),
    ({"role": "tool", "content": "x"}, ".tool_call_id"),
    ({"role": "user", "content": "hi", "tool_calls": [{"id": "x"}]}, ".tool_calls"),
    (_call(TOKEN), ".tool_calls[0]"),
    (_call("c-ok", name=""), ".tool_calls[0]"),
]


def _head(served: Served, conversation: str) -> int | None:
    listed = served.client.get("/v1/conversations", headers=served.auth("acme")).json()
    return next((c["events"] for c in listed if c["id"] == conversation), None)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    before=st.lists(st.sampled_from(["user", "assistant", "tool"]), max_size=3),
    after=st.lists(st.sampled_from(["user", "assistant", "tool"]), max_size=3),
    bad=st.sampled_from(BAD),
    existing=st.booleans(),
)
def test_a_bad_kth_message_writes_nothing_and_names_its_index_and_field(
    served: Served, before: list[str], after: list[str], bad: tuple[dict, str], existing: bool
) -> None:
    conversation = f"atomic-{next(_names)}"
    url = f"/v1/conversations/{conversation}/messages"
    auth = served.auth("acme")
    if existing:
        seeded = served.client.post(url, headers=auth, json={"messages": [{"role": "user", "content": "seed"}]})
        assert seeded.status_code == 201, seeded.text
    head = _head(served, conversation)
    messages = [m for i, kind in enumerate(before) for m in _good(kind, i)]
    k = len(messages)
    messages += [bad[0]] + [m for i, kind in enumerate(after, start=100) for m in _good(kind, i)]
    answer = served.client.post(url, headers=auth, json={"format": "openai-chat", "messages": messages})
    assert answer.status_code == 422, answer.text
    assert answer.headers["content-type"].startswith("application/problem+json")
    problem = answer.json()
    assert problem["field"] == f"messages[{k}]{bad[1]}", problem
    assert problem.get("index") == k
    assert _head(served, conversation) == head  # nothing written; a new conversation was not even created
    assert TOKEN not in answer.text


def test_the_records_of_one_request_are_stored_together_in_order(served: Served) -> None:
    auth = served.auth("acme")
    messages = [m for i, kind in enumerate(["user", "tool", "assistant", "tool"]) for m in _good(kind, i)]
    answer = served.client.post("/v1/conversations/together/messages", headers=auth, json={"messages": messages})
    assert answer.status_code == 201, answer.text
    body = answer.json()
    # conversation + main branch, then user (1), call exchange (2) + result (1), assistant (1), exchange + result
    assert body["head_seq"] == 2 + 1 + 3 + 1 + 3 == len(body["records"]) + 2
    listed = [r for r in served.client.get("/v1/conversations", headers=auth).json() if r["id"] == "together"]
    assert listed[0]["events"] == body["head_seq"]


def test_a_later_request_answers_a_call_of_an_earlier_one_by_its_provider_id(served: Served) -> None:
    auth = served.auth("acme")
    url = "/v1/conversations/later/messages"
    assert served.client.post(url, headers=auth, json={"messages": [_call("call-x")]}).status_code == 201
    answered = {"role": "tool", "tool_call_id": "call-x", "content": "done"}
    assert served.client.post(url, headers=auth, json={"messages": [answered]}).status_code == 201
    again = served.client.post(url, headers=auth, json={"messages": [answered]})
    assert again.status_code == 422 and again.json()["field"] == "messages[0].tool_call_id"
    assert "already has a result" in again.json()["detail"]
    reused = served.client.post(url, headers=auth, json={"messages": [_call("call-x")]})
    assert reused.status_code == 422 and reused.json()["field"] == "messages[0].tool_calls[0]"


@pytest.fixture(scope="module")
def two_apps(store_url: str) -> Iterator[tuple[TestClient, TestClient, dict[str, str], str]]:
    """Two service instances (two ledgers, two engines) on one store: PostgreSQL when configured, else SQLite."""
    with Ledger.open(store_url) as ledger:
        key = create_key(ledger.store, "acme")[0]
    with TestClient(create_app(store_url)) as a, TestClient(create_app(store_url)) as b:
        yield a, b, {"Authorization": f"Bearer {key}"}, store_url


def test_concurrent_appends_to_one_conversation_stay_whole_and_ordered(two_apps) -> None:
    a, b, auth, url_of_store = two_apps
    url = "/v1/conversations/shared/messages"
    assert a.post(url, headers=auth, json={"messages": [{"role": "user", "content": "start"}]}).status_code == 201
    answers: list = []

    def client(which: TestClient, writer: str) -> None:
        for r in range(4):
            texts = [f"{writer}-{r}-{i}" for i in range(3)]
            msgs = [{"role": "user", "content": t} for t in texts]
            answers.append((texts, which.post(url, headers=auth, json={"messages": msgs})))

    threads = [threading.Thread(target=client, args=(c, w)) for c, w in ((a, "a"), (b, "b"), (a, "c"), (b, "d"))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert all(r.status_code == 201 for _, r in answers), [r.text for _, r in answers if r.status_code != 201]
    with Ledger.open(url_of_store) as ledger:
        stored = [r for r in ledger.store.records("acme", "shared") if getattr(r, "content", None)]
    texts = [r.content for r in stored]
    assert len(texts) == len(set(texts)) == 1 + 16 * 3  # nothing lost or duplicated
    for sent, _ in answers:  # each request's records are consecutive and in the order sent
        at = texts.index(sent[0])
        assert texts[at : at + 3] == sent
    seqs = [r.seq for r in stored]
    assert seqs == sorted(seqs)


@pytest.mark.parametrize(
    "fmt, messages, field",
    [
        ("anthropic-messages", [{"role": "user", "content": "hi"},
                                {"role": "assistant", "content": [{"type": "tool_use", "id": "t1", "name": "f"}]},
                                {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t9"}]}],
         "messages[2].content[0].tool_use_id"),
        ("anthropic-messages", [{"role": "user", "content": "hi"},
                                {"role": "assistant", "content": [{"type": "tool_use", "id": "t1", "name": "f",
                                                                   "input": [1]}]}],
         "messages[1].content[0].input"),
        ("openai-responses", [{"type": "message", "role": "user", "content": "hi"},
                              {"type": "function_call", "call_id": "r1", "name": "f", "arguments": "{}"},
                              {"type": "function_call", "call_id": "r1", "name": "f", "arguments": "{}"}],
         "messages[2].call_id"),
        ("openai-responses", [{"type": "message", "role": "user", "content": "hi"}, {"type": "reasoning"}],
         "messages[1].type"),
    ],
)  # fmt: skip
def test_every_format_names_the_bad_message_and_writes_nothing(
    served: Served, fmt: str, messages: list, field: str
) -> None:
    conversation = f"formats-{next(_names)}"
    body = {"format": fmt, "messages": messages}
    answer = served.client.post(f"/v1/conversations/{conversation}/messages", headers=served.auth("acme"), json=body)
    assert answer.status_code == 422 and answer.json()["field"] == field, answer.text
    assert _head(served, conversation) is None
