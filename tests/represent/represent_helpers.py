"""Helpers for the representation tests: real tool outputs from ``../shared/data`` as artifacts."""

from __future__ import annotations

import json
import os
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from ctxledger.hashing import sha256_hex
from ctxledger.records import ToolArtifact, ToolStatus, Visibility

OBSERVED = datetime(2026, 4, 10, 12, 0, tzinfo=UTC)
"""A fixed observation time (aware UTC), so memories are reproducible."""


def shared_dir() -> Path:
    """``../shared`` (or ``$CTXLEDGER_SHARED_DIR``), as in the root conftest; used for parametrizing."""
    env = os.environ.get("CTXLEDGER_SHARED_DIR")
    return Path(env) if env else Path(__file__).resolve().parents[2].parent / "shared"


def read_json(path: Path) -> Any:
    """Parse one JSON file."""
    with path.open(encoding="utf-8") as fh:
        return json.load(fh)


def artifact_for(
    data: bytes,
    *,
    name: str = "bash",
    artifact_id: str = "art-1",
    media_type: str = "text/plain; charset=utf-8",
    status: ToolStatus = ToolStatus.SUCCEEDED,
    source_version: str | None = None,
    visibility: Visibility = Visibility.BRANCH,
) -> ToolArtifact:
    """A ToolArtifact record for ``data`` (sha256 and size filled in) in tenant ``t1``."""
    return ToolArtifact(
        id=artifact_id,
        tenant_id="t1",
        conversation_id="c1",
        branch_id="c1/main",
        name=name,
        sha256=sha256_hex(data),
        size_bytes=len(data),
        media_type=media_type,
        status=status,
        source_version=source_version,
        visibility=visibility,
    )


def mini_swe_outputs(path: Path) -> list[tuple[int, str, str]]:
    """``(message index, bash command, tool output)`` for every tool result of a mini-swe-agent trajectory."""
    messages = read_json(path)["messages"]
    out = []
    for i, message in enumerate(messages):
        if message["role"] == "tool" and i > 0 and messages[i - 1].get("tool_calls"):
            command = json.loads(messages[i - 1]["tool_calls"][0]["function"]["arguments"])["command"]
            out.append((i, command, message["content"]))
    return out


def mini_swe_output(data_dir: Path, instance: str, index: int) -> bytes:
    """One tool output (message ``index``) of a mini-swe-agent trajectory, as bytes."""
    messages = read_json(data_dir / "mini-swe-agent-deepseek" / f"{instance}.traj.json")["messages"]
    assert messages[index]["role"] == "tool", (instance, index)
    return messages[index]["content"].encode("utf-8")


def tau_tool_outputs(data_dir: Path, name: str) -> list[str]:
    """Every tool output of tool ``name`` in the tau-bench airline trajectories, in file order."""
    trajectories = read_json(data_dir / "tau-bench" / "gpt-4o-airline_tasks0-39.json")
    return [m["content"] for t in trajectories for m in t["traj"] if m["role"] == "tool" and m["name"] == name]


def toolbench_outputs(data_dir: Path) -> list[tuple[str, str, str]]:
    """``(query, function name, response)`` for every function result of the ToolBench answers."""
    out = []
    for path in sorted((data_dir / "toolbench-examples" / "answer").glob("*/*.json")):
        answer = read_json(path)["answer_generation"]
        for message in answer["train_messages"][-1]:
            if message["role"] == "function":
                out.append((answer["query"], message["name"], message["content"]))
    return out


def swe_agent_observation(data_dir: Path, path_part: str, step: int) -> bytes:
    """The observation of trajectory step ``step`` of the SWE-agent demo whose path contains ``path_part``."""
    root = data_dir / "swe-agent-demos"
    (path,) = [p for p in sorted(root.rglob("*.traj")) if path_part in str(p)]
    return read_json(path)["trajectory"][step]["observation"].encode("utf-8")
