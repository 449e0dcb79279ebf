"""The OpenAI Responses serializer: items, reasoning pinned to its calls, client-side state, validation rules."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from serialize_helpers import sdk_valid_responses

from ctxledger.errors import ProviderContractError
from ctxledger.serialize import CallView, OpenAIResponsesSerializer, Turn, get_serializer
from ctxledger.tokens import TokenCounter

REASONING = {"type": "reasoning", "id": "rs_1", "summary": [], "encrypted_content": "gAAAAB"}
TOOLS = [{"type": "function", "function": {"name": "lookup", "parameters": {"type": "object", "properties": {}}}}]


def exchange() -> list[Turn]:
    calls = (CallView("call_a", "lookup", '{"q": 1}'), CallView("call_b", "fs.read", "{}"))
    return [
        Turn("s", "system", "You are terse."),
        Turn("d", "developer", "Answer in English."),
        Turn("u", "user", "go"),
        Turn("a", "assistant", None, tool_calls=calls, thinking=((0, REASONING),)),
        Turn("t2", "tool", "B", tool_call_id="call_b"),
        Turn("t1", "tool", "A", tool_call_id="call_a"),
        Turn("f", "assistant", "done"),
    ]


def test_a_tool_exchange_becomes_items_with_its_reasoning_first(responses: OpenAIResponsesSerializer) -> None:
    payload = responses.build(exchange(), model="gpt-5", tools=TOOLS, max_tokens=100)
    sdk_valid_responses(payload)
    assert payload["instructions"] == "You are terse.\n\nAnswer in English."
    assert [(i["type"], i.get("call_id") or i.get("role") or i.get("id")) for i in payload["input"]] == [
        ("message", "user"),
        ("reasoning", "rs_1"),
        ("function_call", "call_a"),
        ("function_call", "call_b"),
        ("function_call_output", "call_b"),
        ("function_call_output", "call_a"),
        ("message", "assistant"),
    ]
    assert payload["input"][1] == REASONING  # sent back unmodified
    assert payload["input"][3]["name"] == "fs_read"  # a valid tool name
    assert (payload["store"], payload["include"], payload["truncation"]) == (
        False,
        ["reasoning.encrypted_content"],
        "disabled",
    )
    assert payload["max_output_tokens"] == 100
    assert payload["tools"] == [
        {"type": "function", "name": "lookup", "parameters": {"type": "object", "properties": {}}, "strict": False}
    ]


def test_the_registry_knows_the_contract() -> None:
    assert isinstance(get_serializer("openai-responses"), OpenAIResponsesSerializer)


def test_anthropic_thinking_is_not_sent_to_openai_nor_reasoning_to_anthropic() -> None:
    thinking = {"type": "thinking", "thinking": "hmm", "signature": "sig"}
    turns = [
        Turn("u", "user", "go"),
        Turn("a", "assistant", "ok", thinking=((0, thinking), (1, REASONING))),
    ]
    items = get_serializer("openai-responses").build(turns, model="m")["input"]
    assert [i["type"] for i in items] == ["message", "reasoning", "message"]
    blocks = get_serializer("anthropic-messages").build(turns, model="m")["messages"][1]["content"]
    assert [b["type"] for b in blocks] == ["thinking", "text"]


def test_named_and_image_turns(responses: OpenAIResponsesSerializer, png_url: Any) -> None:
    url = png_url(300, 200)
    turns = [
        Turn("u", "user", ({"type": "text", "text": "see"}, {"type": "image_url", "image_url": {"url": url}})),
        Turn("r", "user", "hello", name="bob", relayed=True),
    ]
    items = responses.build(turns, model="m")["input"]
    assert items[0]["content"] == [
        {"type": "input_text", "text": "see"},
        {"type": "input_image", "image_url": url, "detail": "auto"},
    ]
    assert items[1]["content"] == "bob: hello"
    with pytest.raises(ProviderContractError) as caught:
        responses.build([Turn("u", "user", "x"), Turn("a", "assistant", ({"type": "image_url", "image_url": url},))], model="m")
    assert caught.value.rule == "part_not_allowed"


def test_count_is_the_sum_of_its_parts(responses: OpenAIResponsesSerializer, counter: TokenCounter) -> None:
    turns = [t for t in exchange() if t.ref != "d"]
    payload = responses.build(turns, model="m", tools=TOOLS)
    parts = responses.base_tokens(counter) + responses.tools_tokens(TOOLS, counter)
    assert responses.count(payload, counter) == parts + sum(responses.turn_tokens(t, counter) for t in turns)
    assert responses.turn_tokens(turns[2], counter) > responses.turn_tokens(
        Turn("a", "assistant", None, tool_calls=turns[2].tool_calls), counter
    )  # the reasoning item is costed


def _broken(payload: dict[str, Any], change: str) -> dict[str, Any]:
    p = copy.deepcopy(payload)
    items = p["input"]
    if change == "store":
        p["store"] = True
    elif change == "truncation":
        p["truncation"] = "auto"
    elif change == "include":
        p["include"] = []
    elif change == "unknown_key":
        p["previous_response_id"] = "resp_1"
    elif change == "orphan_output":
        del items[1:4]
    elif change == "unanswered":
        del items[4:6]
    elif change == "duplicate":
        items[3]["call_id"] = items[4]["call_id"] = "call_a"
    elif change == "bad_call_id":
        items[2]["call_id"] = items[5]["call_id"] = "call a"
    elif change == "reasoning_last":
        items.append(dict(REASONING))
    elif change == "message_between":
        items.insert(4, {"type": "message", "role": "user", "content": "hi"})
    elif change == "item_type":
        items.append({"type": "web_search_call", "id": "ws_1"})
    elif change == "blank":
        items[0]["content"] = " "
    elif change == "tool_name":
        p["tools"][0]["name"] = "a.b"
    return p


@pytest.mark.parametrize(
    ("change", "rule"),
    [
        ("store", "store_not_false"),
        ("truncation", "truncation_not_disabled"),
        ("include", "reasoning_not_included"),
        ("unknown_key", "unknown_key"),
        ("orphan_output", "tool_result_without_call"),
        ("unanswered", "tool_call_unanswered"),
        ("duplicate", "duplicate_tool_call_id"),
        ("bad_call_id", "bad_call_id"),
        ("reasoning_last", "reasoning_without_following_item"),
        ("message_between", "tool_call_unanswered"),
        ("item_type", "unknown_item"),
        ("blank", "empty_content"),
        ("tool_name", "bad_tool_name"),
    ],
)
def test_validate_flags_each_rule(responses: OpenAIResponsesSerializer, change: str, rule: str) -> None:
    payload = responses.build(exchange(), model="m", tools=TOOLS)
    responses.validate(payload)
    with pytest.raises(ProviderContractError) as caught:
        responses.validate(_broken(payload, change))
    assert caught.value.rule == rule
