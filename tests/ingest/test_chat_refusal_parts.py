"""An OpenAI chat assistant message's ``refusal`` parts are kept as text parts, in order (as Responses imports them)."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from ctxledger.ledger import Ledger
from ctxledger.records import Message, Role

_texts = st.text(st.characters(codec="utf-8", exclude_categories=("Cs", "Cc")), min_size=1, max_size=30)
_parts = st.lists(
    st.one_of(
        _texts.map(lambda t: {"type": "text", "text": t}),
        _texts.map(lambda t: {"type": "refusal", "refusal": t}),
    ),
    min_size=1,
    max_size=4,
)


@settings(max_examples=25, deadline=None)
@given(_parts)
def test_refusal_parts_are_stored_as_text_parts_in_order(parts: list[dict[str, str]]) -> None:
    ledger = Ledger.open("memory://")
    ledger.import_messages([{"role": "user", "content": "Help?"}, {"role": "assistant", "content": parts}])
    (conv,) = ledger.conversations()
    records = ledger.store.records("default", conv.id)
    (said,) = [r for r in records if isinstance(r, Message) and r.role is Role.ASSISTANT]
    wanted = [{"type": "text", "text": p.get("text", p.get("refusal"))} for p in parts]
    assert [dict(p) for p in said.content] == wanted
    assert ledger.assemble(conv.id, window_tokens=8_000).input_tokens > 0


@settings(max_examples=15, deadline=None)
@given(_texts)
def test_a_refusal_with_no_content_is_stored_as_the_assistants_text(refusal: str) -> None:
    ledger = Ledger.open("memory://")
    said = {"role": "assistant", "content": None, "refusal": refusal}
    ledger.import_messages([{"role": "user", "content": "Help?"}, said], conversation_id="c")
    (stored,) = [r for r in ledger.store.records("default", "c") if isinstance(r, Message) and r.role is Role.ASSISTANT]
    assert stored.content == refusal
    response = {
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "model": "gpt-4o",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": None, "refusal": refusal}}],
    }
    rec = ledger.recorder("c")
    rec.record_response(response)
    last = ledger.store.records("default", "c")[-1]
    assert isinstance(last, Message) and last.content == refusal
