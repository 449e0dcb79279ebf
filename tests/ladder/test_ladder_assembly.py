"""The ladder wired into assembly on a real SWE trajectory: evidence kept, manifest, savings, the switch."""

from __future__ import annotations

import dataclasses
from datetime import UTC, datetime

import pytest

from ctxledger.ledger import Ledger
from ctxledger.policy import default_policy, loads_policy
from ctxledger.records import Message, Role
from ctxledger.serialize import get_serializer
from ctxledger.units import render_tool_data

ON = default_policy()
OFF = dataclasses.replace(ON, selection=dataclasses.replace(ON.selection, ladder=False))
FAILING_RUN = "pvlib__pvlib-python-1072/261"
"""The pytest run whose only failure is ``test_sapm_series`` (pandas ``ValueError: Invalid frequency``)."""
EVIDENCE = ("FAILED pvlib/tests/test_temperature.py::test_sapm_series", "E   ValueError: Invalid frequency: 12H.")


def _calls_after(ledger: Ledger, cid: str, ref: str, n: int) -> list[int]:
    """``as_of_seq`` of the next ``n`` model calls after record ``ref`` (each call sees what precedes it)."""
    after = ledger.store.get("default", ref).seq
    records = ledger.store.records("default", cid)
    return [r.seq - 1 for r in records if isinstance(r, Message) and r.role is Role.ASSISTANT and r.seq > after][:n]


def _assemble(ledger: Ledger, cid: str, seq: int, budget: int, policy):
    return ledger.assemble(
        cid, as_of_seq=seq, window_tokens=budget, output_tokens=0, margin_tokens=0, policy=policy, persist=False
    )


def _kept(asm) -> int:
    text = "\n".join(str(m.get("content")) for m in asm.payload["messages"])
    return sum(line in text for line in EVIDENCE)


def test_the_ladder_keeps_more_of_the_failure_evidence_at_the_same_budget(swe):
    """At 4k tokens, over the 8 calls after the failing run, the ladder never keeps less and keeps more."""
    ledger, cid = swe
    on, off = [], []
    for seq in _calls_after(ledger, cid, FAILING_RUN, 8):
        on.append(_kept(_assemble(ledger, cid, seq, 4000, ON)))
        off.append(_kept(_assemble(ledger, cid, seq, 4000, OFF)))
    assert all(a >= b for a, b in zip(on, off, strict=True))
    assert sum(on) > sum(off)


def test_manifest_records_representations_locators_and_savings(swe):
    """Each non-verbatim item names its transform and locators; the ledger's savings add up against verbatim."""
    ledger, cid = swe
    seq = _calls_after(ledger, cid, FAILING_RUN, 5)[-1]
    asm = _assemble(ledger, cid, seq, 4000, ON)
    manifest = asm.manifest
    derived = [e for e in manifest["included"] if e["representation"] != "verbatim" and e["kind"] == "tool_artifact"]
    assert derived
    for entry in derived:
        assert entry["transform"].split("@")[0].split(":")[0] == entry["representation"]
        assert entry["locators"] and all(loc["artifact_id"] == entry["ref"] for loc in entry["locators"])
    snap = ledger.snapshots.load("default", cid, manifest["branch_id"], seq)
    coster = ledger.coster("openai-chat", "gpt-4o")
    records = {r.id: r for r in snap.records}

    def sent(t):  # a tool result is sent inside its data framing (trust stage)
        return dataclasses.replace(t, content=render_tool_data(records[t.ref], t.content)) if t.role == "tool" else t

    verbatim = {u.id: sum(coster.turn_tokens(sent(t)) for t in u.turns) for u in snap.units}
    by_unit: dict[str, int] = {}
    for entry in manifest["included"]:
        if entry["representation"] != "verbatim":
            by_unit[entry["unit"]] = by_unit.get(entry["unit"], 0) + entry["tokens"]
    assert sum(manifest["ledger"]["saved_by_transform"].values()) == sum(verbatim[u] - t for u, t in by_unit.items())
    assert asm.input_tokens == get_serializer("openai-chat").count(asm.payload, coster.counter) <= 4000


def test_ladder_off_is_verbatim_only_under_another_policy_hash(swe):
    """With ``selection.ladder`` off every item is verbatim, nothing is saved or redundant, and the hash differs."""
    ledger, cid = swe
    seq = _calls_after(ledger, cid, FAILING_RUN, 5)[-1]
    manifest = _assemble(ledger, cid, seq, 4000, OFF).manifest
    assert {e["representation"] for e in manifest["included"]} == {"verbatim"}
    assert manifest["ledger"]["saved_by_transform"] == {}
    assert "redundant" not in manifest["omitted_by_reason"]
    assert manifest["policy"]["hash"] != ON.hash


def test_same_snapshot_same_policy_same_payload(swe):
    """Two assemblies of one snapshot, one by a fresh ledger with cold caches, yield the same payload hash."""
    ledger, cid = swe
    seq = _calls_after(ledger, cid, FAILING_RUN, 4)[-1]
    first = _assemble(ledger, cid, seq, 4000, ON)
    second = _assemble(Ledger(ledger.store), cid, seq, 4000, ON)
    assert first.payload_hash == second.payload_hash
    assert first.manifest["included"] == second.manifest["included"]


@pytest.mark.parametrize(("value", "expected"), [("false", False), ("true", True)])
def test_a_policy_file_switches_the_ladder(value, expected):
    """``[selection] ladder = false`` in a policy file turns the ladder off; the switch is in the policy hash."""
    policy = loads_policy(f'[policy]\nname = "p"\nversion = "1"\n[selection]\nladder = {value}\n')
    assert policy.selection.ladder is expected
    assert policy.describe()["selection"]["ladder"] is expected


def test_a_one_line_profile_enters_with_its_head_and_tail(tau):
    """``assemble …task5-trial0 --window 4000 --output 500 --snapshot 31`` (the end of the tool exchange at 29-31).

    The 1,044-byte get_user_details answer enters as an excerpt; it used to show bytes 1024–1044 only
    (the last reservation ids), leaving out the name. It now shows the opening and the end.
    """
    cid = "gpt-4o-airline_tasks0-39-task5-trial0"
    asm = tau.assemble(
        cid,
        window_tokens=4000,
        output_tokens=500,
        margin_tokens=200,
        as_of_seq=31,
        now=datetime(2026, 1, 1, tzinfo=UTC),
        persist=False,
    )
    (item,) = [i for i in asm.manifest["included"] if i["ref"] == f"{cid}/6"]
    assert item["representation"] == "excerpt"
    spans = [(loc["byte_start"], loc["byte_end"]) for loc in item["locators"]]
    assert spans[0][0] == 0 and spans[-1][1] == 1044
    text = next(m["content"] for m in asm.payload["messages"] if m["role"] == "tool" and f"{cid}/6" in m["content"])
    assert '"first_name": "Omar", "last_name": "Rossi"' in text and '"QKRY03"]}' in text
