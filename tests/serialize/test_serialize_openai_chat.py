"""OpenAI Chat Completions serializer: exact payloads, token counts, and every rejected rule."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
from serialize_helpers import (
    STORE_ONLY_KEYS,
    load_json,
    sdk_valid_openai,
    structural_keys,
    turns_from_openai,
)

from ctxledger.errors import InputError, ProviderContractError
from ctxledger.serialize import CallView, OpenAIChatSerializer, Turn
from ctxledger.tokens import TokenCounter, get_counter

WEATHER_TOOL = {
    "type": "function",
    "function": {
        "name": "get_current_weather",
        "description": "Get the current weather in a given location",
        "parameters": {
            "type": "object",
            "properties": {
                "location": {"type": "string", "description": "The city and state, e.g. San Francisco, CA"},
                "unit": {
                    "type": "string",
                    "description": "The unit of temperature to return",
                    "enum": ["celsius", "fahrenheit"],
                },
            },
            "required": ["location"],
        },
    },
}
"""The tool of the OpenAI cookbook's token-counting notebook (section 7)."""

IMAGE_URL = "https://example.com/chart.png"


def parallel_turns() -> list[Turn]:
    """System, developer, named user with an image, parallel calls, an error result, a follow-up."""
    return [
        Turn("s1", "system", "You are a travel helper."),
        Turn("d1", "developer", "Use metric units."),
        Turn(
            "m1",
            "user",
            (
                {"type": "text", "text": "Weather here and in Lyon?"},
                {"type": "image_url", "image_url": {"url": IMAGE_URL}},
            ),
            name="ana",
        ),
        Turn(
            "m2",
            "assistant",
            None,
            tool_calls=(
                CallView("call_a", "get_current_weather", '{"location": "Porto"}'),
                CallView("call_b", "get_current_weather", '{"location": "Lyon"}'),
            ),
        ),
        Turn("m3", "tool", '{"temp_c": 19}', tool_call_id="call_a", tool_name="get_current_weather"),
        Turn("m4", "tool", "Error: upstream timeout", tool_call_id="call_b", is_error=True),
        Turn("m5", "assistant", "Porto is 19 C; Lyon is unavailable.", name="helper"),
        Turn("m6", "user", "Retry Lyon."),
    ]


def test_parallel_calls_payload_snapshot(openai: OpenAIChatSerializer) -> None:
    """One message per turn in order: names, developer role, parts kept, calls then both results."""
    payload = openai.build(parallel_turns(), model="gpt-4o", max_tokens=256)
    assert payload == {
        "model": "gpt-4o",
        "max_completion_tokens": 256,
        "messages": [
            {"role": "system", "content": "You are a travel helper."},
            {"role": "developer", "content": "Use metric units."},
            {
                "role": "user",
                "name": "ana",
                "content": [
                    {"type": "text", "text": "Weather here and in Lyon?"},
                    {"type": "image_url", "image_url": {"url": IMAGE_URL}},
                ],
            },
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": "call_a",
                        "type": "function",
                        "function": {"name": "get_current_weather", "arguments": '{"location": "Porto"}'},
                    },
                    {
                        "id": "call_b",
                        "type": "function",
                        "function": {"name": "get_current_weather", "arguments": '{"location": "Lyon"}'},
                    },
                ],
            },
            {"role": "tool", "tool_call_id": "call_a", "content": '{"temp_c": 19}'},
            {"role": "tool", "tool_call_id": "call_b", "content": "Error: upstream timeout"},
            {"role": "assistant", "name": "helper", "content": "Porto is 19 C; Lyon is unavailable."},
            {"role": "user", "content": "Retry Lyon."},
        ],
    }
    sdk_valid_openai(payload)


def test_tool_schemas_drop_store_only_keys(openai: OpenAIChatSerializer, cases_dir: Path) -> None:
    """Case B06's tools carry a ``tokens`` field; the payload's tools carry only API keys."""
    tools = load_json(cases_dir / "B06.json")["tools"]
    payload = openai.build([Turn("u", "user", "hi")], model="gpt-4o", tools=tools)
    assert payload["tools"] == [{"type": "function", "function": t["function"]} for t in tools]
    assert all("tokens" not in tool for tool in payload["tools"])
    sdk_valid_openai(payload)


def test_content_parts_drop_store_only_keys(openai: OpenAIChatSerializer) -> None:
    """Extra keys on content parts (``id``, ``tokens``, ``meta`` …) never reach the payload."""
    part = {
        "type": "text",
        "text": "hi",
        "id": "p1",
        "tokens": 3,
        "tags": ["x"],
        "meta": {},
        "external_id": "e",
    }
    image = {"type": "image_url", "image_url": {"url": IMAGE_URL, "detail": "low", "tokens": 85}, "meta": {}}
    payload = openai.build([Turn("u", "user", (part, image))], model="gpt-4o")
    assert payload["messages"][0]["content"] == [
        {"type": "text", "text": "hi"},
        {"type": "image_url", "image_url": {"url": IMAGE_URL, "detail": "low"}},
    ]
    assert not structural_keys(payload) & STORE_ONLY_KEYS


def test_cookbook_messages_count_matches_the_api(openai: OpenAIChatSerializer, counter: TokenCounter) -> None:
    """The cookbook's named system examples: 124 prompt tokens, as the API reported for gpt-4o."""
    jargon = "You are a helpful, pattern-following assistant that translates corporate jargon into plain English."
    circle = "Let's circle back when we have more bandwidth to touch base on opportunities for increased leverage."
    rows = [
        ("system", None, jargon),
        ("system", "example_user", "New synergies will help drive top-line growth."),
        ("system", "example_assistant", "Things working well together will increase revenue."),
        ("system", "example_user", circle),
        ("system", "example_assistant", "Let's talk later when we're less busy about how to do better."),
        (
            "user",
            None,
            "This late pivot means we don't have time to boil the ocean for the client deliverable.",
        ),
    ]
    turns = [Turn(f"m{i}", role, text, name=name) for i, (role, name, text) in enumerate(rows)]
    assert openai.count(openai.build(turns, model="gpt-4o"), counter) == 124


def test_cookbook_tools_count_matches_the_api(openai: OpenAIChatSerializer, counter: TokenCounter) -> None:
    """The cookbook's weather tool with two messages: 101 prompt tokens, as the API reported for gpt-4o."""
    turns = [
        Turn("s", "system", "You are a helpful assistant that can answer to questions about the weather."),
        Turn("u", "user", "What's the weather like in San Francisco?"),
    ]
    payload = openai.build(turns, model="gpt-4o", tools=[WEATHER_TOOL])
    assert openai.count(payload, counter) == 101
    assert openai.tools_tokens([WEATHER_TOOL], counter) == 101 - openai.count(openai.build(turns, model="x"), counter)


def test_tool_call_pair_count_matches_a_measured_request(openai: OpenAIChatSerializer) -> None:
    """The call/result pair measured in forestwanglin/openai-java#5 (gpt-4, cl100k): 35 prompt tokens."""
    call_id = "call_Id8ycVMsW8gdsf7kSXfgAcf1"
    call = CallView(call_id, "get_current_weather", '{\n  "location": "Boston, MA"\n}')
    turns = [
        Turn("a", "assistant", None, tool_calls=(call,)),
        Turn("t", "tool", "29 degree celcius", tool_call_id=call_id, tool_name="get_current_weather"),
    ]
    assert openai.count(openai.build(turns, model="gpt-4"), get_counter("cl100k_base")) == 35


def test_turn_tokens_add_framing_name_and_call_json(openai: OpenAIChatSerializer, counter: TokenCounter) -> None:
    """A turn costs 3 + role + content (+1 + name) (+5 + name + arguments per call)."""
    plain = Turn("u", "user", "hello world")
    assert openai.turn_tokens(plain, counter) == 3 + counter.count("user") + counter.count("hello world")
    named = Turn("u", "user", "hello world", name="ana")
    assert openai.turn_tokens(named, counter) == openai.turn_tokens(plain, counter) + 1 + counter.count("ana")
    call = Turn("a", "assistant", None, tool_calls=(CallView("c", "lookup", '{"q": "x"}'),))
    expected = 3 + counter.count("assistant") + 5 + counter.count("lookup") + counter.count('{"q": "x"}')
    assert openai.turn_tokens(call, counter) == expected


def test_count_is_the_sum_of_its_parts(openai: OpenAIChatSerializer, counter: TokenCounter) -> None:
    """count(build) == base + tools + sum(turn_tokens) on a payload with parallel calls and an image."""
    turns = parallel_turns()
    payload = openai.build(turns, model="gpt-4o", tools=[WEATHER_TOOL])
    parts = openai.base_tokens(counter) + openai.tools_tokens([WEATHER_TOOL], counter)
    assert openai.count(payload, counter) == parts + sum(openai.turn_tokens(t, counter) for t in turns)


def test_b08_image_turn_is_costed_as_an_image(
    openai: OpenAIChatSerializer, counter: TokenCounter, cases_dir: Path
) -> None:
    """Case B08: the multi-part turn is kept intact and costs text + 85, not thousands of base64 tokens."""
    case = load_json(cases_dir / "B08.json")
    message = next(m for m in case["messages"] if isinstance(m["content"], list))
    turn = turns_from_openai([message])[0]
    payload = openai.build([turn], model="gpt-4o")
    assert payload["messages"][0]["content"] == message["content"]
    text = message["content"][0]["text"]
    assert openai.turn_tokens(turn, counter) == 3 + counter.count("user") + counter.count(text) + 85
    assert openai.turn_tokens(turn, counter) <= message["tokens"]
    assert counter.count(message["content"][1]["image_url"]["url"]) > 1000


def test_tools_tokens_count_nested_schemas(openai: OpenAIChatSerializer, counter: TokenCounter) -> None:
    """Nested keywords the cookbook formula ignores (``items``) still add tokens: never an undercount."""
    flat = {
        "type": "function",
        "function": {"name": "f", "parameters": {"properties": {"xs": {"type": "array"}}}},
    }
    nested = copy.deepcopy(flat)
    nested["function"]["parameters"]["properties"]["xs"]["items"] = {"type": "string", "enum": ["a", "b"]}
    assert openai.tools_tokens([nested], counter) > openai.tools_tokens([flat], counter)
    assert openai.tools_tokens([], counter) == 0


def build_error(openai: OpenAIChatSerializer, turns: list[Turn]) -> ProviderContractError:
    """The ProviderContractError that building ``turns`` raises."""
    with pytest.raises(ProviderContractError) as caught:
        openai.build(turns, model="gpt-4o")
    return caught.value


def test_build_rejects_orphan_tool_result_naming_it(openai: OpenAIChatSerializer) -> None:
    """A tool result whose call is not right before it is refused, naming the result's ref (case B01)."""
    turns = [Turn("m1", "user", "hi"), Turn("m4", "tool", "{}", tool_call_id="call_w1")]
    error = build_error(openai, turns)
    assert (error.rule, error.index, error.refs) == ("tool_result_without_call", 1, ("m4",))
    assert "m4" in str(error)


def test_build_rejects_unanswered_call_naming_it(openai: OpenAIChatSerializer) -> None:
    """A call whose result is missing is refused, naming the assistant turn and the turn that came instead."""
    turns = parallel_turns()
    del turns[5]  # the result of call_b
    error = build_error(openai, turns)
    assert (error.rule, error.index, error.refs) == ("tool_call_unanswered", 3, ("m2", "m5"))
    assert "call_b" in str(error)
    error = build_error(openai, parallel_turns()[:5])  # ends before call_b's result
    assert (error.rule, error.refs) == ("tool_call_unanswered", ("m2",))


def test_build_rejects_user_turn_between_call_and_results(openai: OpenAIChatSerializer) -> None:
    """Results must follow their call immediately: a user turn in between is refused."""
    turns = parallel_turns()
    turns.insert(4, Turn("x", "user", "wait"))
    assert build_error(openai, turns).rule == "tool_call_unanswered"


@pytest.mark.parametrize(
    ("turn", "rule"),
    [
        (Turn("t", "assistant", None), "empty_turn"),
        (Turn("t", "user", None), "missing_content"),
        (Turn("t", "user", "x", tool_calls=(CallView("c", "f", "{}"),)), "tool_calls_on_non_assistant"),
        (Turn("t", "assistant", None, tool_calls=(CallView("c", "f", "{}"),) * 2), "duplicate_tool_call_id"),
        (Turn("t", "system", ({"type": "image_url", "image_url": {"url": IMAGE_URL}},)), "part_not_allowed"),
    ],
)  # fmt: skip
def test_build_rejects_turns_a_role_cannot_carry(openai: OpenAIChatSerializer, turn: Turn, rule: str) -> None:
    """Content or fields the role cannot carry are refused with the rule and the turn's ref."""
    error = build_error(openai, [turn])
    assert error.rule == rule
    assert error.refs == ("t",)


def test_images_in_tool_results_become_references(openai: OpenAIChatSerializer, counter: TokenCounter) -> None:
    """Chat Completions tool messages accept only text parts: an image part becomes a reference to its artifact."""
    image = ({"type": "text", "text": "shot"}, {"type": "image_url", "image_url": {"url": IMAGE_URL}})
    turns = [
        Turn("a", "assistant", None, tool_calls=(CallView("c", "f", "{}"),)),
        Turn("art-7", "tool", image, tool_call_id="c"),
    ]
    message = openai.build(turns, model="gpt-4o")["messages"][1]
    assert [p["type"] for p in message["content"]] == ["text", "text"]
    assert "artifact art-7 holds it (ctxledger rehydrate art-7)" in message["content"][1]["text"]
    assert IMAGE_URL not in str(message)
    assert openai.turn_tokens(turns[1], counter) == openai.message_tokens(message, counter)


def test_malformed_parts_and_tools_name_index_and_field(openai: OpenAIChatSerializer) -> None:
    """A part without a URL and a tool without a name raise InputError naming index and field."""
    turns = [Turn("u0", "user", "hi"), Turn("u1", "user", ({"type": "image_url", "image_url": {}},))]
    with pytest.raises(InputError) as caught:
        openai.build(turns, model="gpt-4o")
    assert (caught.value.index, caught.value.field) == (1, "content[0].image_url.url")
    with pytest.raises(InputError) as caught:
        openai.build(
            [Turn("u", "user", "hi")],
            model="gpt-4o",
            tools=[WEATHER_TOOL, {"type": "function", "function": {}}],
        )
    assert (caught.value.source, caught.value.index, caught.value.field) == ("<tools>", 1, "function.name")


def valid_payload() -> dict[str, Any]:
    """A small valid payload with one call and its result."""
    return OpenAIChatSerializer().build(parallel_turns(), model="gpt-4o")


def broken(change: str) -> tuple[dict[str, Any], int | None]:
    """A copy of :func:`valid_payload` broken in one way, and the message index the error must name."""
    payload = valid_payload()
    messages = payload["messages"]
    if change == "unknown_role":
        messages[1]["role"] = "critic"
        return payload, 1
    if change == "unknown_key":
        messages[2]["tokens"] = 12
        return payload, 2
    if change == "missing_content":
        messages[6]["content"] = None
        return payload, 6
    if change == "tool_result_without_call":
        messages.insert(1, {"role": "tool", "tool_call_id": "call_z", "content": "x"})
        return payload, 1
    if change == "tool_call_unanswered":
        messages.insert(4, {"role": "user", "content": "wait"})
        return payload, 4
    if change == "part_not_allowed":
        messages[4]["content"] = [{"type": "image_url", "image_url": {"url": IMAGE_URL}}]
        return payload, 4
    if change == "duplicate_tool_call_id":
        messages[3]["tool_calls"][1]["id"] = "call_a"
        return payload, 3
    if change == "bad_tool_calls":
        del messages[3]["tool_calls"][0]["function"]["arguments"]
        return payload, 3
    if change == "no_messages":
        payload["messages"] = []
        return payload, None
    raise AssertionError(change)


@pytest.mark.parametrize(
    "rule",
    [
        "unknown_role",
        "unknown_key",
        "missing_content",
        "tool_result_without_call",
        "tool_call_unanswered",
        "part_not_allowed",
        "duplicate_tool_call_id",
        "bad_tool_calls",
        "no_messages",
    ],
)
def test_validate_rejects_each_broken_rule(openai: OpenAIChatSerializer, rule: str) -> None:
    """Each broken rule raises ProviderContractError naming that rule and the offending message index."""
    openai.validate(valid_payload())
    payload, index = broken(rule)
    with pytest.raises(ProviderContractError) as caught:
        openai.validate(payload)
    assert (caught.value.rule, caught.value.index) == (rule, index)


def test_turn_tokens_errors_name_the_ref_without_an_index(openai: OpenAIChatSerializer, counter: TokenCounter) -> None:
    """Costing a lone turn has no position: errors name the ref and claim no index."""
    with pytest.raises(ProviderContractError) as caught:
        openai.turn_tokens(Turn("m9", "user", None), counter)
    assert (caught.value.refs, caught.value.index) == (("m9",), None)
    assert "index" not in str(caught.value)
    with pytest.raises(InputError) as bad_part:
        openai.turn_tokens(Turn("m9", "user", ({"type": "audio"},)), counter)
    assert (bad_part.value.source, bad_part.value.index, bad_part.value.field) == ("turn 'm9'", None, "content[0].type")


def test_a_relayed_turn_is_a_named_user_message_with_a_visible_label(openai: OpenAIChatSerializer, counter) -> None:
    """Another participant's turn: role user, ``name``, and a ``"<name>: "`` label on the text (string or parts)."""
    turns = [
        Turn("u", "user", "Your view?"),
        Turn("a", "user", "Tabs.", name="alice", relayed=True),
        Turn("p", "user", ({"type": "text", "text": "See chart."},), name="alice", relayed=True),
        Turn("b", "assistant", "Spaces.", name="bob"),
    ]
    payload = openai.build(turns, model="gpt-4o")
    assert payload["messages"][1:] == [
        {"role": "user", "content": "alice: Tabs.", "name": "alice"},
        {"role": "user", "content": [{"type": "text", "text": "alice: See chart."}], "name": "alice"},
        {"role": "assistant", "content": "Spaces.", "name": "bob"},
    ]
    sdk_valid_openai(payload)
    assert openai.count(payload, counter) == openai.base_tokens(counter) + sum(
        openai.turn_tokens(t, counter) for t in turns
    )
