"""Real trajectory formats: tau-bench, mini-swe-agent, SWE-agent ``.traj`` and ToolBench."""

from __future__ import annotations

import itertools
import json
from pathlib import Path
from typing import Any

import pytest
from ingest_helpers import load, of_type, only

from ctxledger.ingest import ImportBatch, parse_file
from ctxledger.records import (
    Checkpoint,
    Message,
    ModelRun,
    Role,
    SkillState,
    ToolArtifact,
    ToolCall,
    ToolStatus,
)

# -- tau-bench --------------------------------------------------------------------------------------


def test_tau_bench_counts_match_the_raw_trajectories(tau_path: Path, tau_batch: ImportBatch) -> None:
    """Each trajectory keeps every message, tool call and tool result of the raw JSON."""
    raw = load(tau_path)
    assert len(tau_batch.conversations) == len(raw) == 160
    for item, conv in zip(raw, tau_batch.conversations, strict=True):
        traj = item["traj"]
        assert conv.conversation_id == f"gpt-4o-airline_tasks0-39-task{item['task_id']}-trial{item['trial']}"
        assert len(of_type(conv, Message)) == sum(m["role"] != "tool" for m in traj)
        assert len(of_type(conv, ToolCall)) == sum(len(m.get("tool_calls") or []) for m in traj)
        assert len(of_type(conv, ToolArtifact)) == sum(m["role"] == "tool" for m in traj)


def test_tau_bench_error_results_are_failed(tau_path: Path, tau_batch: ImportBatch) -> None:
    """Tool results reading 'Error: …' are failed artifacts; every other result succeeded."""
    raw = load(tau_path)
    errors = sum(
        m["content"].startswith("Error") for item in raw for m in item["traj"] if m["role"] == "tool"
    )
    statuses = [a.status for conv in tau_batch.conversations for a in of_type(conv, ToolArtifact)]
    assert errors > 0
    assert statuses.count(ToolStatus.FAILED) == errors
    assert statuses.count(ToolStatus.SUCCEEDED) == len(statuses) - errors


def test_tau_bench_reused_call_ids_pair_with_the_open_call(tau_batch: ImportBatch) -> None:
    """Task 0 reuses a call id after its first result; each result links to its own call."""
    conv = tau_batch.conversations[0]
    calls = {c.id: c for c in of_type(conv, ToolCall)}
    reused = [a for a in of_type(conv, ToolArtifact) if a.call_id == "call_HGn16KZh9oNCruxsMJ4gYXan"]
    assert [calls[a.tool_call_id].name for a in reused] == ["search_direct_flight", "search_onestop_flight"]
    assert reused[0].tool_call_id != reused[1].tool_call_id


def test_tau_bench_results_keep_exact_bytes_and_media_type(tau_path: Path, tau_batch: ImportBatch) -> None:
    """Artifact blobs are the UTF-8 content; JSON results are application/json, errors text/plain."""
    traj = load(tau_path)[0]["traj"]
    conv = tau_batch.conversations[0]
    results = [m["content"] for m in traj if m["role"] == "tool"]
    artifacts = of_type(conv, ToolArtifact)
    assert [conv.blobs[a.sha256][0] for a in artifacts] == [c.encode("utf-8") for c in results]
    assert all(a.size_bytes == len(c.encode("utf-8")) for a, c in zip(artifacts, results, strict=True))
    assert {a.media_type for a in artifacts} <= {"application/json", "text/plain; charset=utf-8"}
    assert conv.records[0].meta["task_id"] == 0 and "reward" in conv.records[0].meta


# -- mini-swe-agent ---------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def mini_swe(mini_swe_paths: list[Path]) -> list[tuple[dict[str, Any], ImportBatch]]:
    """Every mini-swe-agent trajectory, raw and parsed."""
    assert len(mini_swe_paths) == 19
    return [(load(path), parse_file(path)) for path in mini_swe_paths]


def test_mini_swe_counts_match_and_the_submit_call_stays_pending(
    mini_swe: list[tuple[dict[str, Any], ImportBatch]],
) -> None:
    """Calls and results match the raw messages; the one unanswered call is the final submit call."""
    for raw, batch in mini_swe:
        conv = only(batch)
        messages = raw["messages"]
        calls = of_type(conv, ToolCall)
        assert batch.format == "mini-swe-agent" and conv.conversation_id == raw["instance_id"]
        assert len(calls) == sum(len(m.get("tool_calls") or []) for m in messages)
        assert batch.artifacts == sum(m["role"] == "tool" for m in messages) == len(calls) - 1
        answered = {a.tool_call_id for a in of_type(conv, ToolArtifact)}
        pending = [c for c in calls if c.id not in answered]
        assert pending == [calls[-1]]
        assert "COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT" in pending[0].arguments


def test_mini_swe_model_runs_carry_provider_usage(mini_swe: list[tuple[dict[str, Any], ImportBatch]]) -> None:
    """Each assistant message is preceded by its ModelRun with the provider-reported prompt tokens."""
    for raw, batch in mini_swe:
        conv = only(batch)
        history = conv.records[4:]
        usages = [m["extra"]["response"]["usage"] for m in raw["messages"] if m["role"] == "assistant"]
        runs = of_type(conv, ModelRun)
        assert [(r.usage["prompt_tokens"], r.usage["completion_tokens"]) for r in runs] == [
            (u["prompt_tokens"], u["completion_tokens"]) for u in usages
        ]
        assert {(r.provider, r.model) for r in runs} == {("deepseek", "deepseek-chat")}
        for before, record in itertools.pairwise(history):
            if isinstance(record, Message) and record.role is Role.ASSISTANT:
                assert isinstance(before, ModelRun) and record.owner_model_run_id == before.id


def test_mini_swe_failed_commands_and_raw_output(mini_swe: list[tuple[dict[str, Any], ImportBatch]]) -> None:
    """Non-zero return codes make failed artifacts; the untruncated raw output is its own blob."""
    raw, batch = mini_swe[0]
    conv = only(batch)
    tools = [m for m in raw["messages"] if m["role"] == "tool"]
    artifacts = of_type(conv, ToolArtifact)
    assert [a.status is ToolStatus.FAILED for a in artifacts] == [
        m["extra"]["returncode"] != 0 for m in tools
    ]
    assert any(a.status is ToolStatus.FAILED for a in artifacts)
    for artifact, msg in zip(artifacts, tools, strict=True):
        assert conv.blobs[artifact.meta["raw_output_sha256"]][0] == msg["extra"]["raw_output"].encode("utf-8")
        assert "raw_output" not in artifact.meta and artifact.meta["returncode"] == msg["extra"]["returncode"]


def test_mini_swe_exit_becomes_a_checkpoint(mini_swe: list[tuple[dict[str, Any], ImportBatch]]) -> None:
    """The non-standard exit message becomes a Checkpoint with exit status and submission."""
    for raw, batch in mini_swe:
        (checkpoint,) = of_type(only(batch), Checkpoint)
        exit_msg = raw["messages"][-1]
        assert exit_msg["role"] == "exit"
        assert checkpoint.run_id == raw["instance_id"]
        assert checkpoint.state == {"exit_status": "Submitted", "submission": exit_msg["extra"]["submission"]}


def test_mini_swe_times_come_from_the_source(mini_swe: list[tuple[dict[str, Any], ImportBatch]]) -> None:
    """created_at is read from extra.timestamp, not the clock or the base time."""
    raw, batch = mini_swe[0]
    conv = only(batch)
    first_tool = next(m for m in raw["messages"] if m["role"] == "tool")
    artifact = of_type(conv, ToolArtifact)[0]
    assert artifact.created_at.timestamp() == pytest.approx(first_tool["extra"]["timestamp"])
    assert "response" not in of_type(conv, Message)[2].meta


# -- SWE-agent ----------------------------------------------------------------------------------------


def _text_actions(history: list[dict[str, Any]]) -> tuple[list[int], list[int]]:
    """Indexes of text-command actions (assistant ``action`` without ``tool_calls``) and of their outputs."""
    actions = [
        j for j, m in enumerate(history) if m["role"] == "assistant" and m.get("action") and not m.get("tool_calls")
    ]
    outputs = [j + 1 for j in actions if j + 1 < len(history) and history[j + 1]["role"] == "user"]
    return actions, outputs


def test_swe_agent_history_counts_match(swe_agent_paths: list[Path]) -> None:
    """Every .traj imports its history; text actions and function-calling variants both become tool calls."""
    assert len(swe_agent_paths) == 18
    text_variants = 0
    for path in swe_agent_paths:
        history = load(path)["history"]
        actions, outputs = _text_actions(history)
        batch = parse_file(path)
        assert batch.format == "swe-agent"
        assert batch.messages == sum(m["role"] != "tool" for m in history) - len(outputs)
        assert batch.tool_calls == sum(len(m.get("tool_calls") or []) for m in history) + len(actions)
        assert batch.artifacts == sum(len(m.get("tool_call_ids") or []) for m in history) + len(outputs)
        assert batch.tool_calls > 0
        text_variants += bool(actions)
    assert text_variants == 13


def test_swe_agent_text_actions_become_bash_calls_answered_by_the_next_user_message(
    swe_agent_paths: list[Path],
) -> None:
    """A text action is a ``bash`` call with the exact command; the output the model saw is its result."""
    for path in swe_agent_paths:
        history = load(path)["history"]
        actions, outputs = _text_actions(history)
        if not actions:
            continue
        conv = only(parse_file(path))
        calls = of_type(conv, ToolCall)
        assert [c.name for c in calls] == ["bash"] * len(actions)
        assert [json.loads(c.arguments) for c in calls] == [{"command": history[j]["action"]} for j in actions]
        assert all(c.meta["text_action"] and c.call_id == f"action_{j}" for c, j in zip(calls, actions, strict=True))
        artifacts = of_type(conv, ToolArtifact)
        assert [conv.blobs[a.sha256][0] for a in artifacts] == [history[j]["content"].encode("utf-8") for j in outputs]
        by_id = {c.id: c for c in calls}
        assert [by_id[a.tool_call_id].meta["source_index"] + 1 for a in artifacts] == outputs
        # the task, any demonstration and the system prompt stay messages; the last action has no output
        messages = of_type(conv, Message)
        assert [m.meta["source_index"] for m in messages] == [j for j in range(len(history)) if j not in outputs]
        answered = {a.tool_call_id for a in artifacts}
        pending = [json.loads(c.arguments)["command"] for c in calls if c.id not in answered]
        assert pending == ([history[-1]["action"]] if history[-1]["role"] == "assistant" else [])
        assert pending and pending[0].startswith("submit")


def test_swe_agent_step_fields_go_to_meta(data_dir: Path) -> None:
    """message_type, agent and action are meta; results link to their calls via tool_call_ids."""
    path = data_dir / "swe-agent-demos" / "trajectories" / "demonstrations" / "function_calling_simple.traj"
    history = load(path)["history"]
    conv = only(parse_file(path))
    messages = of_type(conv, Message)
    assert [m.meta["message_type"] for m in messages] == [
        m["message_type"] for m in history if m["role"] != "tool"
    ]
    assistant = [m for m in messages if m.role is Role.ASSISTANT]
    assert all("action" in m.meta and "thought" not in m.meta for m in assistant)
    calls = {c.id: c for c in of_type(conv, ToolCall)}
    ids = [m["tool_call_ids"][0] for m in history if m["role"] == "tool"]
    assert [calls[a.tool_call_id].call_id for a in of_type(conv, ToolArtifact)] == ids


# -- ToolBench ----------------------------------------------------------------------------------------


def test_toolbench_legacy_calls_pair_and_finish_stays_pending(toolbench_paths: list[Path]) -> None:
    """Legacy function_call/function messages pair by name; the closing Finish call has no result."""
    assert len(toolbench_paths) == 12
    for path in toolbench_paths:
        gen = load(path)["answer_generation"]
        messages = gen["train_messages"][-1]
        conv = only(parse_file(path))
        calls = {c.id: c for c in of_type(conv, ToolCall)}
        artifacts = of_type(conv, ToolArtifact)
        assert len(calls) == sum(m.get("function_call") is not None for m in messages)
        assert [calls[a.tool_call_id].name for a in artifacts] == [
            m["name"] for m in messages if m["role"] == "function"
        ]
        assert all(c.meta["legacy_function_call"] and c.call_id.startswith("fc_") for c in calls.values())
        answered = {a.tool_call_id for a in artifacts}
        pending = [c.name for c in calls.values() if c.id not in answered]
        assert pending == (
            ["Finish"] if messages[-1].get("function_call", {}).get("name") == "Finish" else []
        )


def test_toolbench_errors_and_tool_schemas(toolbench_paths: list[Path]) -> None:
    """Results with a non-empty 'error' are failed (even when cut off); 'function' becomes a SkillState."""
    failed = 0
    for path in toolbench_paths:
        gen = load(path)["answer_generation"]
        results = [m["content"] for m in gen["train_messages"][-1] if m["role"] == "function"]
        conv = only(parse_file(path))
        statuses = [a.status for a in of_type(conv, ToolArtifact)]
        assert [s is ToolStatus.FAILED for s in statuses] == [
            not c.startswith('{"error": ""') for c in results
        ]
        failed += statuses.count(ToolStatus.FAILED)
        (skill,) = of_type(conv, SkillState)
        assert skill.enabled_tools == tuple(f["name"] for f in gen["function"])
        assert conv.records[0].meta["query"] == gen["query"]
    assert failed == 5  # one of them is a cut-off, non-JSON result
