"""The stored manifest never holds a secret.

The payload was already clean; the manifest copied a record's ``source_version``, an unknown
``exact_evidence`` id (warnings' ``value`` and ``detail``) and policy details quoting record fields as they were.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime

from ctxledger import Ledger

T0 = datetime(2026, 9, 1, tzinfo=UTC)
TOK = "ghp_" + "A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8"
TOK2 = "ghp_" + "Z9y8X7w6V5u4T3s2R1q0P9o8N7m6L5k4J3i2"


def _stored(ledger: Ledger, asm) -> str:
    return json.dumps(ledger.get_assembly(asm.id))


def test_a_source_version_holding_a_secret_is_redacted_in_the_included_entry():
    """sec2.py: the memory is included; its entry's source_version is withheld, the rest of the entry stays."""
    ledger = Ledger.open("memory://")
    r = ledger.recorder("sv", clock=T0)
    r.system("sys")
    r.user("hello")
    mem = r.memory("note", source_version="repo@" + TOK)
    r.user("next")
    asm = ledger.assemble("sv", window_tokens=8000, output_tokens=500, now=T0)
    entry = next(e for e in asm.manifest["included"] if e["ref"] == mem)
    assert entry["source_version"].startswith("[withheld by policy: GitHub Token")
    assert TOK not in _stored(ledger, asm)


def test_an_unknown_exact_evidence_secret_is_redacted_in_the_warning():
    """The warning keeps its code and input; its value and detail no longer quote the token."""
    ledger = Ledger.open("memory://")
    r = ledger.recorder("ev", clock=T0)
    r.system("sys")
    r.user("hello")
    r.memory("note")
    r.user("next")
    asm = ledger.assemble("ev", window_tokens=8000, output_tokens=500, now=r.now, exact_evidence=[TOK])
    (warning,) = asm.manifest["warnings"]
    assert warning["code"] == "unknown_exact_evidence" and warning["input"] == "exact_evidence"
    assert "withheld by policy" in warning["value"] and "withheld by policy" in warning["detail"]
    assert TOK not in _stored(ledger, asm)


def test_validity_details_quoting_a_secret_source_version_are_redacted_in_omitted_decisions_and_marks():
    """Stale-by-version details quote both versions: omitted entries, decisions, marks and the payload's stale flag."""
    ledger = Ledger.open("memory://")
    r = ledger.recorder("vv", clock=T0)
    r.system("sys")
    r.user("hello")
    gone = r.memory("VOLATILE old", freshness="volatile", source_version="repo@" + TOK)
    kept = r.memory("BOUNDED old", freshness="bounded", source_version="repo@" + TOK)
    r.memory("current", source_version="repo@" + TOK2)
    r.user("next")
    for _ in range(2):  # the second call reuses the cached entries
        asm = ledger.assemble("vv", window_tokens=8000, output_tokens=500, now=T0)
        assert ledger.explain(asm.id, gone)["reason"] == "stale"
        assert any(m["ref"] == kept and m["reason"] == "stale" for m in asm.manifest["marks"])
        stored = _stored(ledger, asm)
        assert TOK not in stored and TOK2 not in stored
        assert "withheld by policy" in ledger.explain(asm.id, gone)["detail"]
        assert "withheld by policy" in json.dumps(asm.payload)  # the stale flag shown to the model, too
