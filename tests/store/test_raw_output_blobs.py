"""A kept raw tool output is a blob its record references: collected with it, never before it.

The mini-swe-agent importer keeps each tool result's ``extra.raw_output`` as a blob named in
``meta["raw_output_sha256"]``. Blob collection must count it as referenced while the record lives, and
``forget`` must leave none of a conversation's blobs behind.
"""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

from ctxledger.ledger import Ledger
from ctxledger.records import blob_references
from ctxledger.retention.engine import retain
from ctxledger.retention.rules import RetentionRule, RetentionRules
from ctxledger.store import open_store
from ctxledger.store.base import GraphStore
from ctxledger.store.gc import collect_garbage
from ctxledger.store.memory import MemoryStore

TRAJECTORIES = ("marshmallow-code__marshmallow-1343.traj.json", "marshmallow-code__marshmallow-1359.traj.json")


def _blobs_of(store: GraphStore, conversation_id: str) -> set[str]:
    return {ref for r in store.records("default", conversation_id) for ref in blob_references(r)}


def _stored(store: GraphStore) -> set[str]:
    return {b.sha256 for b in store.blobs.stored()}


def test_forget_leaves_none_of_the_conversations_blobs(store: GraphStore, data_dir: Path) -> None:
    """After forgetting one of two imported trajectories, its artifacts' and raw outputs' blobs are gone."""
    ledger = Ledger(store)
    convs = [
        ledger.import_file(data_dir / "mini-swe-agent-deepseek" / name, conversation_id=f"c{i}").conversation_ids[0]
        for i, name in enumerate(TRAJECTORIES)
    ]
    raw = {r.meta["raw_output_sha256"] for r in store.records("default", convs[0]) if "raw_output_sha256" in r.meta}
    assert raw and raw <= _blobs_of(store, convs[0]) <= _stored(store)
    kept = _blobs_of(store, convs[1])
    ledger.forget(conversation_id=convs[0])
    assert _stored(store) & (raw - kept) == set()
    assert kept <= _stored(store)


def test_collection_keeps_the_raw_outputs_of_live_messages(tmp_path: Path, data_dir: Path) -> None:
    """Right after an import nothing is unreferenced, so a zero-grace collection removes nothing."""
    store = open_store(f"sqlite:///{tmp_path}/s.db")
    Ledger(store).import_file(data_dir / "mini-swe-agent-deepseek" / TRAJECTORIES[0], conversation_id="c")
    report = collect_garbage(store, grace=timedelta(0), dry_run=True)
    assert report.removed == [] and report.referenced == report.stored
    store.close()


def test_memory_store_counts_raw_outputs_as_referenced(data_dir: Path) -> None:
    store = MemoryStore()
    Ledger(store).import_file(data_dir / "mini-swe-agent-deepseek" / TRAJECTORIES[0], conversation_id="c")
    assert _blobs_of(store, "c") <= store._live_blobs()


def test_redacting_tool_results_takes_their_raw_outputs(store: GraphStore, data_dir: Path) -> None:
    """A rule that redacts tool results leaves neither their bytes nor their kept raw outputs in the blob store."""
    ledger = Ledger(store)
    conv = ledger.import_file(data_dir / "mini-swe-agent-deepseek" / TRAJECTORIES[0], conversation_id="c")
    conv_id = conv.conversation_ids[0]
    raw = {r.meta["raw_output_sha256"] for r in store.records("default", conv_id) if "raw_output_sha256" in r.meta}
    rules = RetentionRules((RetentionRule("redact-results", ("tool_artifact",), "redact"),))
    later = max(r.created_at for r in store.records("default", conv_id)) + timedelta(days=1)
    retain(store, rules, now=later)
    still = {ref for r in store.records("default", conv_id) for ref in blob_references(r)}
    assert raw and not (raw - still) & _stored(store)
