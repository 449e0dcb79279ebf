"""Hypothesis properties of both serializers on random valid turn sequences (format rules, counts)."""

from __future__ import annotations

import itertools
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from serialize_helpers import (
    STORE_ONLY_KEYS,
    data_url,
    image_bytes,
    load_json,
    sdk_valid_anthropic,
    sdk_valid_openai,
    sdk_valid_responses,
    structural_keys,
)

from ctxledger.errors import ProviderContractError
from ctxledger.serialize import (
    AnthropicMessagesSerializer,
    CallView,
    OpenAIChatSerializer,
    OpenAIResponsesSerializer,
    Turn,
)
from ctxledger.serialize.anthropic_messages import MESSAGE_TOKENS
from ctxledger.serialize.call_ids import unique_call_ids
from ctxledger.tokens import TokenCounter

OPENAI = OpenAIChatSerializer()
ANTHROPIC = AnthropicMessagesSerializer()
RESPONSES = OpenAIResponsesSerializer()
SETTINGS = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])

IMAGES = [
    data_url(image_bytes(w, h, "PNG"), "image/png")
    for w, h in ((1, 1), (300, 200), (1024, 1024), (3000, 500))
]
IMAGES.append("https://example.com/photo.jpg")

TEXT = st.text(st.characters(codec="utf-8"), min_size=1, max_size=30).filter(str.strip)
NAMES = st.none() | st.from_regex(r"[A-Za-z0-9_-]{1,10}", fullmatch=True)
ARGUMENTS = st.one_of(
    st.dictionaries(st.text(max_size=6), st.integers() | st.text(max_size=8) | st.booleans(), max_size=3).map(
        json.dumps
    ),
    st.text(max_size=12),
)
TEXT_PART = TEXT.map(lambda text: {"type": "text", "text": text})
IMAGE_PART = st.builds(
    lambda url, detail: {
        "type": "image_url",
        "image_url": {"url": url} | ({"detail": detail} if detail else {}),
    },
    st.sampled_from(IMAGES),
    st.sampled_from([None, "low", "high", "auto"]),
)
USER_CONTENT = TEXT | st.lists(TEXT_PART | IMAGE_PART, min_size=1, max_size=3).map(tuple)


@st.composite
def turn_sequences(draw: st.DrawFn) -> list[Turn]:
    """System/developer turns, a first user turn, then users, assistants, tool units and late system turns."""
    refs = (f"t{i}" for i in itertools.count())
    calls = (f"call_{i}" for i in itertools.count())
    turns = [
        Turn(next(refs), draw(st.sampled_from(["system", "developer"])), draw(TEXT), name=draw(NAMES))
        for _ in range(draw(st.integers(0, 2)))
    ]
    turns.append(Turn(next(refs), "user", draw(USER_CONTENT), name=draw(NAMES)))
    for _ in range(draw(st.integers(0, 6))):
        kind = draw(st.sampled_from(["user", "assistant", "tools", "tools", "system"]))
        if kind == "user":
            turns.append(Turn(next(refs), "user", draw(USER_CONTENT), name=draw(NAMES)))
        elif kind == "assistant":
            turns.append(Turn(next(refs), "assistant", draw(TEXT), name=draw(NAMES)))
        elif kind == "system":
            turns.append(Turn(next(refs), "developer", draw(TEXT)))
        else:
            turns.extend(draw(tool_unit(refs, calls)))
    return turns


REASONING = st.builds(
    lambda n, summary, data: {
        "type": "reasoning",
        "id": f"rs_{n}",
        "summary": [{"type": "summary_text", "text": t} for t in summary],
        "encrypted_content": data,
    },
    st.integers(0, 99),
    st.lists(TEXT, max_size=2),
    st.from_regex(r"[A-Za-z0-9+/]{4,40}", fullmatch=True),
)


@st.composite
def tool_unit(draw: st.DrawFn, refs: Iterator[str], calls: Iterator[str]) -> list[Turn]:
    """An assistant turn with 1-3 calls (ids sometimes reused from earlier turns) and its results in any
    order, some of them errors or empty, some calls carrying Responses reasoning items."""
    views = tuple(
        CallView(next(calls), draw(st.sampled_from(["search", "lookup", "send_email"])), draw(ARGUMENTS))
        for _ in range(draw(st.integers(1, 3)))
    )
    if draw(st.booleans()):  # real logs reuse a call id of an earlier turn
        views = (CallView("call_0", views[0].name, views[0].arguments), *views[1:])
    reasoning = tuple((draw(st.none() | st.integers(0, 3)), r) for r in draw(st.lists(REASONING, max_size=2)))
    unit = [Turn(next(refs), "assistant", draw(st.none() | TEXT), tool_calls=views, thinking=reasoning)]
    for view in draw(st.permutations(views)):
        content = draw(st.just("") | TEXT)
        unit.append(
            Turn(next(refs), "tool", content, tool_call_id=view.call_id, is_error=draw(st.booleans()))
        )
    return unit


@pytest.fixture(scope="module")
def real_tools(data_dir: Path, cases_dir: Path) -> list[dict[str, Any]]:
    """Real tool definitions: case B06's and the function schemas of a ToolBench trajectory."""
    tools = load_json(cases_dir / "B06.json")["tools"]
    answer = load_json(sorted((data_dir / "toolbench-examples" / "answer").rglob("*.json"))[0])
    return tools + [{"type": "function", "function": f} for f in answer["answer_generation"]["function"]]


def draw_tools(data: st.DataObject, real_tools: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """A random subset of the real tool definitions (possibly none)."""
    return data.draw(
        st.lists(st.sampled_from(real_tools), max_size=3, unique_by=lambda t: t["function"]["name"])
    )


@SETTINGS
@given(turns=turn_sequences(), data=st.data())
def test_openai_payload_obeys_the_rules(
    turns: list[Turn], data: st.DataObject, counter: TokenCounter, real_tools: list[dict[str, Any]]
) -> None:
    """One message per turn, results right after their calls, SDK-valid, and the count is exactly additive."""
    tools = draw_tools(data, real_tools)
    payload = OPENAI.build(turns, model="gpt-4o", tools=tools)
    OPENAI.validate(payload)
    sdk_valid_openai(payload)
    messages = payload["messages"]
    assert [m["role"] for m in messages] == [t.role for t in turns]
    for index, message in enumerate(messages):
        ids = [c["id"] for c in message.get("tool_calls") or ()]
        following = messages[index + 1 : index + 1 + len(ids)]
        assert sorted(m.get("tool_call_id") for m in following) == sorted(ids)
    parts = OPENAI.base_tokens(counter) + OPENAI.tools_tokens(tools, counter)
    assert OPENAI.count(payload, counter) == parts + sum(OPENAI.turn_tokens(t, counter) for t in turns)
    assert not structural_keys(payload) & STORE_ONLY_KEYS


@SETTINGS
@given(turns=turn_sequences(), data=st.data())
def test_anthropic_payload_obeys_the_rules(
    turns: list[Turn], data: st.DataObject, counter: TokenCounter, real_tools: list[dict[str, Any]]
) -> None:
    """User first, roles alternate, results lead the next message, content order kept, SDK-valid."""
    tools = draw_tools(data, real_tools)
    payload = ANTHROPIC.build(turns, model="claude-sonnet-4-5", tools=tools)
    ANTHROPIC.validate(payload)
    sdk_valid_anthropic(payload)
    messages = payload["messages"]
    roles = [m["role"] for m in messages]
    assert roles[0] == "user"
    assert all(a != b for a, b in itertools.pairwise(roles))
    for index, message in enumerate(messages):
        ids = [b["id"] for b in message["content"] if b["type"] == "tool_use"]
        if ids:
            leading = messages[index + 1]["content"][: len(ids)]
            assert [b["type"] for b in leading] == ["tool_result"] * len(ids)
            assert sorted(b["tool_use_id"] for b in leading) == sorted(ids)
    flat = [
        (b["type"], b.get("text") or b.get("id") or b.get("tool_use_id"))
        for m in messages
        for b in m["content"]
    ]
    assert flat == [
        block for t in unique_call_ids(turns) if t.role not in ("system", "developer") for block in expected_blocks(t)
    ]
    assert not structural_keys(payload) & STORE_ONLY_KEYS


def expected_blocks(turn: Turn) -> list[tuple[str, str | None]]:
    """The (type, text or id) blocks a turn must render to, per the documented Anthropic mapping."""
    if turn.role == "tool":
        return [("tool_result", turn.tool_call_id)]
    parts = (
        [{"type": "text", "text": turn.content}]
        if isinstance(turn.content, str)
        else list(turn.content or ())
    )
    blocks: list[tuple[str, str | None]] = [
        ("text", p["text"]) if p["type"] == "text" else ("image", None)
        for p in parts
        if p.get("text", "x").strip()
    ]
    if turn.name and blocks and blocks[0][0] == "text":
        blocks[0] = ("text", f"{turn.name}: {blocks[0][1]}")
    elif turn.name:
        blocks.insert(0, ("text", f"{turn.name}:"))
    return blocks + [("tool_use", c.call_id) for c in turn.tool_calls]


@SETTINGS
@given(turns=turn_sequences(), data=st.data())
def test_anthropic_merging_only_removes_framing(
    turns: list[Turn], data: st.DataObject, counter: TokenCounter, real_tools: list[dict[str, Any]]
) -> None:
    """count == base + tools + sum(turn_tokens) minus exactly the framing of the turns merged away; the tools are
    the ones given plus a minimal definition of each tool called without one."""
    tools = draw_tools(data, real_tools)
    payload = ANTHROPIC.build(turns, model="claude", tools=tools)
    total = ANTHROPIC.base_tokens(counter) + ANTHROPIC.tools_tokens(ANTHROPIC.request_tools(turns, tools), counter)
    total += sum(ANTHROPIC.turn_tokens(t, counter) for t in turns)

    def framing(role: str) -> int:
        return MESSAGE_TOKENS + counter.count(role)

    roles = [
        "system" if t.role in ("system", "developer") else "assistant" if t.role == "assistant" else "user"
        for t in turns
    ]
    kept = [m["role"] for m in payload["messages"]] + (["system"] if "system" in payload else [])
    removed = sum(framing(r) for r in roles) - sum(framing(r) for r in kept)
    assert ANTHROPIC.count(payload, counter) == total - removed <= total
    assert ANTHROPIC.merged_framing(turns, counter) == removed


@SETTINGS
@given(turns=turn_sequences().filter(lambda ts: any(t.role == "tool" for t in ts)), data=st.data())
def test_a_moved_tool_result_is_refused_by_all(turns: list[Turn], data: st.DataObject) -> None:
    """Moving any tool result after a later user turn breaks pairing, and every serializer refuses it."""
    tools_at = [i for i, t in enumerate(turns) if t.role == "tool"]
    moved = turns.pop(data.draw(st.sampled_from(tools_at)))
    turns += [Turn("late", "user", "and then?"), moved]
    for serializer in (OPENAI, ANTHROPIC, RESPONSES):
        with pytest.raises(ProviderContractError) as caught:
            serializer.build(turns, model="m")
        assert caught.value.rule in ("tool_call_unanswered", "tool_result_without_call")
        assert caught.value.refs


@SETTINGS
@given(turns=turn_sequences(), data=st.data())
def test_responses_payload_obeys_the_rules(
    turns: list[Turn], data: st.DataObject, counter: TokenCounter, real_tools: list[dict[str, Any]]
) -> None:
    """Instructions on top, calls answered before any other item, reasoning pinned before its turn's output,
    unique call ids, client-side state, SDK-valid, and the count never exceeds the sum of its parts."""
    tools = draw_tools(data, real_tools)
    payload = RESPONSES.build(turns, model="gpt-5", tools=tools)
    RESPONSES.validate(payload)
    sdk_valid_responses(payload)
    assert (payload["store"], payload["truncation"]) == (False, "disabled")
    items = payload["input"]
    instructions = [t for t in turns if t.role in ("system", "developer")]
    assert ("instructions" in payload) == bool(instructions)
    calls = [i["call_id"] for i in items if i["type"] == "function_call"]
    assert len(calls) == len(set(calls)) == sum(len(t.tool_calls) for t in turns)
    for index, item in enumerate(items):
        if item["type"] == "function_call_output":
            before = [i for i in items[:index] if i["type"] not in ("function_call", "function_call_output")]
            assert item["call_id"] in [i["call_id"] for i in items[: index] if i["type"] == "function_call"]
            assert before  # a result never leads
    sent = [i for i in items if i["type"] == "reasoning"]
    expected = [b for t in turns for _, b in t.thinking]  # every reasoning item, unmodified
    assert sorted(map(json.dumps, sent)) == sorted(map(json.dumps, expected))
    parts = RESPONSES.base_tokens(counter) + RESPONSES.tools_tokens(tools, counter)
    total = parts + sum(RESPONSES.turn_tokens(t, counter) for t in turns)
    assert RESPONSES.count(payload, counter) <= total
    if len(instructions) <= 1:
        assert RESPONSES.count(payload, counter) == total
    assert not structural_keys(payload) & STORE_ONLY_KEYS


@SETTINGS
@given(turns=turn_sequences())
def test_every_serializer_renames_reused_call_ids_the_same_way(turns: list[Turn]) -> None:
    """The ids sent are unique per request and identical across the three formats, results paired."""
    chat = OPENAI.build(turns, model="m")
    chat_ids = [c["id"] for m in chat["messages"] for c in m.get("tool_calls") or ()]
    chat_results = [m["tool_call_id"] for m in chat["messages"] if m["role"] == "tool"]
    items = RESPONSES.build(turns, model="m")["input"]
    response_ids = [i["call_id"] for i in items if i["type"] == "function_call"]
    response_results = [i["call_id"] for i in items if i["type"] == "function_call_output"]
    blocks = [b for m in ANTHROPIC.build(turns, model="m")["messages"] for b in m["content"]]
    anthropic_ids = [b["id"] for b in blocks if b["type"] == "tool_use"]
    anthropic_results = [b["tool_use_id"] for b in blocks if b["type"] == "tool_result"]
    assert chat_ids == response_ids == anthropic_ids
    assert len(set(chat_ids)) == len(chat_ids)
    assert chat_results == response_results and sorted(chat_results) == sorted(anthropic_results)


def test_sdk_conformance_check_has_teeth() -> None:
    """The SDK check used above rejects a store-only key on a part and on a block."""
    openai_payload = {"messages": [{"role": "user", "content": [{"type": "text", "text": "x", "tokens": 1}]}]}
    with pytest.raises(ValueError):
        sdk_valid_openai(openai_payload)
    anthropic_payload = {
        "messages": [{"role": "user", "content": [{"type": "text", "text": "x", "meta": {}}]}]
    }
    with pytest.raises(AssertionError):
        sdk_valid_anthropic(anthropic_payload)
