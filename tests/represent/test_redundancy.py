"""Redundancy: repeated calls and near-duplicate outputs enter once; the newest copy is kept."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st
from represent_helpers import read_json

from ctxledger.errors import ConfigurationError
from ctxledger.ingest import ImportBatch, ParsedConversation, parse_file
from ctxledger.records import ToolArtifact, ToolCall
from ctxledger.represent import find_redundant, find_repeated_calls, outcome_lines
from ctxledger.represent.redundancy import _minhash, outcome_values, shingles


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


def test_reservation_states_that_differ_in_a_value_are_both_kept(data_dir: Path, tau: ImportBatch):
    """A reservation returned after a flight change, then after a baggage change (``total_baggages`` 0, then 2).

    Alike by shingles, but the later output reports another value: the earlier state is not a repeat of it.
    """
    raw = read_json(data_dir / "tau-bench" / "gpt-4o-airline_tasks0-39.json")[134]
    conv = _conversation(tau, f"task{raw['task_id']}-trial{raw['trial']}")
    outputs = _outputs(conv)
    names = {r.id: r.name for r in conv.records if isinstance(r, ToolArtifact)}
    text = dict(outputs)
    flights = next(i for i, o in outputs if names[i] == "update_reservation_flights" and o.startswith("{"))
    baggage = next(i for i, o in outputs if names[i] == "update_reservation_baggages" and o.startswith("{"))
    before, after = json.loads(text[flights]), json.loads(text[baggage])
    assert {k for k in before if before[k] != after[k]} == {"total_baggages"}
    assert _minhash(text[flights]).jaccard(_minhash(text[baggage])) >= 0.9
    assert find_redundant(outputs) == {}
    assert find_redundant([*outputs, ("again", text[flights])]) == {flights: "again"}


def test_bookings_that_differ_only_in_the_reservation_id_are_all_kept(tau: ImportBatch):
    """task 0 trial 3: book_reservation made HATHAT, then twice with the same arguments HATHAU and HATHAV.

    Each created a reservation; the later outputs differ from the earlier only in the id, and none is a repeat.
    """
    conv = _conversation(tau, "task0-trial3")
    booked = [
        (c, a, conv.blobs[a.sha256][0].decode("utf-8"))
        for c, a in _pairs(conv)
        if c.name == "book_reservation" and a is not None and conv.blobs[a.sha256][0].startswith(b"{")
    ]
    assert [json.loads(text)["reservation_id"] for _, _, text in booked] == ["HATHAT", "HATHAU", "HATHAV"]
    (_, _, hathau), (_, _, hathav) = booked[1:]
    assert booked[1][0].arguments == booked[2][0].arguments and hathau.replace("HATHAU", "HATHAV") == hathav
    assert outcome_values(hathau) ^ outcome_values(hathav) == {"HATHAU", "HATHAV"}
    assert find_redundant([(a.id, text) for _, a, text in booked]) == {}
    assert find_repeated_calls([(c, a) for c, a, _ in booked]) == {}


VALUE = (
    st.integers(0, 10**9).map(str)
    | st.from_regex(r"[A-Z]{2,8}", fullmatch=True)
    | st.from_regex(r"[a-z]{2,6}_[0-9]{1,6}", fullmatch=True)
)
"""A value an output reports: a number, a capitalised code or an identifier with digits."""


def _booking(value: str, took: str) -> str:
    return (
        f"Reservation {value} confirmed for passenger Mia Li on the flight from New York to Seattle, "
        "one way in economy class, with no checked bags and travel insurance declined by the user. "
        "Payment charged to the credit card on file. The confirmation was sent to the email address on the "
        "profile, and the booking can be changed or cancelled within twenty four hours at no extra charge. "
        "Seat selection opens at check-in; the fare class allows one carry-on bag and one personal item. "
        "Boarding starts forty minutes before departure at the gate printed on the boarding pass, and the "
        "gate closes fifteen minutes before departure. Passengers who need assistance should tell the agent "
        "at the desk, and meals can be bought on board with a card. Changes to the name are not allowed. "
        "Travellers flying abroad must carry a passport valid for six months beyond the date of return, and "
        "visas are the passenger's own responsibility. Pets travel in the cabin only in an approved carrier "
        "that fits under the seat in front. Lost luggage is reported at the service counter in arrivals, "
        "where staff file a claim and send updates by text message until the bag is delivered home. "
        f"Completed in {took}."
    )


@settings(max_examples=60, deadline=None)
@given(old=VALUE, new=VALUE, took=st.sampled_from(["0.07s", "1.25s", "12ms"]))
def test_outputs_that_differ_in_a_value_are_kept_and_in_a_duration_are_not(old: str, new: str, took: str):
    """Generated: the same output with another number, code or id is not a repeat; with another duration it is."""
    earlier, later = _booking(old, took), _booking(new, "0.04s")
    # alike by shingles, so only the values tell them apart (the MinHash estimate is deterministic per text but may
    # fall below the threshold for a rare pair: such a pair says nothing about the value rule)
    assume(_minhash(earlier).jaccard(_minhash(later)) >= 0.9)
    expected = {"earlier": "later"} if old == new else {}
    assert find_redundant([("earlier", earlier), ("later", later)]) == expected


def test_outcome_values_are_numbers_identifiers_and_codes_without_volatile_parts():
    text = "Booked HATHAT (ord_81, $1,250.50) on 2024-05-01 for Mia; took 3.21s at 10:00:01 from 0x7f3a. OK"
    assert outcome_values(text) == {"HATHAT", "ord_81", "1", "250.50", "2024-05-01", "OK"}


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
