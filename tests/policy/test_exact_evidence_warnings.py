"""Exact evidence that cannot be served is said in the manifest, never dropped silently."""

from __future__ import annotations

from datetime import UTC, datetime

from ctxledger import Ledger


def test_an_omitted_stale_memory_asked_for_exact_evidence_gets_a_warning():
    """A stale memory named in exact_evidence is omitted; the manifest warns that nothing was read back."""
    ledger = Ledger.open("memory://")
    rec = ledger.recorder("c", clock=datetime(2026, 9, 1, tzinfo=UTC))
    rec.system("Answer from the evidence.")
    rec.user("Export the rows.")
    x = rec.tool_call("csv.export", {}, "\n".join(f"R{i},{i}" for i in range(50)))
    stale = rec.memory(
        "50 rows exported.", sources=[x], freshness="volatile", stale_after=datetime(2026, 9, 1, 0, 5, tzinfo=UTC)
    )
    fresh = rec.memory("Exported again: 50 rows.", sources=[x], name="fresh")
    rec.user("Give me the exact CSV.")
    asm = ledger.assemble(
        "c",
        exact_evidence=[stale, fresh],
        window_tokens=4000,
        output_tokens=500,
        now=datetime(2026, 9, 1, 0, 10, tzinfo=UTC),
    )
    warned = [w for w in asm.manifest["warnings"] if w["code"] == "exact_evidence_not_served"]
    assert [w["value"] for w in warned] == [stale] and "stale" in warned[0]["detail"]
    assert {e["memory"] for e in asm.manifest["rehydrations"]} == {fresh}
