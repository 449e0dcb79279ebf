"""``kill -9`` during ``retain`` leaves a consistent store, and a new run finishes the work (SQLite, PostgreSQL).

A subprocess runs retention over a real store in small batches; the test kills it (SIGKILL) once it has
committed a few batches, then checks what the crash left: every record's content and its audit row
agree (both written in one transaction), no artifact points at a blob that is gone without saying so,
assemblies succeed; then a second run completes, each record is acted on exactly once, and the blobs the
killed run queued are collected.
"""

from __future__ import annotations

import dataclasses
import hashlib
import os
import signal
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest
from retention_histories import NOW
from sqlalchemy import create_engine, text
from store_backends import BACKENDS

from ctxledger import Ledger
from ctxledger.policy.default import default_policy
from ctxledger.records import Conversation, Message, Role, ToolArtifact, ToolCall
from ctxledger.retention.rules import RetentionRule, RetentionRules
from ctxledger.retention.state import retained
from ctxledger.store import open_store
from ctxledger.store.schema import metadata

RULES = RetentionRules(
    (
        RetentionRule(name="raw-7d", kinds=("tool_artifact",), action="redact", after_days=7),
        RetentionRule(name="chat-30d", kinds=("message",), action="hash_only", after_days=30),
    )
)
EXCHANGES = 120

CHILD = """
import sys
from datetime import datetime
from ctxledger import Ledger
from ctxledger.policy import loads_policy

policy = loads_policy(open(sys.argv[3]).read())
with Ledger.open(sys.argv[1], blobs_dir=sys.argv[2], policy=policy) as ledger:
    ledger.retain(now=datetime.fromisoformat(sys.argv[4]), batch_size=4,
                  on_progress=lambda n: print(n, flush=True))
print("done", flush=True)
"""

POLICY = """
[policy]
name = "retention-kill"
version = "1"

[[retention.rules]]
name = "raw-7d"
kinds = ["tool_artifact"]
after_days = 7
action = "redact"

[[retention.rules]]
name = "chat-30d"
kinds = ["message"]
after_days = 30
action = "hash_only"
"""


def _history() -> tuple[list, dict[str, bytes]]:
    env = {"tenant_id": "default", "conversation_id": "k", "branch_id": "k/main", "created_at": NOW.replace(year=2025)}
    out: list = [Conversation(id="k", **env)]
    blobs = {}
    for i in range(EXCHANGES):
        data = f'{{"order": {i}, "status": "shipped"}}'.encode()
        sha = hashlib.sha256(data).hexdigest()
        blobs[sha] = data
        out += [
            Message(id=f"k/u{i}", role=Role.USER, content=f"where is order {i}?", **env),
            Message(id=f"k/a{i}", role=Role.ASSISTANT, content=None, **env),
            ToolCall(id=f"k/c{i}", message_id=f"k/a{i}", call_id=f"call_{i}", name="track", **env),
            ToolArtifact(id=f"k/r{i}", tool_call_id=f"k/c{i}", call_id=f"call_{i}", name="track", sha256=sha,
                         size_bytes=len(data), **env),
        ]
    return out, blobs


@pytest.fixture(params=[b for b in BACKENDS if b != "memory"])
def url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path}/kill.db"
    found = request.getfixturevalue("postgres_url")
    open_store(found, blobs_dir=tmp_path / "blobs").close()  # migrated, then emptied
    engine = create_engine(found)
    with engine.begin() as conn:
        conn.execute(text(f"TRUNCATE {', '.join(t.name for t in metadata.sorted_tables)}"))
    engine.dispose()
    return found


def _consistent(ledger: Ledger) -> Counter[str]:
    """Check the store; return how many records each rule has acted on."""
    acted: Counter[str] = Counter()
    audit = {e.ref: e for e in ledger.retention_audit()}
    per_record = Counter(e.ref for e in ledger.retention_audit() if e.target == "record")
    assert all(n == 1 for n in per_record.values()), "a record was acted on twice"
    for rec in ledger.store.records("default", "k"):
        state = retained(rec)
        if state is None:
            assert rec.id not in audit, f"{rec.id} has an audit row but its content is intact"
            if isinstance(rec, ToolArtifact):
                assert ledger.store.blobs.exists(rec.sha256), f"{rec.id} points at a blob that is gone"
            continue
        assert audit[rec.id].rule == state.rule and audit[rec.id].action == state.action
        acted[state.rule] += 1
    ledger.assemble("k", window_tokens=200_000, output_tokens=1_000, counter="chars/4", now=NOW)
    return acted


def test_kill_during_retain_leaves_a_consistent_store_that_a_new_run_finishes(url: str, tmp_path: Path) -> None:
    blobs_dir = tmp_path / "blobs"
    records, blobs = _history()
    store = open_store(url, blobs_dir=blobs_dir)
    for data in blobs.values():
        store.blobs.put(data)
    store.append(records)
    store.close()
    policy_file = tmp_path / "policy.toml"
    policy_file.write_text(POLICY, encoding="utf-8")
    child = subprocess.Popen(
        [sys.executable, "-c", CHILD, url, str(blobs_dir), str(policy_file), NOW.isoformat()],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert child.stdout is not None
    line = ""
    while not line.startswith("done") and int(line or 0) < EXCHANGES + 40:  # some results redacted
        line = child.stdout.readline()
    os.kill(child.pid, signal.SIGKILL)
    child.wait(timeout=60)
    child.stdout.close()
    assert child.returncode == -signal.SIGKILL and not line.startswith("done")
    policy = dataclasses.replace(default_policy(), retention=RULES)
    with Ledger.open(url, blobs_dir=blobs_dir, policy=policy) as ledger:
        partial = _consistent(ledger)
        assert 0 < sum(partial.values()) < 2 * EXCHANGES  # killed mid-run
        report = ledger.retain(now=NOW, batch_size=50)
        final = _consistent(ledger)
        assert final == {"raw-7d": EXCHANGES, "chat-30d": EXCHANGES}  # every result and user turn, exactly once
        assert sum(c["redact"] + c["hash_only"] for c in report.by_rule.values()) == 2 * EXCHANGES - sum(
            partial.values()
        )
        assert not any(ledger.store.blobs.exists(sha) for sha in blobs)  # queued by either run, all collected
