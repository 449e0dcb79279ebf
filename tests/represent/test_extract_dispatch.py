"""Dispatch, input checks, provenance coverage, and promotion as a recorded policy decision."""

from __future__ import annotations

from datetime import datetime
from pathlib import Path

import pytest
from represent_helpers import (
    OBSERVED,
    artifact_for,
    mini_swe_output,
    mini_swe_outputs,
    tau_tool_outputs,
    toolbench_outputs,
)

from ctxledger.errors import InputError, IntegrityError
from ctxledger.hashing import content_hash
from ctxledger.records import ToolArtifact, ToolStatus, Visibility
from ctxledger.represent import extract, promote, rehydrate
from ctxledger.testing import MemoryBlobStore


def test_binary_and_empty_outputs_give_no_memory():
    """Bytes with a NUL (binary) and empty output are not extracted."""
    for data in (b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR", b"", b"  \n"):
        assert extract(artifact_for(data), data, memory_id="m", observed_at=OBSERVED) is None


def test_input_checks(data_dir: Path):
    """Wrong bytes, a naive time and a missing sha256 are refused with errors naming the problem."""
    data = mini_swe_output(data_dir, "marshmallow-code__marshmallow-1343", 9)
    with pytest.raises(IntegrityError):
        extract(artifact_for(data + b"x"), data, memory_id="m", observed_at=OBSERVED)
    with pytest.raises(InputError) as naive:
        extract(artifact_for(data), data, memory_id="m", observed_at=datetime(2026, 4, 10, 12, 0))
    assert naive.value.field == "observed_at"
    with pytest.raises(InputError) as unnamed:
        bare = ToolArtifact(id="x", tenant_id="t", conversation_id="c", branch_id="b")
        extract(bare, data, memory_id="m", observed_at=OBSERVED)
    assert unnamed.value.field == "sha256"


def test_every_real_output_is_extracted_with_rehydratable_locators(data_dir: Path):
    """Provenance coverage on a whole real trajectory: every memory's locators rehydrate inside its artifact."""
    blobs = MemoryBlobStore()
    outputs = mini_swe_outputs(data_dir / "mini-swe-agent-deepseek" / "pydicom__pydicom-1694.traj.json")
    kinds = set()
    for index, _, output in outputs:
        data = output.encode()
        sha = blobs.put(data).sha256
        memory = extract(artifact_for(data, artifact_id=f"a{index}"), data, memory_id=f"m{index}", observed_at=OBSERVED)
        assert memory is not None and memory.locators
        kinds.add(memory.fields["extractor"])
        for locator in memory.locators:
            assert locator["artifact_id"] == f"a{index}" and locator["sha256"] == sha
            piece = rehydrate(blobs, locator)
            assert piece == data[locator["byte_start"] : locator["byte_end"]]
    assert {"logs", "testrun"} <= kinds and len(outputs) > 50


def test_promotion_of_a_test_run_is_a_recorded_decision(data_dir: Path):
    """A test run is promoted, and the decision names stage, artifact, extractor and confidence."""
    data = mini_swe_output(data_dir, "pydicom__pydicom-1139", 131)
    memory, decision = promote(artifact_for(data, artifact_id="a131"), data, memory_id="m131", observed_at=OBSERVED)
    assert memory is not None and memory.id == "m131"
    assert decision == {
        "stage": "promotion",
        "ref": "a131",
        "outcome": "promoted",
        "reason": "extracted",
        "memory_id": "m131",
        "extractor": "testrun",
        "confidence": 0.95,
        "min_confidence": 0.5,
    }


@pytest.mark.parametrize(
    ("change", "reason"),
    [
        ({"visibility": Visibility.AUDIT_ONLY}, "audit_only"),
        ({"status": ToolStatus.DEFERRED}, "no_result"),
    ],
)
def test_policy_refusals(data_dir: Path, change: dict, reason: str):
    """Audit-only artifacts and deferred calls are not promoted, with the reason recorded."""
    data = mini_swe_output(data_dir, "pydicom__pydicom-1139", 131)
    memory, decision = promote(artifact_for(data, **change), data, memory_id="m", observed_at=OBSERVED)
    assert memory is None
    assert (decision["outcome"], decision["reason"]) == ("not_promoted", reason)


def test_low_confidence_and_nothing_to_extract(data_dir: Path):
    """A heuristic log extraction under a strict threshold, and empty output, are not promoted."""
    data = mini_swe_output(data_dir, "marshmallow-code__marshmallow-1343", 9)
    memory, decision = promote(artifact_for(data), data, memory_id="m", observed_at=OBSERVED, min_confidence=0.9)
    assert memory is None
    assert (decision["reason"], decision["extractor"], decision["confidence"]) == (
        "low_confidence",
        "logs",
        0.8,
    )
    empty = b""
    memory, decision = promote(artifact_for(empty), empty, memory_id="m", observed_at=OBSERVED)
    assert memory is None and decision["reason"] == "no_extractor"


def test_memories_of_all_real_api_results_are_canonical_json(data_dir: Path):
    """Every memory of the real tau-bench and ToolBench results hashes as canonical JSON (storable, hashable)."""
    outputs = [
        (name, c)
        for name in ("search_direct_flight", "get_reservation_details", "book_reservation")
        for c in tau_tool_outputs(data_dir, name)
    ]
    outputs += [(name, c) for _, name, c in toolbench_outputs(data_dir)]
    kinds = set()
    for name, content in outputs:
        data = content.encode()
        memory = extract(
            artifact_for(data, name=name), data, query="HAT069 Gondrand", memory_id="m", observed_at=OBSERVED
        )
        if memory is None:
            continue
        kinds.add(memory.fields["extractor"])
        assert content_hash({"fields": dict(memory.fields), "locators": [dict(x) for x in memory.locators]})
    assert kinds == {"json", "search", "logs"}
