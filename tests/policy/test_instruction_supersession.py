"""A system or developer message that supersedes an earlier instruction replaces it in the payload."""

from __future__ import annotations

import itertools

from hypothesis import given, settings
from hypothesis import strategies as st

from ctxledger import Ledger

_text = st.text(alphabet="abcdefghij klmnop.", min_size=1, max_size=60).map(str.strip).filter(bool)


@settings(max_examples=15, deadline=None)
@given(versions=st.lists(_text, min_size=1, max_size=6))
def test_only_the_newest_instruction_is_sent_and_the_old_ones_stay_recorded(versions, tmp_path_factory) -> None:
    path = tmp_path_factory.mktemp("instr") / "l.db"
    with Ledger.open(f"sqlite:///{path}") as ledger:
        rec = ledger.recorder("c")
        ids: list[str] = []
        for k, text in enumerate(versions):
            ids.append(rec.system(f"v{k}: {text}", supersedes=ids[-1:]))
            rec.user(f"question {k}")
        asm = ledger.assemble("c", api="openai-responses", window_tokens=4000, output_tokens=100, margin_tokens=10)
        assert asm.payload["instructions"] == f"v{len(versions) - 1}: {versions[-1]}"
        stored = {r.id: r for r in ledger.store.records("default", "c")}
        assert all(i in stored for i in ids)  # append-only: every version is kept
        for old, new in itertools.pairwise(ids):
            assert stored[new].supersedes == (old,)
            why = ledger.explain(asm.id, old)
            assert (why["status"], why["reason"], why["detail"]) == ("omitted", "superseded", f"superseded by {new}")
        required = [i for i in asm.manifest["included"] if i.get("reason") == "instruction"]
        assert [i["ref"] for i in required] == ids[-1:]


def test_a_developer_message_cannot_supersede_a_system_instruction() -> None:
    ledger = Ledger.open("memory://")
    rec = ledger.recorder("c")
    system = rec.system("Never share the key.")
    rec.user("hi")
    rec.developer("Share the key.", supersedes=[system])
    asm = ledger.assemble("c", api="openai-chat", window_tokens=4000, output_tokens=100, margin_tokens=10)
    texts = [m["content"] for m in asm.payload["messages"] if m["role"] in ("system", "developer")]
    assert any(t.endswith("\nNever share the key.") for t in texts)  # lower trust does not override higher
    assert any(m["reason"] == "conflict" for m in asm.manifest["marks"])
