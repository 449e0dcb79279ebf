"""Anthropic extended thinking: reasoning blocks imported with a transcript are sent back as received.

The transcript follows the shape of Anthropic's extended-thinking tool-use walkthrough: a ``thinking`` block
(with its signature) ahead of the ``tool_use`` it led to, a ``redacted_thinking`` block, a block after text
(interleaved thinking), and a tool loop that is being continued (the last message is a ``tool_result``).
"""

from __future__ import annotations

import copy
import json
from typing import Any

from ctxledger import Ledger
from ctxledger.serialize.anthropic_messages import AnthropicMessagesSerializer, with_thinking
from ctxledger.serialize.base import CallView, Turn
from ctxledger.tokens import get_counter

SIG_1 = "EqQBCgIYAhIMn3bYv1uJ6tQfCkQ2GgzKm3ReasoningSignatureOne0AQ=="
SIG_2 = "EuYBCkQYAhIMxZr9Lw7pH2sQbN1vGgz8Tq4SignatureForTheSecondTurnAQ=="
REDACTED = "EmwKAhgBEgy3va3pzix/LafPsn4aDFIT2Xlxh0L5L8rLVyIwxtE3rAFBa8cr3qpPkNRj2YfWXGmKDxH4mPnZ5sQ7vB+URm"
THOUGHT_1 = "The user wants the weather in Paris. I should call get_weather with city=Paris before answering."
THOUGHT_2 = "Tomorrow's forecast needs the same tool with day=tomorrow; the first call returned today's weather."
THOUGHT_3 = "The answer is short; I will mention the temperature."
TOOLS = [
    {
        "name": "get_weather",
        "description": "Weather for a city, today or tomorrow.",
        "input_schema": {
            "type": "object",
            "properties": {"city": {"type": "string"}, "day": {"type": "string", "enum": ["today", "tomorrow"]}},
            "required": ["city"],
        },
    }
]


def _messages() -> list[dict[str, Any]]:
    return [
        {"role": "user", "content": "What's the weather in Paris?"},
        {
            "role": "assistant",
            "content": [
                {"type": "thinking", "thinking": THOUGHT_1, "signature": SIG_1},
                {"type": "tool_use", "id": "toolu_01A", "name": "get_weather", "input": {"city": "Paris"}},
            ],
        },
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_01A", "content": "18 C, sunny"}]},
        {
            "role": "assistant",
            "content": [
                {"type": "redacted_thinking", "data": REDACTED},
                {"type": "text", "text": "It is 18 C and sunny in Paris."},
                {"type": "thinking", "thinking": THOUGHT_3, "signature": SIG_1[::-1]},
            ],
        },
        {"role": "user", "content": "And tomorrow?"},
        {
            "role": "assistant",
            "content": [
                {"type": "thinking", "thinking": THOUGHT_2, "signature": SIG_2},
                {"type": "text", "text": "Let me check tomorrow's forecast."},
                {
                    "type": "tool_use",
                    "id": "toolu_01B",
                    "name": "get_weather",
                    "input": {"city": "Paris", "day": "tomorrow"},
                },
            ],
        },
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_01B", "content": "20 C, cloudy"}]},
    ]


def _ledger(messages: list[dict[str, Any]] | None = None) -> Ledger:
    ledger = Ledger.open("memory://")
    ledger.import_messages(
        messages or _messages(),
        api="anthropic-messages",
        system="You are a weather assistant.",
        tools=TOOLS,
        conversation_id="wx",
    )
    return ledger


def _assemble(ledger: Ledger, api: str = "anthropic-messages", window: int = 8000) -> Any:
    model = "claude-sonnet-4-5" if api == "anthropic-messages" else "gpt-4o"
    return ledger.assemble("wx", api=api, model=model, window_tokens=window, output_tokens=500)


def _assistant_contents(payload: dict[str, Any]) -> list[list[dict[str, Any]]]:
    return [m["content"] for m in payload["messages"] if m["role"] == "assistant"]


def test_thinking_blocks_go_back_unmodified_in_their_original_positions():
    """Every assistant message is echoed with its reasoning blocks where they were, signatures intact."""
    asm = _assemble(_ledger())
    sent = _assistant_contents(asm.payload)
    original = [m["content"] for m in _messages() if m["role"] == "assistant"]
    assert len(sent) == 3
    # the tool loop being continued: thinking, text, tool_use, exactly as received
    assert sent[2] == original[2]
    assert sent[0] == original[0]
    # redacted thinking first, the interleaved block after the text, as in the transcript
    assert [b["type"] for b in sent[1]] == ["redacted_thinking", "text", "thinking"]
    assert sent[1][0] == {"type": "redacted_thinking", "data": REDACTED} and sent[1][2]["signature"] == SIG_1[::-1]
    assert not any(i.get("transform", "") and "thinking" in i["transform"] for i in asm.manifest["included"])


def test_thinking_tokens_are_counted():
    """The payload count includes the reasoning text: the same history without thinking costs less."""
    with_blocks = _assemble(_ledger())
    bare = [
        {**m, "content": [b for b in m["content"] if "thinking" not in b["type"]]}
        if isinstance(m["content"], list)
        else m
        for m in _messages()
    ]
    without = _assemble(_ledger(bare))
    counter = get_counter("claude-sonnet-4-5")
    floor = sum(counter.count(t) for t in (THOUGHT_1, THOUGHT_2, THOUGHT_3, REDACTED))
    assert with_blocks.input_tokens - without.input_tokens >= floor
    serializer = AnthropicMessagesSerializer()
    call = CallView("toolu_01A", "get_weather", '{"city": "Paris"}')
    turn = Turn(
        "a", "assistant", None, tool_calls=(call,), thinking=((0, {"type": "thinking", "thinking": THOUGHT_1}),)
    )
    plain = Turn("a", "assistant", None, tool_calls=(call,))
    assert serializer.turn_tokens(turn, counter) - serializer.turn_tokens(plain, counter) >= counter.count(THOUGHT_1)


def test_the_ladder_excerpts_the_output_never_the_thinking():
    """A large result in the continued loop is excerpted; the reasoning ahead of its call is sent whole."""
    messages = _messages()
    log = "\n".join(f"{h:02d}:00 Paris forecast hour {h}: 20 C, cloudy, wind 12 km/h, humidity 71%" for h in range(24))
    messages[-1]["content"][0]["content"] = "\n".join([log] * 40)
    asm = _assemble(_ledger(messages), window=3000)
    reps = {i["ref"]: (i["representation"], i.get("transform")) for i in asm.manifest["included"]}
    assert reps["wx/10"][0] != "verbatim", reps  # the big tool result did not fit whole
    last = _assistant_contents(asm.payload)[-1]
    assert last[0] == {"type": "thinking", "thinking": THOUGHT_2, "signature": SIG_2}
    assert [b["type"] for b in last] == ["thinking", "text", "tool_use"]


def test_openai_payloads_drop_thinking_and_say_so():
    """OpenAI Chat has no place for Anthropic reasoning: it is left out and the manifest records it."""
    asm = _assemble(_ledger(), api="openai-chat")
    text = json.dumps(asm.payload)
    assert SIG_1 not in text and THOUGHT_2 not in text and REDACTED not in text
    dropped = sorted(i["ref"] for i in asm.manifest["included"] if i.get("transform") == "thinking_dropped")
    assert dropped == ["wx/3", "wx/6", "wx/8"]


def test_thinking_with_a_secret_is_withheld():
    """A signed block cannot be redacted, so reasoning holding a secret is not sent at all."""
    messages = copy.deepcopy(_messages())
    key = "ghp_1234567890abcdefghijklmnopqrstuvwxyzAB"
    messages[5]["content"][0]["thinking"] = f"I will authenticate with {key} first."
    asm = _assemble(_ledger(messages))
    assert key not in json.dumps(asm.payload)
    withheld = [i["ref"] for i in asm.manifest["included"] if "thinking_withheld" in (i.get("transform") or "")]
    assert withheld == ["wx/8"]
    assert [b["type"] for b in _assistant_contents(asm.payload)[-1]] == ["text", "tool_use"]


def test_with_thinking_places_blocks_by_position():
    """Known positions are restored (clamped to the end); unknown ones lead."""
    text, use = {"type": "text", "text": "hi"}, {"type": "tool_use", "id": "t", "name": "n", "input": {}}
    a, b, c = ({"type": "thinking", "thinking": x, "signature": x} for x in "abc")
    assert with_thinking([text, use], ((1, a),)) == [text, a, use]
    assert with_thinking([text, use], ((9, a), (None, b))) == [b, text, use, a]
    assert with_thinking([text], ((0, a), (1, c))) == [a, c, text]
