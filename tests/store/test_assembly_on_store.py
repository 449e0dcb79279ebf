"""The main job on every backend: import a real trajectory, assemble, persist, record usage, explain."""

from __future__ import annotations

import pytest

from ctxledger.errors import InputError, UsageAlreadyRecorded
from ctxledger.ledger import Ledger


def test_main_job_on_each_store(store, data_dir):
    """The same trajectory gives the same payload hash on every backend and the manifest round-trips."""
    ledger = Ledger(store)
    result = ledger.import_file(
        data_dir / "mini-swe-agent-deepseek" / "marshmallow-code__marshmallow-1359.traj.json"
    )
    conv = result.conversation_ids[0]
    asm = ledger.assemble(conv, window_tokens=8000, output_tokens=800, margin_tokens=200)
    manifest = ledger.get_assembly(asm.id)
    assert manifest["payload_hash"] == asm.payload_hash
    assert manifest["tokens"]["estimated_input"] <= manifest["budget"]["input"]
    assert manifest["tokens"]["replay"] > manifest["tokens"]["estimated_input"]
    ledger.record_usage(asm, asm.input_tokens + 7, 120)
    tokens = ledger.get_assembly(asm.id)["tokens"]
    assert (tokens["observed_input"], tokens["observed_output"], tokens["error"]) == (
        asm.input_tokens + 7,
        120,
        -7,
    )
    with pytest.raises(UsageAlreadyRecorded, match=f"assembly {asm.id}.*overwrite=True"):
        ledger.record_usage(asm, 1, 1)
    ledger.record_usage(asm.id, asm.input_tokens + 9, 121, overwrite=True)
    assert ledger.get_assembly(asm.id)["tokens"]["error"] == -9
    with pytest.raises(InputError, match="field 'input_tokens'"):
        ledger.record_usage(asm, -1, 1, overwrite=True)
    for bad in (-1, 0, True, "3"):
        with pytest.raises(InputError, match=r"field 'as_of_seq'.*seq >= 1"):
            ledger.assemble(conv, window_tokens=8000, output_tokens=800, margin_tokens=200, as_of_seq=bad)
    omitted = asm.manifest["omitted"][0]  # the in-process trace; the stored summary counts it
    assert "omitted" not in manifest and manifest["omitted_by_reason"][omitted["reason"]] >= 1
    assert ledger.explain(asm.id, omitted["ref"])["reason"] == omitted["reason"]
    fresh = Ledger(store).assemble(conv, window_tokens=8000, output_tokens=800, margin_tokens=200)
    assert fresh.payload_hash == asm.payload_hash
    assert fresh.payload_hash == "sha256:" + _expected_hash(asm)


def _expected_hash(asm):
    from ctxledger.hashing import canonical_json, sha256_hex

    return sha256_hex(canonical_json(asm.payload).encode())


def test_provenance_repair_from_the_tenant_store_on_each_backend(store):
    """The scenario's repair (earlier conversation, decoy in another tenant) holds on every backend."""
    from ctxledger.scenarios._graph import GraphBuilder
    from ctxledger.scenarios.catalog import SCENARIOS
    from ctxledger.scenarios.runner import DEFAULT_REQUEST, check

    scenario = next(s for s in SCENARIOS if s.name == "provenance-repair-from-store")
    ledger = Ledger(store)
    g = GraphBuilder(ledger, scenario.name)
    request = {**DEFAULT_REQUEST, **scenario.build(g)}
    request["now"] = g.now  # the clock after the graph was written, as the scenario runner does
    asm = ledger.assemble(g.conversation_id, **request)
    failures, _ = check(scenario, asm, g)
    assert failures + scenario.check(asm, g) == []
    assert ledger.explain(asm.id, g.id("mem-q3"))["rehydrations"][0]["repaired_from"] == g.id("art-q3-export")


def test_persisted_manifest_text_is_the_canonical_json_of_the_manifest(store, data_dir):
    """The omitted list is persisted from cached entry texts; the stored manifest is the one returned."""
    import json

    from ctxledger.hashing import canonical_json

    ledger = Ledger(store)
    result = ledger.import_file(data_dir / "mini-swe-agent-deepseek" / "marshmallow-code__marshmallow-1359.traj.json")
    conv = result.conversation_ids[0]
    for trace in ("full", "full", "summary"):  # the second call reuses the cached entries and texts
        asm = ledger.assemble(conv, window_tokens=8000, output_tokens=800, margin_tokens=200, trace=trace)
        assert asm.manifest["omitted"]
        stored = ledger.get_assembly(asm.id)
        assert stored == json.loads(json.dumps(asm.persisted(), default=str))
        assert ("omitted" in stored) is (trace == "full")
        plain = {**asm.manifest, "omitted": list(asm.manifest["omitted"])}
        assert canonical_json(dict(asm.manifest)) == canonical_json(plain)
