"""The stores on real agent history: a whole SWE-agent trajectory with its raw tool outputs as blobs."""

from __future__ import annotations

import dataclasses
from pathlib import Path

from bench_store_read import big_conversation
from store_realdata import tool_outputs, trajectory_files, trajectory_records

from ctxledger.records import Branch, Message, Role, ToolArtifact, ToolCall
from ctxledger.store.base import GraphStore


def test_real_trajectory_round_trips_with_its_raw_outputs(store: GraphStore, data_dir: Path) -> None:
    """Every record reads back equal and every artifact's blob is the exact raw tool output."""
    path = trajectory_files(data_dir)[0]
    written = store.append(trajectory_records(path, "acme", blobs=store.blobs))
    conv = written[0].conversation_id
    assert store.records("acme", conv) == written
    assert [r.seq for r in written] == list(range(1, len(written) + 1))
    artifacts = [r for r in written if isinstance(r, ToolArtifact)]
    assert [store.blobs.get(a.sha256) for a in artifacts] == tool_outputs(path)
    assert all(a.size_bytes == len(store.blobs.get(a.sha256)) for a in artifacts)
    answered = {a.tool_call_id for a in artifacts}
    pending = [c for c in written if isinstance(c, ToolCall) and c.id not in answered]
    assert len(pending) == 1 and "COMPLETE_TASK_AND_SUBMIT" in pending[0].arguments


def test_a_branch_forked_from_real_history_sees_only_its_prefix(store: GraphStore, data_dir: Path) -> None:
    """A retry branch forked mid-trajectory sees the history up to the fork and its own turn only."""
    written = store.append(trajectory_records(trajectory_files(data_dir)[2], "acme", blobs=store.blobs))
    conv, fork = written[0].conversation_id, written[len(written) // 2].seq
    env = {"tenant_id": "acme", "conversation_id": conv, "branch_id": f"{conv}/retry"}
    store.append(
        [
            Branch(id=f"{conv}/retry", parent_branch_id=f"{conv}/main", fork_seq=fork, **env),
            Message(id=f"{conv}/retry/1", role=Role.USER, content="Try a smaller patch instead.", **env),
        ]
    )
    seen = store.records("acme", conv, lineage=store.lineage("acme", f"{conv}/retry"))
    assert seen[:fork] == written[:fork]
    assert [r.id for r in seen[fork:]] == [f"{conv}/retry", f"{conv}/retry/1"]
    assert len(store.records("acme", conv)) == len(written) + 2


def test_deleting_one_tenant_keeps_blobs_another_tenant_imported_too(
    store: GraphStore, data_dir: Path
) -> None:
    """Two tenants import the same trajectory; deleting one keeps every shared raw output."""
    path = trajectory_files(data_dir)[3]
    a = store.append(trajectory_records(path, "tenant-a", "conv-a", blobs=store.blobs))
    store.append(trajectory_records(path, "tenant-b", "conv-b", blobs=store.blobs))
    shas = {r.sha256 for r in a if isinstance(r, ToolArtifact)}
    assert store.delete_tenant("tenant-a") == len(a)
    assert all(store.blobs.exists(sha) for sha in shas)
    assert store.delete_tenant("tenant-b") == len(a)
    assert not any(store.blobs.exists(sha) for sha in shas)


def test_ten_thousand_real_records_read_back_in_order(store: GraphStore) -> None:
    """10,000 real history records of one conversation read back equal and in order (speed: see bench/)."""
    records = big_conversation(10_000, "perf", "perf-conv", store.blobs)
    written = store.append(records)
    back = store.records("perf", "perf-conv")
    assert back == written
    as_of = store.records("perf", "perf-conv", as_of_seq=5_000, after_seq=4_000)
    assert [r.seq for r in as_of] == list(range(4_001, 5_001))
    assert dataclasses.replace(back[-1], seq=0) == records[-1]
