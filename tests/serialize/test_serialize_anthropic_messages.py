"""Anthropic Messages serializer: exact payloads, merging, token counts, and every rejected rule."""

from __future__ import annotations

import base64
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from serialize_helpers import STORE_ONLY_KEYS, load_json, sdk_valid_anthropic, structural_keys

from ctxledger.errors import ProviderContractError
from ctxledger.serialize import AnthropicMessagesSerializer, CallView, Turn
from ctxledger.serialize.anthropic_messages import MESSAGE_TOKENS, TOOL_USE_SYSTEM_PROMPT_TOKENS
from ctxledger.serialize.undeclared_tools import DESCRIPTIONS, SCHEMA_NOT_RECORDED, minimal_definition
from ctxledger.tokens import TokenCounter

REMOTE = "https://example.com/chart.png"


def tool_turns(png: str) -> list[Turn]:
    """System + developer, named user with images, parallel calls with an error, user text after results."""
    return [
        Turn("s1", "system", "You are a travel helper."),
        Turn("d1", "developer", "Use metric units."),
        Turn(
            "m1",
            "user",
            (
                {"type": "text", "text": "Compare these:"},
                {"type": "image_url", "image_url": {"url": png, "detail": "high"}},
                {"type": "text", "text": "  "},
                {"type": "image_url", "image_url": {"url": REMOTE}},
            ),
            name="ana",
        ),
        Turn("m2", "user", "Also check the weather."),
        Turn(
            "m3",
            "assistant",
            "Checking both.",
            tool_calls=(
                CallView("call_a", "forecast", '{"city": "Porto"}'),
                CallView("call_b", "forecast", "{bad"),
            ),
        ),
        Turn("m4", "tool", '{"temp_c": 19}', tool_call_id="call_a"),
        Turn("m5", "tool", "Error: invalid arguments", tool_call_id="call_b", is_error=True),
        Turn("m6", "user", "Thanks."),
    ]


def test_payload_snapshot(anthropic: AnthropicMessagesSerializer, png_url: Callable[[int, int], str]) -> None:
    """System is top-level; users merge; results lead one user message; images become image blocks."""
    png = png_url(64, 48)
    payload = anthropic.build(tool_turns(png), model="claude-sonnet-4-5", max_tokens=512)
    data = png.split(",", 1)[1]
    assert payload == {
        "model": "claude-sonnet-4-5",
        "max_tokens": 512,
        "system": [
            {"type": "text", "text": "You are a travel helper."},
            {"type": "text", "text": "Use metric units."},
        ],
        "messages": [
            {
                "role": "user",
                "content": [
                    {"type": "text", "text": "ana: Compare these:"},
                    {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": data}},
                    {"type": "image", "source": {"type": "url", "url": REMOTE}},
                    {"type": "text", "text": "Also check the weather."},
                ],
            },
            {
                "role": "assistant",
                "content": [
                    {"type": "text", "text": "Checking both."},
                    {"type": "tool_use", "id": "call_a", "name": "forecast", "input": {"city": "Porto"}},
                    {
                        "type": "tool_use",
                        "id": "call_b",
                        "name": "forecast",
                        "input": {"_raw_arguments": "{bad"},
                    },
                ],
            },
            {
                "role": "user",
                "content": [
                    {"type": "tool_result", "tool_use_id": "call_a", "content": '{"temp_c": 19}'},
                    {
                        "type": "tool_result",
                        "tool_use_id": "call_b",
                        "content": "Error: invalid arguments",
                        "is_error": True,
                    },
                    {"type": "text", "text": "Thanks."},
                ],
            },
        ],
        "tools": [  # no schema of forecast was given: a minimal definition, so the API accepts the tool_use blocks
            {
                "name": "forecast",
                "description": DESCRIPTIONS[SCHEMA_NOT_RECORDED],
                "input_schema": {"type": "object"},
            }
        ],
    }
    sdk_valid_anthropic(payload)


def test_single_system_turn_is_a_string_and_tools_convert(
    anthropic: AnthropicMessagesSerializer, cases_dir: Path
) -> None:
    """One system turn is a string; OpenAI tools become name/description/input_schema, no store keys."""
    tools = load_json(cases_dir / "B06.json")["tools"]
    turns = [Turn("s", "system", "Be brief."), Turn("u", "user", "hi")]
    payload = anthropic.build(turns, model="claude", tools=tools)
    assert payload["system"] == "Be brief."
    assert payload["tools"] == [
        {
            "name": t["function"]["name"],
            "description": t["function"]["description"],
            "input_schema": t["function"]["parameters"],
        }
        for t in tools
    ]
    assert not structural_keys(payload) & STORE_ONLY_KEYS
    sdk_valid_anthropic(payload)


def test_tool_result_parts_and_empty_results(anthropic: AnthropicMessagesSerializer) -> None:
    """Part results become text/image blocks; an empty result has no content key, never an empty block."""
    calls = (CallView("c1", "shot", "{}"), CallView("c2", "noop", ""))
    turns = [
        Turn("u", "user", "go"),
        Turn("a", "assistant", None, tool_calls=calls),
        Turn(
            "t1",
            "tool",
            ({"type": "text", "text": "screen"}, {"type": "image_url", "image_url": REMOTE}),
            tool_call_id="c1",
        ),
        Turn("t2", "tool", "", tool_call_id="c2"),
    ]
    messages = anthropic.build(turns, model="claude")["messages"]
    assert messages[1]["content"][1]["input"] == {}
    assert messages[2] == {
        "role": "user",
        "content": [
            {
                "type": "tool_result",
                "tool_use_id": "c1",
                "content": [
                    {"type": "text", "text": "screen"},
                    {"type": "image", "source": {"type": "url", "url": REMOTE}},
                ],
            },
            {"type": "tool_result", "tool_use_id": "c2"},
        ],
    }


def test_non_object_arguments_are_kept_raw(anthropic: AnthropicMessagesSerializer) -> None:
    """JSON arguments that are not an object (a list, a string) are kept as ``_raw_arguments``."""
    calls = (CallView("c1", "f", "[1, 2]"), CallView("c2", "g", '"x"'))
    turns = [
        Turn("u", "user", "go"),
        Turn("a", "assistant", None, tool_calls=calls),
        Turn("t1", "tool", "ok", tool_call_id="c1"),
        Turn("t2", "tool", "ok", tool_call_id="c2"),
    ]
    blocks = anthropic.build(turns, model="claude")["messages"][1]["content"]
    assert [b["input"] for b in blocks] == [{"_raw_arguments": "[1, 2]"}, {"_raw_arguments": '"x"'}]


def test_merging_only_removes_message_framing(
    anthropic: AnthropicMessagesSerializer, counter: TokenCounter, png_url: Callable[[int, int], str]
) -> None:
    """count(build) == base + tools + sum(turn_tokens) minus one message framing per turn merged into another;
    the tools are the minimal definition of ``forecast`` and the tool-use system prompt."""
    turns = tool_turns(png_url(64, 48))
    payload = anthropic.build(turns, model="claude")
    tools = anthropic.tools_tokens([minimal_definition("forecast")], counter)
    assert tools > TOOL_USE_SYSTEM_PROMPT_TOKENS
    total = anthropic.base_tokens(counter) + tools + sum(anthropic.turn_tokens(t, counter) for t in turns)
    merged_away = (
        (MESSAGE_TOKENS + counter.count("system"))  # developer joins system
        + (MESSAGE_TOKENS + counter.count("user"))  # m2 joins m1
        + 2 * (MESSAGE_TOKENS + counter.count("user"))  # m5 and m6 join m4
    )
    assert anthropic.count(payload, counter) == total - merged_away


def test_image_blocks_cost_pixels_not_base64(
    anthropic: AnthropicMessagesSerializer, counter: TokenCounter, png_url: Callable[[int, int], str]
) -> None:
    """A 1000x1000 PNG costs ~1334 tokens; a remote image the 1600 maximum; text costs its tokens."""
    png = png_url(1000, 1000)
    turn = Turn("u", "user", ({"type": "image_url", "image_url": {"url": png}},))
    assert anthropic.turn_tokens(turn, counter) == MESSAGE_TOKENS + counter.count("user") + 1334
    remote = Turn("u", "user", ({"type": "image_url", "image_url": {"url": REMOTE}},))
    assert anthropic.turn_tokens(remote, counter) == MESSAGE_TOKENS + counter.count("user") + 1600


def test_tools_tokens_include_the_tool_use_system_prompt(
    anthropic: AnthropicMessagesSerializer, counter: TokenCounter, cases_dir: Path
) -> None:
    """Tools cost the documented tool-use system prompt plus each definition; no tools cost nothing."""
    tools = load_json(cases_dir / "B06.json")["tools"]
    assert anthropic.tools_tokens([], counter) == 0
    one = anthropic.tools_tokens(tools[:1], counter)
    assert one > TOOL_USE_SYSTEM_PROMPT_TOKENS
    assert anthropic.tools_tokens(tools, counter) - one == sum(
        anthropic.tools_tokens([t], counter) - TOOL_USE_SYSTEM_PROMPT_TOKENS for t in tools[1:]
    )


def build_error(anthropic: AnthropicMessagesSerializer, turns: list[Turn]) -> ProviderContractError:
    """The ProviderContractError that building ``turns`` raises."""
    with pytest.raises(ProviderContractError) as caught:
        anthropic.build(turns, model="claude")
    return caught.value


def test_first_turn_must_be_from_the_user(anthropic: AnthropicMessagesSerializer) -> None:
    """An assistant turn first (after system) is refused, naming that turn's ref; no message is invented."""
    error = build_error(anthropic, [Turn("s", "system", "x"), Turn("m7", "assistant", "Sure.")])
    assert (error.rule, error.index, error.refs) == ("first_not_user", 1, ("m7",))
    assert "m7" in str(error)
    assert build_error(anthropic, [Turn("s", "system", "x")]).rule == "no_messages"


def test_reused_and_unsafe_call_ids_get_valid_unique_tool_use_ids(
    anthropic: AnthropicMessagesSerializer,
) -> None:
    """A call id reused by a later turn gets a suffix, other characters become ``_``; results follow suit."""
    turns = [
        Turn("u", "user", "go"),
        Turn("a1", "assistant", None, tool_calls=(CallView("call_0", "f", "{}"),)),
        Turn("t1", "tool", "1", tool_call_id="call_0"),
        Turn(
            "a2", "assistant", None, tool_calls=(CallView("call_0", "f", "{}"), CallView("fn.f:1", "f", "{}"))
        ),
        Turn("t2", "tool", "2", tool_call_id="call_0"),
        Turn("t3", "tool", "3", tool_call_id="fn.f:1"),
    ]
    messages = anthropic.build(turns, model="claude")["messages"]
    uses = [b["id"] for m in messages for b in m["content"] if b["type"] == "tool_use"]
    results = [b["tool_use_id"] for m in messages for b in m["content"] if b["type"] == "tool_result"]
    assert uses == results == ["call_0", "call_0_2", "fn_f_1"]


@pytest.mark.parametrize(
    ("turn", "rule"),
    [
        (Turn("t", "user", "   "), "empty_turn"),
        (Turn("t", "user", ({"type": "text", "text": ""},)), "empty_turn"),
        (Turn("t", "user", ({"type": "image_url", "image_url": "data:image/bmp;base64,Qk0="},)), "unsupported_image_type"),  # noqa: E501
        (Turn("t", "user", ({"type": "image_url", "image_url": "data:image/png,raw"},)), "bad_image"),
    ],
)  # fmt: skip
def test_build_rejects_unsendable_user_content(
    anthropic: AnthropicMessagesSerializer, turn: Turn, rule: str
) -> None:
    """Blank content and images the API cannot take are refused with the rule and the turn's ref."""
    error = build_error(anthropic, [turn])
    assert (error.rule, error.refs) == (rule, ("t",))


def test_images_only_where_anthropic_allows_them(anthropic: AnthropicMessagesSerializer) -> None:
    """Images in system or assistant content are refused."""
    image = ({"type": "image_url", "image_url": {"url": REMOTE}},)
    assert (
        build_error(anthropic, [Turn("t", "system", image), Turn("u", "user", "x")]).rule
        == "part_not_allowed"
    )
    assert (
        build_error(anthropic, [Turn("u", "user", "x"), Turn("t", "assistant", image)]).rule
        == "part_not_allowed"
    )


def test_pairing_errors_are_shared_with_openai(anthropic: AnthropicMessagesSerializer) -> None:
    """An orphan result and an unanswered call are refused before any merging could hide them."""
    orphan = [Turn("u", "user", "hi"), Turn("t", "tool", "{}", tool_call_id="c")]
    assert build_error(anthropic, orphan).rule == "tool_result_without_call"
    unanswered = [
        Turn("u", "user", "hi"),
        Turn("a", "assistant", None, tool_calls=(CallView("c", "f", "{}"),)),
    ]
    assert build_error(anthropic, unanswered).rule == "tool_call_unanswered"


def valid_payload() -> dict[str, Any]:
    """A small valid payload: user, assistant with a call, the result followed by user text."""
    png = "data:image/png;base64," + base64.b64encode(b"\x89PNG\r\n\x1a\n").decode()
    turns = [
        Turn("u", "user", ({"type": "text", "text": "look"}, {"type": "image_url", "image_url": png})),
        Turn("a", "assistant", "ok", tool_calls=(CallView("c1", "f", "{}"),)),
        Turn("t", "tool", "done", tool_call_id="c1"),
        Turn("u2", "user", "thanks"),
        Turn("a2", "assistant", "welcome"),
    ]
    return AnthropicMessagesSerializer().build(turns, model="claude")


def broken(rule: str) -> tuple[dict[str, Any], int | None]:
    """A copy of :func:`valid_payload` broken in one way, and the message index the error must name."""
    payload = valid_payload()
    messages = payload["messages"]
    if rule == "system_in_messages":
        messages.insert(0, {"role": "system", "content": "x"})
        return payload, 0
    if rule == "first_not_user":
        del messages[0]
        return payload, 0
    if rule == "roles_not_alternating":
        messages.append({"role": "assistant", "content": "again"})
        return payload, 4
    if rule == "empty_content":
        messages[3]["content"] = [{"type": "text", "text": " "}]
        return payload, 3
    if rule == "unknown_key":
        messages[0]["id"] = "m1"
        return payload, 0
    if rule == "block_not_allowed":
        messages[0]["content"].append({"type": "tool_use", "id": "z", "name": "f", "input": {}})
        return payload, 0
    if rule == "tool_call_unanswered":
        del messages[2]["content"][0]
        return payload, 2
    if rule == "tool_result_without_call":
        messages[2]["content"][0]["tool_use_id"] = "c9"
        return payload, 2
    if rule == "tool_result_not_first":
        messages[2]["content"].reverse()
        return payload, 2
    if rule == "duplicate_tool_call_id":
        messages[3] = {
            "role": "assistant",
            "content": [{"type": "tool_use", "id": "c1", "name": "f", "input": {}}],
        }
        messages.append({"role": "user", "content": [{"type": "tool_result", "tool_use_id": "c1"}]})
        return payload, 3
    if rule == "bad_system":
        payload["system"] = [{"type": "text", "text": ""}]
        return payload, None
    raise AssertionError(rule)


@pytest.mark.parametrize(
    "rule",
    [
        "system_in_messages",
        "first_not_user",
        "roles_not_alternating",
        "empty_content",
        "unknown_key",
        "block_not_allowed",
        "tool_call_unanswered",
        "tool_result_without_call",
        "tool_result_not_first",
        "duplicate_tool_call_id",
        "bad_system",
    ],
)
def test_validate_rejects_each_broken_rule(anthropic: AnthropicMessagesSerializer, rule: str) -> None:
    """Each broken rule raises ProviderContractError naming that rule and the offending message index."""
    anthropic.validate(valid_payload())
    payload, index = broken(rule)
    with pytest.raises(ProviderContractError) as caught:
        anthropic.validate(payload)
    assert (caught.value.rule, caught.value.index) == (rule, index)


def test_a_relayed_turn_is_labelled_and_never_merged_into_the_assistant_message(anthropic) -> None:
    """Alice's turn relayed to Bob is a labelled user block; Bob's own assistant message holds only Bob's text."""
    turns = [
        Turn("u", "user", "Your view?"),
        Turn("b1", "assistant", "Spaces.", name="bob"),
        Turn("a", "user", "Tabs.", name="alice", relayed=True),
        Turn("b2", "assistant", "Still spaces.", name="bob"),
    ]
    payload = anthropic.build(turns, model="claude-sonnet-4-5", max_tokens=100)
    sdk_valid_anthropic(payload)
    assert [(m["role"], [b["text"] for b in m["content"]]) for m in payload["messages"]] == [
        ("user", ["Your view?"]),
        ("assistant", ["bob: Spaces."]),
        ("user", ["alice: Tabs."]),
        ("assistant", ["bob: Still spaces."]),
    ]
