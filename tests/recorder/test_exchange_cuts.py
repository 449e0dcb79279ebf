"""A snapshot or a fork point inside a tool exchange written whole is refused, naming the field; every other
point is valid and assembles for both providers.

Histories are generated from the Recorder's writes: single calls with their output (one transaction), pending
calls answered by a later ``tool_result`` (two transactions: the points in between were real states), parallel
calls with some outputs known, and plain turns. The expected refusals are computed from what was written
together, then every ``seq`` of the history is tried as ``as_of_seq`` and as a fork point.
"""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ctxledger import Ledger
from ctxledger.errors import InputError
from ctxledger.exchange_cuts import WRITTEN_WITH_CALL
from ctxledger.recorder import Recorder
from ctxledger.records import Branch

STEP = st.sampled_from(["user", "assistant", "whole", "pending", "answer", "parallel"])
APIS = (("openai-chat", "gpt-4o"), ("anthropic-messages", "claude-sonnet-4-5"))


def _record(rec: Recorder, steps: list[str], outputs: list[bool]) -> tuple[set[int], list[str]]:
    """Write ``steps``; return the seqs that cut an exchange written whole, and every record id in order."""
    cuts: set[int] = set()
    open_calls: list[str] = []
    for k, step in enumerate(steps):
        if step == "user" or (step == "answer" and not open_calls):
            rec.user(f"question {k}")
        elif step == "assistant":
            rec.assistant(f"answer {k}")
        elif step == "whole":
            x = rec.tool_call("lookup", {"k": k}, f"result {k}")
            cuts |= set(range(rec.seq(x.message), rec.seq(x.artifact)))
        elif step == "pending":
            x = rec.tool_call("lookup", {"k": k})
            cuts.add(rec.seq(x.message))  # the message without its call; after the call the wait was real
            open_calls.append(x.call)
        elif step == "answer":
            rec.tool_result(open_calls.pop(0), f"late result {k}")
        else:
            given_output = outputs[k % len(outputs)]
            calls = [{"tool": "lookup", "arguments": {"k": k, "i": i}} for i in range(2)]
            calls[0]["output"] = f"first {k}"
            if given_output:
                calls[1]["output"] = f"second {k}"
            p = rec.tool_calls(calls)
            last_whole = max(rec.seq(a) for a in p.artifacts.values())
            cuts |= set(range(rec.seq(p.message), last_whole))
            if not given_output:
                open_calls.append(p.calls[1])
    for call in open_calls:  # answer what is still open, so every call has a result somewhere
        rec.tool_result(call, "closing result")
    rec.user("what next?")
    return cuts, [r.id for r in sorted(rec.records.values(), key=lambda r: r.seq)]


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(steps=st.lists(STEP, min_size=1, max_size=7), outputs=st.lists(st.booleans(), min_size=1, max_size=3))
def test_snapshots_inside_a_whole_exchange_are_refused_and_others_assemble(steps, outputs):
    with Ledger.open("memory://") as ledger:
        rec = ledger.recorder("c", clock=datetime(2025, 1, 1, tzinfo=UTC))
        cuts, _ = _record(rec, steps, outputs)
        head = ledger.store.head_seq("default", "c")
        first_turn = min(r.seq for r in rec.records.values() if getattr(r, "role", None) is not None)
        for seq in range(first_turn, head + 1):
            for api, model in APIS:
                try:
                    asm = ledger.assemble("c", as_of_seq=seq, api=api, model=model, counter="chars/4", persist=False)
                except InputError as exc:
                    assert seq in cuts, (seq, str(exc))
                    assert exc.field == "as_of_seq" and "tool exchange" in str(exc)
                    continue
                assert seq not in cuts, seq
                stubs = [i["ref"] for i in asm.manifest["included"] if i.get("transform") == "status_stub"]
                for ref in stubs:  # a call shown unanswered really had no result yet at that point
                    answers = [r for r in rec.records.values() if getattr(r, "tool_call_id", None) == ref]
                    assert not any(a.meta.get(WRITTEN_WITH_CALL) for a in answers), (seq, ref)


@settings(max_examples=10, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(steps=st.lists(STEP, min_size=1, max_size=6), outputs=st.lists(st.booleans(), min_size=1, max_size=3))
def test_forks_inside_a_whole_exchange_are_refused_and_write_nothing(steps, outputs):
    with Ledger.open("memory://") as ledger:
        rec = ledger.recorder("c", clock=datetime(2025, 1, 1, tzinfo=UTC))
        cuts, ids = _record(rec, steps, outputs)
        for n, rid in enumerate(ids):
            seq = rec.seq(rid)
            head = ledger.store.head_seq("default", "c")
            rec.on(rec.main)
            try:
                branch = rec.branch(f"alt{n}", fork_after=rid, parent=rec.main)
            except InputError as exc:
                assert seq in cuts, (rid, seq, str(exc))
                assert exc.field == "fork_after" and "tool exchange" in str(exc)
                assert ledger.store.head_seq("default", "c") == head  # nothing written
                continue
            assert seq not in cuts, (rid, seq)
            rec.user("on the branch")
            for api, model in APIS:
                ledger.assemble("c", branch_id=branch, api=api, model=model, counter="chars/4", persist=False)


@pytest.fixture(params=["memory", "sqlite"])
def url(request, tmp_path) -> str:
    return "memory://" if request.param == "memory" else f"sqlite:///{tmp_path}/cuts.db"


def test_a_branch_record_appended_by_hand_inside_a_whole_exchange_is_refused(url):
    with Ledger.open(url) as ledger:
        rec = ledger.recorder("c", clock=datetime(2025, 1, 1, tzinfo=UTC))
        rec.user("q")
        x = rec.tool_call("lookup", {}, "out")
        branch = Branch(
            id="c/alt",
            tenant_id="default",
            conversation_id="c",
            branch_id="c/alt",
            created_at=datetime(2025, 1, 2, tzinfo=UTC),
            parent_branch_id=rec.main,
            fork_seq=rec.seq(x.call),
        )
        with pytest.raises(InputError) as err:
            ledger.append([branch])
        assert err.value.field == "fork_seq" and err.value.index == 0
        ledger.append([Branch(**{**_fields(branch), "fork_seq": rec.seq(x.artifact)})])


def test_a_snapshot_inside_an_imported_exchange_is_refused(url):
    """An import is one transaction: its calls and results were written together."""
    with Ledger.open(url) as ledger:
        call = {"id": "call_1", "type": "function", "function": {"name": "lookup", "arguments": "{}"}}
        ledger.import_messages(
            [
                {"role": "user", "content": "q"},
                {"role": "assistant", "content": None, "tool_calls": [call]},
                {"role": "tool", "tool_call_id": "call_1", "content": "42"},
                {"role": "user", "content": "and?"},
            ],
            conversation_id="c",
        )
        seqs = {r.id: r.seq for r in ledger.store.records("default", "c")}
        with pytest.raises(InputError) as err:
            ledger.assemble("c", as_of_seq=seqs["c/2"], counter="chars/4")
        assert err.value.field == "as_of_seq"
        assert f"use {seqs['c/3']} (after the exchange)" in str(err.value)
        ledger.assemble("c", as_of_seq=seqs["c/3"], counter="chars/4")


def _fields(record: Branch) -> dict:
    return {name: getattr(record, name) for name in record.__dataclass_fields__ if name != "kind"}
