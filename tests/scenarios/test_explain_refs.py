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
