"""``Ledger.explain`` reads its ``ref`` as the CLI and the service do, and refuses a ref that is no id string."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ctxledger.errors import InputError, RecordNotFound
from ctxledger.ledger import Ledger
from ctxledger.testing import MemoryStore


@pytest.fixture(scope="module")
def summary() -> tuple[Ledger, Any]:
    ledger = Ledger(MemoryStore())
    messages = [{"role": "system", "content": "Be brief."}]
    messages += [{"role": "user", "content": f"Turn {i} " + "words " * 200} for i in range(30)]
    ledger.import_messages(messages, conversation_id="refs")
    asm = ledger.assemble("refs", window_tokens=2_000, output_tokens=200, margin_tokens=50)
    return ledger, asm


def test_a_number_within_the_conversation_is_completed_like_the_cli_and_service_do(summary: tuple) -> None:
    ledger, asm = summary
    conv = asm.manifest["conversation_id"]
    for entry in (asm.manifest["omitted"][0], asm.manifest["included"][-1]):
        short = entry["ref"].removeprefix(f"{conv}/")
        assert short != entry["ref"]
        assert ledger.explain(asm.id, short) == ledger.explain(asm.id, entry["ref"])


def test_a_ref_naming_no_record_is_refused_before_replaying(summary: tuple, monkeypatch: pytest.MonkeyPatch) -> None:
    ledger, asm = summary
    monkeypatch.setattr(Ledger, "replay", lambda *a, **k: pytest.fail("replayed for a ref that names no record"))
    with pytest.raises(RecordNotFound, match="among the records of conversation"):
        ledger.explain(asm.id, "999")


@settings(max_examples=25, deadline=None)
@given(st.one_of(st.none(), st.integers(), st.floats(allow_nan=False), st.lists(st.text()), st.just(""), st.just(" ")))
def test_a_ref_that_is_no_id_string_names_the_argument(summary: tuple, ref: Any) -> None:
    ledger, asm = summary
    with pytest.raises(InputError) as caught:
        ledger.explain(asm.id, ref)
    assert caught.value.field == "ref" and "record id string" in caught.value.problem



@pytest.mark.parametrize("position", [0, 3, 5])
def test_a_ref_to_another_conversation_is_named_as_given_with_its_conversation(position: int) -> None:
    ledger = Ledger(MemoryStore())
    ledger.import_messages([{"role": "user", "content": f"turn {i}"} for i in range(6)], conversation_id="mine")
    ledger.import_messages([{"role": "user", "content": f"other {i}"} for i in range(6)], conversation_id="other")
    asm = ledger.assemble("mine", window_tokens=2_000, output_tokens=200, margin_tokens=50)
    ref = [r.id for r in ledger.store.records("default", "other")][position]
    with pytest.raises(RecordNotFound) as caught:
        ledger.explain(asm.id, ref)
    assert caught.value.record_id == ref and "it is a record of conversation other" in str(caught.value)


@settings(max_examples=15, deadline=None)
@given(
    call_ids=st.lists(
        st.sampled_from(["call_a", "call_a_2", "call.b", "call_b", "call:c", "x"]), min_size=1, max_size=6
    )
)
def test_a_tool_call_id_as_the_payload_shows_it_names_its_tool_call(call_ids: list[str]) -> None:
    """Repeated or unsafe provider ids are renamed in the payload (``call_a`` → ``call_a_2``); each such id names
    the tool call the payload sent under it."""
    ledger = Ledger(MemoryStore())
    rec = ledger.recorder("calls")
    rec.system("Look orders up.")
    for i, call_id in enumerate(call_ids):
        rec.user(f"Look up order {i}.")
        rec.tool_call("lookup", {"order": i}, f'{{"order": {i}}}', call_id=call_id)
    asm = ledger.assemble("calls", window_tokens=16_000, output_tokens=200, margin_tokens=50)
    sent = [c["id"] for m in asm.payload["messages"] for c in m.get("tool_calls") or ()]
    calls = [e["ref"] for e in asm.manifest["included"] if e["kind"] == "tool_call"]
    assert len(sent) == len(calls) == len(call_ids)
    for shown, ref in zip(sent, calls, strict=True):
        why = ledger.explain(asm.id, shown)
        assert (why["ref"], why["status"]) == (ref, "included")
