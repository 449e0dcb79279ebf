"""Build graph records from the real mini-swe-agent trajectories in ``shared/data`` for store tests.

A small, test-only mapping (the real importers live in ``ctxledger.ingest``): system/user/assistant
messages become Messages, each assistant ``tool_calls`` entry a ToolCall, each ``tool`` message a
ToolArtifact whose raw content goes to the blob store whole, each provider usage a ModelRun, and the
final ``exit`` message a Checkpoint.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from ctxledger.records import (
    Branch,
    Checkpoint,
    Conversation,
    Message,
    ModelRun,
    Participant,
    Record,
    Role,
    ToolArtifact,
    ToolCall,
    ToolStatus,
    Trust,
)
from ctxledger.store.base import BlobStore

BASE_TIME = datetime(2025, 5, 6, 12, 0, tzinfo=UTC)


def trajectory_files(data_dir: Path) -> list[Path]:
    """The mini-swe-agent trajectories, sorted by name."""
    return sorted((data_dir / "mini-swe-agent-deepseek").glob("*.traj.json"))


class _Builder:
    """Accumulates records of one conversation with deterministic ids and times."""

    def __init__(self, tenant_id: str, conversation_id: str) -> None:
        self.env = {
            "tenant_id": tenant_id,
            "conversation_id": conversation_id,
            "branch_id": f"{conversation_id}/main",
        }
        self.records: list[Record] = []
        self.blobs: dict[str, tuple[bytes, str]] = {}

    def add(self, cls: type[Record], **fields: Any) -> Record:
        n = len(self.records)
        record = cls(
            id=fields.pop("id", f"{self.env['conversation_id']}/{n}"),
            created_at=BASE_TIME + timedelta(seconds=n),
            **self.env,
            **fields,
        )
        self.records.append(record)
        return record


def _tool_result(
    b: _Builder, msg: dict[str, Any], calls: dict[str, ToolCall], blobs: BlobStore | None
) -> None:
    data = str(msg["content"]).encode("utf-8")
    call = calls[msg["tool_call_id"]]
    returncode = (msg.get("extra") or {}).get("returncode")
    sha = blobs.put(data, "text/plain; charset=utf-8").sha256 if blobs is not None else ""
    b.add(
        ToolArtifact,
        tool_call_id=call.id,
        call_id=call.call_id,
        name=call.name,
        sha256=sha,
        size_bytes=len(data),
        status=ToolStatus.FAILED if returncode not in (0, None) else ToolStatus.SUCCEEDED,
        trust=Trust.TOOL_RESULT,
        meta={"returncode": returncode},
    )


def _assistant(b: _Builder, msg: dict[str, Any], calls: dict[str, ToolCall]) -> None:
    usage = ((msg.get("extra") or {}).get("response") or {}).get("usage") or {}
    run = b.add(
        ModelRun,
        provider="deepseek",
        model="deepseek-chat",
        usage={k: int(usage[k]) for k in ("prompt_tokens", "completion_tokens") if k in usage},
    )
    message = b.add(
        Message,
        role=Role.ASSISTANT,
        content=msg.get("content"),
        trust=Trust.VERIFIED_INTERNAL,
        owner_model_run_id=run.id,
        owner_participant_id=f"{b.env['conversation_id']}/assistant",
    )
    for index, tc in enumerate(msg.get("tool_calls") or ()):
        call = b.add(
            ToolCall,
            message_id=message.id,
            call_id=tc["id"],
            name=tc["function"]["name"],
            arguments=tc["function"]["arguments"],
            index=index,
            trust=Trust.VERIFIED_INTERNAL,
            owner_model_run_id=run.id,
        )
        calls[tc["id"]] = call  # type: ignore[assignment]


def trajectory_records(
    path: Path, tenant_id: str = "acme", conversation_id: str | None = None, blobs: BlobStore | None = None
) -> list[Record]:
    """Records of one real trajectory (blobs are put into ``blobs`` when given)."""
    raw = json.loads(path.read_text(encoding="utf-8"))
    conv = conversation_id or raw["instance_id"]
    b = _Builder(tenant_id, conv)
    b.add(Conversation, id=conv, title=raw["instance_id"], trust=Trust.SYSTEM)
    b.add(Branch, id=f"{conv}/main", name="main")
    for role in ("user", "assistant"):
        b.add(Participant, id=f"{conv}/{role}", role=role, name=role)
    calls: dict[str, ToolCall] = {}
    for msg in raw["messages"]:
        role = msg["role"]
        if role in ("system", "user"):
            b.add(Message, role=Role(role), content=msg["content"], trust=Trust(role))
        elif role == "assistant":
            _assistant(b, msg, calls)
        elif role == "tool":
            _tool_result(b, msg, calls, blobs)
        elif role == "exit":
            b.add(Checkpoint, run_id=raw["instance_id"], state={"exit_status": raw["info"]["exit_status"]})
    return b.records


def tool_outputs(path: Path) -> list[bytes]:
    """The raw ``tool`` message contents of a trajectory, as UTF-8 bytes, in order."""
    raw = json.loads(path.read_text(encoding="utf-8"))
    return [str(m["content"]).encode("utf-8") for m in raw["messages"] if m["role"] == "tool"]
