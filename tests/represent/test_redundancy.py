"""Redundancy: repeated calls and near-duplicate outputs enter once; the newest copy is kept."""

from __future__ import annotations

from pathlib import Path

import pytest
from represent_helpers import read_json

from ctxledger.errors import ConfigurationError
from ctxledger.ingest import ImportBatch, ParsedConversation, parse_file
from ctxledger.records import ToolArtifact, ToolCall
from ctxledger.represent import find_redundant, find_repeated_calls
from ctxledger.represent.redundancy import shingles


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
