"""Redundancy: repeated calls and near-duplicate outputs enter once; the newest copy is kept."""

from __future__ import annotations

from pathlib import Path

import pytest
from represent_helpers import read_json

from ctxledger.errors import ConfigurationError
from ctxledger.ingest import ImportBatch, ParsedConversation, parse_file
from ctxledger.records import ToolArtifact, ToolCall
from ctxledger.represent import find_redundant, find_repeated_calls, outcome_lines
from ctxledger.represent.redundancy import _minhash, shingles


@pytest.fixture(scope="module")
def tau(data_dir: Path) -> ImportBatch:
    """All 160 real tau-bench airline trajectories, imported."""
    return parse_file(data_dir / "tau-bench" / "gpt-4o-airline_tasks0-39.json", "tau-bench")


def _conversation(batch: ImportBatch, suffix: str) -> ParsedConversation:
    return next(c for c in batch.conversations if c.conversation_id.endswith(suffix))


def _outputs(conv: ParsedConversation) -> list[tuple[str, str]]:
    """``(artifact id, output text)`` of every tool result, oldest first (blobs are ``(bytes, media type)``)."""
    return [(r.id, conv.blobs[r.sha256][0].decode("utf-8")) for r in conv.records if isinstance(r, ToolArtifact)]


def _pairs(conv: ParsedConversation) -> list[tuple[ToolCall, ToolArtifact | None]]:
    artifacts = {r.tool_call_id: r for r in conv.records if isinstance(r, ToolArtifact)}
    return [(r, artifacts.get(r.id)) for r in conv.records if isinstance(r, ToolCall)]


def _jaccard(a: str, b: str) -> float:
    sa, sb = shingles(a), shingles(b)
    return len(sa & sb) / len(sa | sb)


def test_repeated_identical_call_enters_once(tau: ImportBatch):
    """task 13: the same reservation lookup, same output, twice; the older call points at the newer."""
    conv = _conversation(tau, "task13-trial0")
    lookups = [c for c, _ in _pairs(conv) if c.name == "get_reservation_details"]
    repeated = find_repeated_calls(_pairs(conv))
    assert repeated[lookups[0].id] == lookups[1].id
    assert lookups[1].id not in repeated
    searches = [c.id for c, _ in _pairs(conv) if c.name == "search_direct_flight"]
    assert not set(searches) & set(repeated)  # different arguments are never repeats


def test_near_duplicate_reservation_states(data_dir: Path, tau: ImportBatch):
    """A reservation returned after a flight change and again after a baggage change: the older is redundant."""
    raw = read_json(data_dir / "tau-bench" / "gpt-4o-airline_tasks0-39.json")[134]
    conv = _conversation(tau, f"task{raw['task_id']}-trial{raw['trial']}")
    outputs = _outputs(conv)
    names = {r.id: r.name for r in conv.records if isinstance(r, ToolArtifact)}
    flights = next(i for i, o in outputs if names[i] == "update_reservation_flights" and o.startswith("{"))
    baggage = next(i for i, o in outputs if names[i] == "update_reservation_baggages" and o.startswith("{"))
    # the reservation before the flight change, the searches and the calculations all stay
    assert find_redundant(outputs) == {flights: baggage}


def test_every_pointer_is_direct_newer_and_kept(tau: ImportBatch):
    """Over all real trajectories: each redundant output points at a newer, kept, truly similar output."""
    total = 0
    for conv in tau.conversations:
        outputs = _outputs(conv)
        order = {item_id: i for i, (item_id, _) in enumerate(outputs)}
        text = dict(outputs)
        redundant = find_redundant(outputs)
        total += len(redundant)
        for old, kept in redundant.items():
            assert order[kept] > order[old] and kept not in redundant
            assert text[old] == text[kept] or _jaccard(text[old], text[kept]) >= 0.8
    assert total >= 25


def test_short_distinct_outputs_are_not_merged(cases_dir: Path):
    """B09's "wrote 212 lines" and "wrote 148 lines" differ in what matters and are both kept."""
    case = read_json(cases_dir / "B09.json")
    outputs = [(m["id"], m["content"]) for m in case["messages"] if m["role"] == "tool"]
    assert find_redundant(outputs) == {}
    assert find_redundant([*outputs, ("again", outputs[1][1])]) == {outputs[1][0]: "again"}


def test_deterministic_and_validated(tau: ImportBatch):
    """The same input gives the same map; bad thresholds and duplicate ids are refused."""
    outputs = _outputs(_conversation(tau, "task13-trial0"))
    assert find_redundant(outputs) == find_redundant(list(outputs))
    text = dict(outputs)
    exact_only = find_redundant(outputs, threshold=1.0)
    assert exact_only and all(text[old] == text[kept] for old, kept in exact_only.items())
    with pytest.raises(ConfigurationError):
        find_redundant(outputs, threshold=0)
    with pytest.raises(ConfigurationError):
        find_redundant([("a", "x"), ("a", "y")])


def _mini_swe(data_dir: Path, instance: str, *indices: int) -> list[str]:
    messages = read_json(data_dir / "mini-swe-agent-deepseek" / f"{instance}.traj.json")["messages"]
    return [messages[i]["content"] for i in indices]


def _failing_variant(passing: str) -> str:
    """A real passing pytest run with its last test failing instead (the verbose line and the summary)."""
    last = "test_json.py::TestNumeric::test_numeric_types"
    assert f"{last} PASSED" in passing and "26 passed in" in passing
    return passing.replace(f"{last} PASSED", f"{last} FAILED").replace("26 passed in", "1 failed, 25 passed in")


def test_a_failing_run_is_not_redundant_with_the_passing_rerun(data_dir: Path):
    """red.py's shape on a real run (pydicom-1694, 26 passed): the same run with its last test failing comes first.

    By shingles alone the two are near-duplicates (the older would point at the newer); the outcome
    lines differ (``FAILED``, ``1 failed, 25 passed``), so neither points at the other.
    """
    (passing,) = _mini_swe(data_dir, "pydicom__pydicom-1694", 105)
    failing = _failing_variant(passing)
    assert _minhash(failing).jaccard(_minhash(passing)) >= 0.9
    assert find_redundant([("failing", failing), ("passing", passing)]) == {}
    assert find_redundant([("passing", passing), ("again", passing)]) == {"passing": "again"}


def test_real_runs_alike_by_shingles_with_other_counts_have_other_outcomes(data_dir: Path):
    """astroid-1866: two real pytest runs estimated 0.9+ alike ("13 passed, 1 deselected", "14 passed")."""
    first, second = _mini_swe(data_dir, "pylint-dev__astroid-1866", 129, 131)
    assert _minhash(first).jaccard(_minhash(second)) >= 0.9
    assert outcome_lines(first) != outcome_lines(second)
    assert find_redundant([("first", first), ("second", second)]) == {}


def test_near_duplicate_runs_with_the_same_outcome_differing_in_duration_are_redundant(data_dir: Path):
    """pydicom-1139: the same 12 tests passing "in 0.07s" then "in 0.04s": the older run points at the newer."""
    older, newer = _mini_swe(data_dir, "pydicom__pydicom-1139", 73, 125)
    assert older != newer
    assert (
        outcome_lines(older)
        == outcome_lines(newer)
        == {
            "============================== 12 passed in # ==============================",
            "exit status 0",
        }
    )
    assert find_redundant([("older", older), ("newer", newer)]) == {"older": "newer"}


def test_outcome_lines_are_error_summary_and_exit_lines():
    """Error lines, summary lines and the exit status make the outcome; timestamps and durations do not."""
    text = (
        "collected 3 items\n"
        "t.py::test_a PASSED\n"
        "t.py::test_b FAILED\n"
        "2026-01-01 10:00:01 Error: disk full at 0x7f3a\n"
        "=== 1 failed, 2 passed in 3.21s ===\n"
        "exit code 1\n"
    )
    assert outcome_lines(text) == {
        "t.py::test_b FAILED",
        "# Error: disk full at #",
        "=== 1 failed, 2 passed in # ===",
        "exit status 1",
    }
    assert outcome_lines("just a listing\nof files\n") == frozenset()
