"""Both serializers on real agent logs (tau-bench gpt-4o airline) and on the failure cases' messages."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from serialize_helpers import (
    STORE_ONLY_KEYS,
    load_json,
    sdk_valid_anthropic,
    sdk_valid_openai,
    sdk_valid_responses,
    structural_keys,
    turns_from_openai,
)

from ctxledger.errors import ProviderContractError
from ctxledger.serialize import SERIALIZER_NAMES, get_serializer
from ctxledger.tokens import TokenCounter


@pytest.fixture(scope="module")
def tau_trajectories(data_dir: Path) -> list[dict[str, Any]]:
    """The 160 tau-bench gpt-4o airline trajectories (real OpenAI tool-call logs)."""
    return load_json(data_dir / "tau-bench" / "gpt-4o-airline_tasks0-39.json")


def test_tau_bench_logs_serialize_for_both_providers(
    tau_trajectories: list[dict[str, Any]], counter: TokenCounter
) -> None:
    """Every real trajectory builds, validates and passes the SDK types in both formats, counts additive."""
    openai, anthropic = get_serializer("openai-chat"), get_serializer("anthropic-messages")
    for record in tau_trajectories:
        turns = turns_from_openai(record["traj"])
        chat = openai.build(turns, model="gpt-4o")
        sdk_valid_openai(chat)
        assert len(chat["messages"]) == len(turns)
        parts = [openai.turn_tokens(t, counter) for t in turns]
        assert openai.count(chat, counter) == openai.base_tokens(counter) + sum(parts)
        messages = anthropic.build(turns, model="claude-sonnet-4-5")
        sdk_valid_anthropic(messages)
        assert messages["system"] == record["traj"][0]["content"]
        assert {t["name"] for t in messages.get("tools", ())} == {c.name for t in turns for c in t.tool_calls}
        tools = anthropic.tools_tokens(anthropic.request_tools(turns, ()), counter)
        limit = anthropic.base_tokens(counter) + tools + sum(anthropic.turn_tokens(t, counter) for t in turns)
        assert anthropic.count(messages, counter) <= limit


def test_tau_bench_logs_serialize_for_responses_with_unique_call_ids(
    tau_trajectories: list[dict[str, Any]], counter: TokenCounter
) -> None:
    """Real logs reuse call ids; every format sends them renamed alike, and the Chat validator flags a reuse."""
    chat, responses = get_serializer("openai-chat"), get_serializer("openai-responses")
    reused = 0
    for record in tau_trajectories:
        turns = turns_from_openai(record["traj"])
        recorded = [c.call_id for t in turns for c in t.tool_calls]
        payload = responses.build(turns, model="gpt-5")
        sdk_valid_responses(payload)
        assert payload["instructions"] == record["traj"][0]["content"]
        sent = [i["call_id"] for i in payload["input"] if i["type"] == "function_call"]
        assert len(sent) == len(set(sent)) == len(recorded)
        limit = responses.base_tokens(counter) + sum(responses.turn_tokens(t, counter) for t in turns)
        assert responses.count(payload, counter) == limit
        chat_payload = chat.build(turns, model="gpt-4o")
        assert [c["id"] for m in chat_payload["messages"] for c in m.get("tool_calls") or ()] == sent
        if len(set(recorded)) < len(recorded):
            reused += 1
            kept = {**chat_payload, "messages": [_recorded_ids(m) for m in record["traj"]]}
            with pytest.raises(ProviderContractError) as caught:
                chat.validate(kept)
            assert caught.value.rule == "duplicate_tool_call_id"
    assert reused >= 40  # 47 of the 160 trajectories reuse a call id


def _recorded_ids(message: dict[str, Any]) -> dict[str, Any]:
    """A trajectory message reduced to the keys Chat Completions defines (its recorded call ids kept)."""
    keys = ("role", "content", "tool_call_id") + (("tool_calls",) if message["role"] != "tool" else ())
    return {k: message[k] for k in keys if k in message}


def test_tau_bench_error_results_are_flagged_for_anthropic(tau_trajectories: list[dict[str, Any]]) -> None:
    """Tool results that report an error reach Anthropic with ``is_error`` and their text unchanged."""
    anthropic = get_serializer("anthropic-messages")
    record = next(
        r for r in tau_trajectories if any(str(m.get("content")).startswith("Error") for m in r["traj"])
    )
    payload = anthropic.build(turns_from_openai(record["traj"]), model="claude")
    results = [b for m in payload["messages"] for b in m["content"] if b["type"] == "tool_result"]
    errors = [
        m["content"] for m in record["traj"] if m["role"] == "tool" and m["content"].startswith("Error")
    ]
    assert [b["content"] for b in results if b.get("is_error")] == errors


@pytest.mark.parametrize("case", ["B01", "B02", "B04", "B08", "B09", "B10", "B13", "B15"])
@pytest.mark.parametrize("name", SERIALIZER_NAMES)
def test_case_messages_never_leak_store_fields(cases_dir: Path, case: str, name: str) -> None:
    """The cases' messages carry id/tokens/tags; none reaches a payload, and the text is kept verbatim."""
    messages = load_json(cases_dir / f"{case}.json")["messages"]
    assert any(STORE_ONLY_KEYS & set(m) for m in messages)
    serializer = get_serializer(name)
    payload = serializer.build(turns_from_openai(messages), model="m", tools=[])
    assert not structural_keys(payload) & STORE_ONLY_KEYS
    sent = set(payload_strings(payload))
    instructions = str(payload.get("instructions", "")).split("\n\n")  # Responses joins system texts
    texts = [m["content"] for m in messages if isinstance(m.get("content"), str) and m["content"].strip()]
    assert all(text in sent or text in instructions for text in texts)


def payload_strings(value: Any) -> list[str]:
    """Every string value in a payload (message texts, result contents, system blocks …)."""
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [s for v in value.values() for s in payload_strings(v)]
    if isinstance(value, list):
        return [s for v in value for s in payload_strings(v)]
    return []


def test_b01_orphan_result_is_refused_naming_it(cases_dir: Path) -> None:
    """Case B01: dropping the calling assistant turn but keeping its result is refused, naming m4."""
    messages = [m for m in load_json(cases_dir / "B01.json")["messages"] if m["id"] != "m3"]
    for name in SERIALIZER_NAMES:
        with pytest.raises(ProviderContractError) as caught:
            get_serializer(name).build(turns_from_openai(messages), model="m")
        assert caught.value.refs == ("m4",)


def test_b04_history_starting_with_assistant_is_refused_by_anthropic(cases_dir: Path) -> None:
    """Case B04 trimmed to start at an assistant: Anthropic refuses it naming that turn, inventing nothing."""
    messages = load_json(cases_dir / "B04.json")["messages"]
    trimmed = [messages[0], *messages[6:]]  # system, then m7 (assistant) …
    with pytest.raises(ProviderContractError) as caught:
        get_serializer("anthropic-messages").build(turns_from_openai(trimmed), model="claude")
    assert (caught.value.rule, caught.value.refs) == ("first_not_user", ("m7",))
    get_serializer("openai-chat").build(turns_from_openai(trimmed), model="gpt-4o")  # OpenAI allows it
