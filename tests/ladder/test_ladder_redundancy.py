"""Redundancy: repeated calls and near-duplicate outputs enter once, with a pointer; protected units never leave."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from ladder_helpers import TAU, TAU_REPEATED

from ctxledger.ledger import Ledger
from ctxledger.testing import MemoryStore


def test_a_repeated_lookup_enters_once_with_a_pointer_to_the_kept_copy(tau):
    """tau-bench task 13: the first get_reservation_details(XEWRD9) leaves as redundant, pointing at the second."""
    asm = tau.assemble(TAU_REPEATED, persist=True)
    first, second = f"{TAU_REPEATED}/4", f"{TAU_REPEATED}/18"
    omitted = {e["ref"]: e for e in asm.manifest["omitted"]}
    included = {e["unit"] for e in asm.manifest["included"]}
    assert second in included
    for ref in (first, f"{TAU_REPEATED}/5", f"{TAU_REPEATED}/6"):  # the message, its call and its result
        assert (omitted[ref]["reason"], omitted[ref]["stage"]) == ("redundant", "redundancy")
        assert second in omitted[ref]["detail"]
    why = tau.explain(asm.id, f"{TAU_REPEATED}/6")
    assert why["status"] == "omitted" and any(second in line for line in why["chain"])


def test_redundant_units_are_only_ever_older_copies(tau):
    """Every pointer goes from an older unit to a newer, included one that is not itself redundant."""
    asm = tau.assemble(TAU_REPEATED, persist=False)
    seq = {e["unit"]: e["seq"] for e in asm.manifest["included"]}
    for decision in asm.manifest["decisions"]:
        if decision["stage"] != "redundancy":
            continue
        kept = decision["detail"].split("unit ")[1].split(" ")[0]
        assert kept in seq
        assert tau.store.get("default", decision["ref"]).seq < seq[kept]


def _lookup_twice(data_dir, *, tags: list[str]) -> list[dict]:
    """A conversation calling the same tool twice with tau-bench's real answer; the first call carries ``tags``."""
    traj = next(
        r["traj"]
        for r in json.loads((data_dir / TAU).read_text(encoding="utf-8"))
        if (r["task_id"], r["trial"]) == (13, 0)
    )
    answer = next(m["content"] for m in traj if m["role"] == "tool" and "XEWRD9" in m["content"])
    call = {
        "type": "function",
        "function": {"name": "get_reservation_details", "arguments": '{"reservation_id":"XEWRD9"}'},
    }
    return [
        {"role": "system", "content": traj[0]["content"][:400]},
        {"role": "user", "content": "Please look at reservation XEWRD9."},
        {"role": "assistant", "content": None, "tool_calls": [{**call, "id": "c1"}], "tags": tags},
        {"role": "tool", "tool_call_id": "c1", "content": answer},
        {"role": "assistant", "content": None, "tool_calls": [{**call, "id": "c2"}]},
        {"role": "tool", "tool_call_id": "c2", "content": answer},
        {"role": "assistant", "content": "It is a round trip in economy."},
        {"role": "user", "content": "Thanks."},
    ]


@pytest.mark.parametrize(("tags", "redundant"), [([], True), (["retry_critical"], False)])
def test_a_protected_copy_is_never_redundant(data_dir, tags, redundant):
    """The same lookup twice: the older copy is redundant, unless protection requires it (then it stays)."""
    ledger = Ledger(MemoryStore())
    ledger.import_messages(_lookup_twice(data_dir, tags=tags), conversation_id="twice")
    asm = ledger.assemble("twice", persist=False)
    reasons = {e["ref"]: e["reason"] for e in asm.manifest["omitted"]}
    assert (reasons.get("twice/2") == "redundant") is redundant
    included = {e["unit"] for e in asm.manifest["included"]}
    assert ("twice/2" in included) is (not redundant)


def _runs(data_dir, instance: str, *indices: int) -> list[str]:
    """Real mini-swe-agent tool outputs (pytest runs) by message index."""
    messages = json.loads((data_dir / f"mini-swe-agent-deepseek/{instance}.traj.json").read_text())["messages"]
    return [messages[i]["content"] for i in indices]


def _rerun(outputs: list[str], note: str = "") -> Ledger:
    """red.py's shape: the same pytest command run once per output, each run answered, then a question."""
    ledger = Ledger.open("memory://")
    r = ledger.recorder("c", clock=datetime(2026, 9, 1, 9, 0, tzinfo=UTC))
    r.system("You make the test suite pass.")
    r.user("Make the test suite pass.")
    for k, output in enumerate(outputs):
        r.tool_call("bash", {"command": "pytest pydicom/tests -v"}, output)
        r.assistant(f"Run {k} done.{note}")
        r.tool_call("edit", {"file": "core.py", "change": k}, "ok")
    r.user("Did the suite pass in the end?")
    return ledger


def test_a_rerun_with_another_result_does_not_hide_the_first(data_dir):
    """red.py's shape: a run with one failure, an edit, the passing rerun (pydicom-1694's real run): both enter.

    The failing run is the real one with its last test failing (verbose line and summary); by shingles the
    two are near-duplicates, and the failing run used to leave as "same tool output as" the rerun.
    """
    (passing,) = _runs(data_dir, "pydicom__pydicom-1694", 105)
    last = "test_json.py::TestNumeric::test_numeric_types"
    failing = passing.replace(f"{last} PASSED", f"{last} FAILED").replace("26 passed in", "1 failed, 25 passed in")
    assert failing != passing
    asm = _rerun([failing, passing]).assemble("c", window_tokens=16000, output_tokens=300, persist=False)
    assert "redundant" not in asm.manifest["omitted_by_reason"]
    body = json.dumps(asm.payload)
    assert "1 failed, 25 passed" in body and "= 26 passed" in body


def test_exact_and_near_duplicates_say_which_they_are(data_dir):
    """pydicom-1139: one run, a rerun differing only in its duration, the rerun again: one enters, two pointers.

    The identical copy is "same tool output"; the run whose bytes differ (``in 0.07s``, then ``0.04s``) is a
    "near-duplicate … (same outcome lines and values)".
    """
    ledger = _rerun(_runs(data_dir, "pydicom__pydicom-1139", 73, 125, 163))
    asm = ledger.assemble("c", window_tokens=16000, output_tokens=300, persist=False)
    (kept,) = [i["unit"] for i in asm.manifest["included"] if i["kind"] == "tool_artifact" and i["tokens"] > 100]
    details = [
        o["detail"] for o in asm.manifest["omitted"] if o["reason"] == "redundant" and o["kind"] == "tool_artifact"
    ]
    assert details == [
        f"near-duplicate of unit {kept} (same outcome lines and values; kept)",
        f"same tool output as unit {kept} (kept)",
    ]


def _kept(detail: str) -> str:
    return detail.split("unit ")[1].split(",")[0].split(" ")[0]


def _check_redundancy_accounting(manifest: dict) -> list[dict]:
    """Every record left out at stage ``redundancy`` tells the truth about its kept copy; returns those not sent.

    ``redundant`` only when the kept unit is in the payload; otherwise the kept unit's own reason, and the
    detail says neither copy was sent.
    """
    included = {e["unit"] for e in manifest["included"]}
    why = {e["ref"]: e for e in manifest["omitted"]}
    neither = []
    for entry in manifest["omitted"]:
        if entry["stage"] != "redundancy":
            continue
        kept = _kept(entry["detail"])
        if entry["reason"] == "redundant":
            assert kept in included, entry
            assert entry["detail"].endswith("kept)"), entry
        else:
            assert kept not in included, entry
            assert entry["reason"] == why[kept]["reason"], (entry, why[kept])
            assert f"(stage {why[kept]['stage']}: {why[kept]['reason']}); neither copy was sent" in entry["detail"]
            neither.append(entry)
    return neither


def test_a_copy_whose_kept_unit_was_not_sent_says_why_neither_was(data_dir):
    """marshmallow-1343 at B_input 8,000: unit 319 is left out for budget, so its older copy 265 is not redundant.

    The summary (explained by replay) and the full trace give the same answer for every such record.
    """
    ledger = Ledger(MemoryStore())
    conv = ledger.import_file(
        data_dir / "mini-swe-agent-deepseek/marshmallow-code__marshmallow-1343.traj.json", count_tokens_for=None
    ).conversation_ids[0]
    budget = {"window_tokens": 8000, "output_tokens": 0, "margin_tokens": 0}
    full = ledger.assemble(conv, trace="full", **budget)
    summary = ledger.assemble(conv, **budget)
    neither = _check_redundancy_accounting(full.manifest)
    assert f"{conv}/265" in {e["ref"] for e in neither}
    assert "redundant" in full.manifest["omitted_by_reason"]  # copies whose kept unit was sent stay redundant
    for entry in neither:
        answer = ledger.explain(summary.id, entry["ref"])
        assert answer == ledger.explain(full.id, entry["ref"])
        assert answer["reason"] == "budget" and any("neither copy was sent" in line for line in answer["chain"])
    decided = {d["ref"]: d for d in full.manifest["decisions"] if d["stage"] == "redundancy"}
    assert decided[f"{conv}/263"]["reason"] == "budget"
    groups = {(g["reason"], g["stage"]): g["count"] for g in ledger.get_assembly(summary.id)["omissions"]}
    assert groups[("budget", "redundancy")] == len(neither)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    copies=st.integers(min_value=2, max_value=4),
    words=st.integers(min_value=0, max_value=300),
    window=st.integers(min_value=250, max_value=3000),
)
@example(copies=3, words=200, window=300)
def test_redundant_means_the_kept_copy_was_sent(data_dir, copies, words, window):
    """The same pytest run repeated, at any budget: ``redundant`` only ever points at a unit in the payload."""
    (run,) = _runs(data_dir, "pydicom__pydicom-1139", 73)
    ledger = _rerun([run] * copies, " Noted." * words)
    asm = ledger.assemble("c", window_tokens=window, output_tokens=0, margin_tokens=0, persist=False)
    _check_redundancy_accounting(asm.manifest)


def test_bookings_with_the_same_arguments_and_other_reservation_ids_both_enter(tau):
    """tau-bench task 0 trial 3: two book_reservation calls with the same arguments made HATHAU and HATHAV.

    Their outputs differ only in the reservation id, so neither is a near-duplicate of the other: no booking leaves
    as ``redundant``, and with room for both the model sees both reservations.
    """
    conv = TAU_REPEATED.replace("task13-trial0", "task0-trial3")
    for window in (6000, 16000):
        asm = tau.assemble(
            conv, window_tokens=window, output_tokens=500, margin_tokens=100, api="anthropic-messages", persist=False
        )
        redundant = [e for e in asm.manifest["omitted"] if e["reason"] == "redundant"]
        assert all("near-duplicate" not in e["detail"] for e in redundant)
        assert not {f"{conv}/{n}" for n in (39, 40, 41)} & {e["ref"] for e in redundant}
    body = json.dumps(asm.payload)
    assert "HATHAU" in body and "HATHAV" in body
