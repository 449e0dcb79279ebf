"""Tools called without a schema: Anthropic payloads define every tool they call, OpenAI payloads are unchanged.

Anthropic refuses a request with ``tool_use`` / ``tool_result`` blocks and no tools ("Requests which include
tool_use or tool_result blocks must define tools."); recorded histories often hold calls of tools whose schemas
were never recorded (tau-bench records none).
"""

from __future__ import annotations

import copy
import itertools
import json
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from serialize_helpers import sdk_valid_anthropic, sdk_valid_openai, sdk_valid_responses

from ctxledger.errors import ProviderContractError
from ctxledger.serialize import (
    AnthropicMessagesSerializer,
    CallView,
    OpenAIChatSerializer,
    OpenAIResponsesSerializer,
    Turn,
)
from ctxledger.serialize.anthropic_messages import REPLY_PRIMING
from ctxledger.serialize.tool_names import request_tool_names, tool_name_map
from ctxledger.serialize.undeclared_tools import (
    DESCRIPTIONS,
    SCHEMA_NOT_RECORDED,
    WITHHELD,
    minimal_definition,
    undeclared_tools,
)
from ctxledger.tokens import TokenCounter

ANTHROPIC = AnthropicMessagesSerializer()
SETTINGS = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])

TOOL_NAMES = ["search", "get_user_details", "logs.search", "mcp/files/read", "x" * 70, "send_email"]
"""Valid names, names the providers refuse (renamed when sent) and one over 64 characters."""


def schema(name: str) -> dict[str, Any]:
    """A recorded OpenAI function schema of ``name``."""
    return {
        "type": "function",
        "function": {
            "name": name,
            "description": f"Run {name}.",
            "parameters": {"type": "object", "properties": {"q": {"type": "string"}}, "required": ["q"]},
        },
    }


@st.composite
def histories(draw: st.DrawFn) -> tuple[list[Turn], list[dict[str, Any]]]:
    """User, assistant and tool turns calling tools of :data:`TOOL_NAMES`, and schemas for some of those tools
    (possibly none, possibly tools never called)."""
    refs = (f"t{i}" for i in itertools.count())
    ids = (f"call_{i}" for i in itertools.count())
    turns = [Turn(next(refs), "system", "Be brief.")] if draw(st.booleans()) else []
    turns.append(Turn(next(refs), "user", "Start."))
    for _ in range(draw(st.integers(0, 6))):
        kind = draw(st.sampled_from(["user", "assistant", "calls", "calls"]))
        if kind != "calls":
            turns.append(Turn(next(refs), kind, draw(st.sampled_from(["ok", "and then?", "done"]))))
            continue
        names = draw(st.lists(st.sampled_from(TOOL_NAMES), min_size=1, max_size=3))
        calls = tuple(CallView(next(ids), n, json.dumps({"q": n[:5]})) for n in names)
        turns.append(Turn(next(refs), "assistant", draw(st.none() | st.just("Let me look.")), tool_calls=calls))
        turns += [
            Turn(next(refs), "tool", draw(st.sampled_from(["", "42", "Error: no"])), tool_call_id=c.call_id)
            for c in calls
        ]
    recorded = draw(st.lists(st.sampled_from(TOOL_NAMES), unique=True, max_size=len(TOOL_NAMES)))
    return turns, [schema(n) for n in recorded]


def tool_use_names(payload: dict[str, Any]) -> list[str]:
    return [b["name"] for m in payload["messages"] if isinstance(m["content"], list) for b in m["content"]
            if b["type"] == "tool_use"]  # fmt: skip


@SETTINGS
@given(history=histories())
def test_every_called_tool_has_a_definition_and_the_count_is_exact(
    history: tuple[list[Turn], list[dict[str, Any]]], counter: TokenCounter
) -> None:
    """Every tool a tool_use block names is defined: by its schema when given, else by a minimal definition
    (name, ``{"type": "object"}``, the not-recorded description); the payload validates, passes the SDK's types,
    and its count includes exactly those definitions."""
    turns, tools = history
    payload = ANTHROPIC.build(turns, model="claude-sonnet-4-5", tools=tools)
    ANTHROPIC.validate(payload)
    sdk_valid_anthropic(payload)
    sent = {t["name"]: t for t in payload.get("tools", ())}
    assert set(tool_use_names(payload)) <= set(sent)
    called = {c.name for t in turns for c in t.tool_calls}
    recorded = {t["function"]["name"] for t in tools}
    wire = tool_name_map(request_tool_names(turns, tools))
    assert len(sent) == len(called | recorded)
    for name in called - recorded:
        assert sent[wire[name]] == {
            "name": wire[name],
            "description": DESCRIPTIONS[SCHEMA_NOT_RECORDED],
            "input_schema": {"type": "object"},
        }
    for name in recorded:
        assert sent[wire[name]]["input_schema"]["required"] == ["q"]  # the recorded schema, never a minimal one
    definitions = [*tools, *(minimal_definition(n) for n in sorted(called - recorded))]
    assert ANTHROPIC.request_tools(turns, tools) == definitions
    tools_part = ANTHROPIC.count({"messages": [], "tools": payload.get("tools", [])}, counter) - REPLY_PRIMING
    if all(wire[n] == n for n in called | recorded):  # renaming changes a name's tokens, nothing else
        assert tools_part == ANTHROPIC.tools_tokens(definitions, counter)
    assert tools_part == ANTHROPIC.tools_tokens([_renamed(d, wire) for d in definitions], counter)


def _renamed(definition: dict[str, Any], wire: dict[str, str]) -> dict[str, Any]:
    out = copy.deepcopy(definition)
    out["function"]["name"] = wire[out["function"]["name"]]
    return out


@SETTINGS
@given(history=histories())
def test_openai_payloads_get_no_definitions(history: tuple[list[Turn], list[dict[str, Any]]]) -> None:
    """OpenAI Chat and Responses accept calls of tools the request does not define: their tools stay the given ones."""
    turns, tools = history
    chat = OpenAIChatSerializer().build(turns, model="gpt-4o", tools=tools)
    sdk_valid_openai(chat)
    assert [t["function"]["name"] for t in chat.get("tools", ())] == [
        tool_name_map(request_tool_names(turns, tools))[t["function"]["name"]] for t in tools
    ]
    responses = OpenAIResponsesSerializer().build(turns, model="gpt-5", tools=tools)
    sdk_valid_responses(responses)
    assert len(responses.get("tools", ())) == len(tools)


def _payload(tools: list[dict[str, Any]] | None, name: str = "search") -> dict[str, Any]:
    payload: dict[str, Any] = {
        "model": "claude",
        "messages": [
            {"role": "user", "content": "go"},
            {"role": "assistant", "content": [{"type": "tool_use", "id": "c1", "name": name, "input": {}}]},
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "c1", "content": "ok"}]},
        ],
    }
    if tools is not None:
        payload["tools"] = tools
    return payload


@pytest.mark.parametrize(
    ("tools", "rule", "index"),
    [
        (None, "tools_undefined", 1),
        ([], "tools_undefined", 1),
        ([{"name": "lookup", "input_schema": {"type": "object"}}], "tool_undefined", 1),
    ],
)
def test_validator_refuses_tool_blocks_without_their_definitions(
    tools: list[dict[str, Any]] | None, rule: str, index: int
) -> None:
    """No tools at all (the API's own rule), or none of the name a tool_use calls: refused, naming the rule."""
    with pytest.raises(ProviderContractError) as caught:
        ANTHROPIC.validate(_payload(tools))
    assert caught.value.rule == rule
    assert caught.value.index == index
    assert f"rule {rule}" in str(caught.value)
    ANTHROPIC.validate(_payload([{"name": "search", "input_schema": {"type": "object"}}]))


def test_withheld_tools_are_described_as_withheld() -> None:
    """A tool the contract withheld gets a definition that says so; one never recorded, the not-recorded one."""
    turns = [
        Turn("u", "user", "go"),
        Turn("a", "assistant", None, tool_calls=(CallView("c1", "book", "{}"), CallView("c2", "peek", "{}"))),
        Turn("r1", "tool", "ok", tool_call_id="c1"),
        Turn("r2", "tool", "ok", tool_call_id="c2"),
    ]
    added, reasons = undeclared_tools(turns, [schema("search")], withheld={"book"})
    assert reasons == {"book": WITHHELD, "peek": SCHEMA_NOT_RECORDED}
    assert [d["function"]["description"] for d in added] == [DESCRIPTIONS[WITHHELD], DESCRIPTIONS[SCHEMA_NOT_RECORDED]]
    assert undeclared_tools(turns, [schema("book"), schema("peek")]) == ([], {})
