"""Recorder.record_response and Recorder.tool_calls: provider responses and parallel calls as they come."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ctxledger import Ledger
from ctxledger.errors import InputError
from ctxledger.records import Message, ToolArtifact, ToolCall

CHAT = {
    "id": "chatcmpl-1",
    "object": "chat.completion",
    "model": "gpt-4o",
    "choices": [
        {
            "index": 0,
            "finish_reason": "tool_calls",
            "message": {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {"id": "call_p", "type": "function", "function": {"name": "weather", "arguments": '{"city":"Paris"}'}},
                    {"id": "call_o", "type": "function", "function": {"name": "weather", "arguments": '{"city":"Oslo"}'}},
                ],
            },
        }
    ],
    "usage": {"prompt_tokens": 41, "completion_tokens": 17, "total_tokens": 58},
}
RESPONSE = {
    "id": "resp_1",
    "object": "response",
    "model": "gpt-5",
    "output": [
        {"type": "reasoning", "id": "rs_1", "summary": [], "encrypted_content": "gAAAAB"},
        {"type": "function_call", "id": "fc_1", "call_id": "call_a", "name": "weather", "arguments": "{}"},
        {"type": "function_call", "id": "fc_2", "call_id": "call_b", "name": "time", "arguments": "{}"},
    ],
    "usage": {"input_tokens": 30, "output_tokens": 12},
}
ANTHROPIC = {
    "id": "msg_1",
    "type": "message",
    "role": "assistant",
    "model": "claude-sonnet-4-5",
    "content": [
        {"type": "thinking", "thinking": "Two cities.", "signature": "sig"},
        {"type": "text", "text": "Checking."},
        {"type": "tool_use", "id": "toolu_1", "name": "weather", "input": {"city": "Paris"}},
        {"type": "tool_use", "id": "toolu_2", "name": "weather", "input": {"city": "Oslo"}},
    ],
    "usage": {"input_tokens": 20, "output_tokens": 9},
}


@pytest.fixture
def ledger():
    with Ledger.open("memory://") as ledger:
        yield ledger


@pytest.mark.parametrize(
    ("response", "api", "ids", "usage"),
    [
        (CHAT, "openai-chat", ["call_p", "call_o"], (41, 17)),
        (RESPONSE, "openai-responses", ["call_a", "call_b"], (30, 12)),
        (ANTHROPIC, "anthropic-messages", ["toolu_1", "toolu_2"], (20, 9)),
    ],
)
def test_each_response_shape_is_one_message_with_its_parallel_calls(ledger, response, api, ids, usage) -> None:
    rec = ledger.recorder("c")
    rec.user("Weather in Paris and Oslo?")
    got = rec.record_response(response)
    assert (got.api, list(got.calls), (got.input_tokens, got.output_tokens)) == (api, ids, usage)
    calls = [rec.records[r] for r in got.calls.values()]
    assert all(isinstance(c, ToolCall) and c.message_id == got.message for c in calls)
    assert [c.index for c in calls] == [0, 1]
    for call_id, rid in got.calls.items():
        rec.tool_result(rid, f"result of {call_id}")
    message = rec.records[got.message]
    assert isinstance(message, Message) and message.meta["response_id"] == response["id"]
    payload = ledger.assemble("c", api=api, model=response["model"], window_tokens=8000, output_tokens=200).payload
    assert all(f"result of {i}" in json.dumps(payload) for i in ids)


def test_reasoning_goes_back_only_to_its_provider(ledger) -> None:
    rec = ledger.recorder("c")
    rec.user("go")
    for call_id in rec.record_response(RESPONSE).calls.values():
        rec.tool_result(call_id, "ok")
    items = ledger.assemble("c", api="openai-responses", model="gpt-5", window_tokens=8000, output_tokens=100).payload["input"]
    assert [i["type"] for i in items][:4] == ["message", "reasoning", "function_call", "function_call"]
    assert items[1]["encrypted_content"] == "gAAAAB"
    blocks = ledger.assemble("c", api="anthropic-messages", model="claude-sonnet-4-5", window_tokens=8000, output_tokens=100)
    assert "reasoning" not in json.dumps(blocks.payload["messages"])


def test_sdk_objects_are_accepted(ledger) -> None:
    from openai.types.chat import ChatCompletion

    rec = ledger.recorder("c")
    rec.user("go")
    got = rec.record_response(ChatCompletion.model_validate({**CHAT, "created": 1_700_000_000}))
    assert list(got.calls) == ["call_p", "call_o"]


@settings(max_examples=25, deadline=None)
@given(outputs=st.lists(st.none() | st.text(min_size=1, max_size=20), min_size=1, max_size=5))
def test_tool_calls_writes_n_calls_and_the_known_results_in_one_go(outputs) -> None:
    with Ledger.open("memory://") as ledger:
        rec = ledger.recorder("c")
        rec.user("go")
        head = ledger.store.head_seq("default", "c")
        ex = rec.tool_calls([{"tool": "t", "arguments": {"k": k}, "output": o} for k, o in enumerate(outputs)])
        written = ledger.store.records("default", "c", after_seq=head)
        answered = [o for o in outputs if o is not None]
        assert len(written) == 1 + len(outputs) + len(answered)
        assert len(ex.calls) == len(outputs) and len(ex.artifacts) == len(answered)
        for artifact_id in ex.artifacts.values():
            assert isinstance(rec.records[artifact_id], ToolArtifact)
        pending = [c for c, o in zip(ex.calls, outputs, strict=True) if o is None]
        for call in pending:
            rec.tool_result(call, "late")
        asm = ledger.assemble("c", window_tokens=8000, output_tokens=100)
        (calling,) = [m for m in asm.payload["messages"] if m.get("tool_calls")]
        assert len(calling["tool_calls"]) == len(outputs)


def test_bad_calls_name_the_call(ledger) -> None:
    rec = ledger.recorder("c")
    with pytest.raises(InputError) as caught:
        rec.tool_calls([{"tool": "t", "arguments": {}}, {"tool": "t", "arguments": {}, "colour": "red"}])
    assert caught.value.field == "calls[1]"
    with pytest.raises(InputError) as caught:
        rec.tool_calls([{"tool": "t", "call_id": "x"}, {"tool": "u", "call_id": "x"}])
    assert caught.value.field == "calls[1].call_id"
    with pytest.raises(InputError):
        rec.record_response({"nothing": 1})
