"""A subagent's promoted private tool result can be read back as exact evidence by its parent (seed 004 §4.13-4.14)."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from ctxledger import Ledger

RAW = b'{"job": "export", "exit": 1, "error": "disk full on /var/export", "at": "02:13Z"}'


@pytest.mark.parametrize("promoted", [True, False])
def test_parent_reads_back_a_promoted_private_result_only(promoted):
    """Promoted: the raw bytes come back. Not promoted: a reference, with the visibility stage's reason."""
    ledger = Ledger.open("memory://")
    rec = ledger.recorder("r", clock=datetime(2026, 9, 1, 9, 0, tzinfo=UTC))
    lead = rec.participant("lead")
    scout = rec.participant("scout", role="subagent", parent=lead)
    rec.system("Answer from the recorded evidence.")
    rec.user("Why did the export fail?")
    private = {"owner": scout, "visibility": "participant_private"}
    logs = rec.tool_call("logs.search", {"job": "export"}, RAW, **private)
    fact = rec.memory(  # declared safe, so the parent sees it whether or not the raw result is promoted
        "Export failed: disk full.", sources=[logs], owner=scout, visibility="branch", tags=["safe_summary"]
    )
    rec.checkpoint("scout-1", {"status": "done"}, promote=[logs] if promoted else [], owner=scout)
    rec.user("Quote the exact log line.")
    asm = ledger.assemble("r", participant_id=lead, exact_evidence=[fact], now=datetime(2026, 9, 1, 10, tzinfo=UTC))
    (entry,) = asm.manifest["rehydrations"]
    text = "".join(str(m.get("content") or "") for m in asm.payload["messages"])
    if promoted:
        assert entry["decision"] == "rehydrated" and RAW.decode() in text
    else:
        # the reason is the one the visibility stage omitted the raw result with, so explain agrees
        assert (entry["decision"], entry["reason"]) == ("reference", "not_promoted")
        assert ledger.explain(asm.id, logs.artifact)["reason"] == "not_promoted"
        assert "disk full on /var/export" not in text
