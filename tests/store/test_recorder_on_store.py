"""The Recorder on every backend (memory, SQLite, PostgreSQL when configured): blobs, ids and continuing."""

from __future__ import annotations

from datetime import UTC, datetime

from ctxledger.ledger import Ledger

START = datetime(2026, 9, 1, 9, 0, tzinfo=UTC)


def test_recorder_writes_and_continues_on_each_store(store):
    """Raw outputs land in the store's blobs; a second recorder continues the numbering and resolves names."""
    ledger = Ledger(store)
    rec = ledger.recorder("run-1", clock=START)
    lead = rec.participant("lead")
    rec.user("Count the rows.")
    ex = rec.tool_call("sql", {"q": "select count(*)"}, b"rows\n1204\n", owner=lead)
    rec.memory("1204 rows.", sources=[ex], source_version="db@7", name="rows")
    art = store.get("default", ex.artifact)
    assert store.blobs.get(art.sha256) == b"rows\n1204\n" and art.media_type == "text/plain; charset=utf-8"

    again = ledger.recorder("run-1", clock=START)
    assert again.user("And now?") == "run-1/4"  # after run-1/0 (user) and the exchange's 1, 2, 3
    newer = again.memory("1210 rows.", sources=[ex.artifact], supersedes=["rows"], source_version="db@8", owner="lead")
    assert store.get("default", newer).supersedes == ("run-1/rows",)
    asm = ledger.assemble("run-1", participant_id=lead, window_tokens=4000, output_tokens=100, now=again.now)
    omitted = {o["ref"]: o["reason"] for o in asm.manifest["omitted"]}
    assert omitted["run-1/rows"] == "superseded"
