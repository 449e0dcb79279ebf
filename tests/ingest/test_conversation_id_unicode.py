"""Conversation ids are in Unicode NFC form: an id that differs from a stored one only in normalization ("café"
composed vs ``e`` + combining accent) is refused at every edge that creates a conversation, naming both forms, so
two ids that look identical never name two conversations; ids made from file names are made NFC; a lookup by a
non-NFC id says which form exists.

Ids are drawn from letters with and without combining marks (and their precomposed forms), so many draws share an
NFC form.
"""

from __future__ import annotations

import json
import unicodedata
from datetime import UTC, datetime

import pytest
from agents import Agent
from agents.run_config import CallModelData, ModelInputData
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from ctxledger import Ledger
from ctxledger.cli import app
from ctxledger.errors import InputError, RecordNotFound
from ctxledger.integrations.openai_agents import LedgerInputFilter

LETTERS = ["a", "e", "c", "o", "A", "é", "ç", "ö", "Å", "\u212b", "\u1100", "\u1161", "한"]
MARKS = ["\u0301", "\u0308", "\u0327", "\u030a"]
ids = st.lists(st.sampled_from(LETTERS) | st.sampled_from(LETTERS).map(lambda c: c + "\u0301"), min_size=1, max_size=4)
ids = ids.flatmap(lambda parts: st.sampled_from([*MARKS, ""]).map(lambda m: "".join(parts) + m))
EDGES = ["import", "recorder", "agents-filter"]
MESSAGES = [{"role": "user", "content": "hi"}]


def _create(ledger: Ledger, edge: str, cid: str) -> None:
    if edge == "import":
        ledger.import_messages(MESSAGES, conversation_id=cid)
    elif edge == "recorder":
        ledger.recorder(cid, clock=datetime(2025, 1, 1, tzinfo=UTC)).user("hi")
    else:  # an integration: every one records through ledger.recorder
        flt = LedgerInputFilter(ledger, conversation_id=cid, window_tokens=3000, output_tokens=300)
        item = {"type": "message", "role": "user", "content": "hi"}
        flt(
            CallModelData(
                model_data=ModelInputData(input=[item], instructions=None), agent=Agent(name="a"), context=None
            )
        )


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(steps=st.lists(st.tuples(st.sampled_from(EDGES), ids), min_size=1, max_size=6))
def test_no_two_conversations_share_an_nfc_form(steps: list[tuple[str, str]]) -> None:
    with Ledger.open("memory://") as ledger:
        for edge, cid in steps:
            composed = unicodedata.normalize("NFC", cid)
            stored_before = ledger.store.conversations("default")
            try:
                _create(ledger, edge, cid)
            except InputError as exc:
                assert exc.field == "conversation_id", exc
                assert cid != composed or (edge == "import" and cid in stored_before), (edge, cid, str(exc))
                if cid != composed:
                    assert repr(cid) in str(exc) and repr(composed) in str(exc) and "NFC" in str(exc)
                assert ledger.store.conversations("default") == stored_before  # nothing written
                continue
            assert cid == composed, (edge, cid)
        stored = ledger.store.conversations("default")
        assert all(unicodedata.is_normalized("NFC", c) for c in stored)
        assert len({unicodedata.normalize("NFC", c) for c in stored}) == len(stored)


def test_a_lookup_by_the_decomposed_form_names_the_stored_one() -> None:
    with Ledger.open("memory://") as ledger:
        ledger.import_messages(MESSAGES, conversation_id="café")
        with pytest.raises(RecordNotFound, match="NFC") as err:
            ledger.assemble(unicodedata.normalize("NFD", "café"), window_tokens=8000, output_tokens=500)
        assert repr("café") in str(err.value)


def test_the_cli_refuses_a_decomposed_id_and_imports_a_decomposed_file_name_as_nfc(tmp_path) -> None:
    decomposed = unicodedata.normalize("NFD", "café")
    folder = tmp_path / "chats"
    folder.mkdir()
    (folder / f"{decomposed}.json").write_text(json.dumps({"messages": MESSAGES}))
    db = f"sqlite:///{tmp_path}/ctx.db"
    runner = CliRunner()
    refused = runner.invoke(
        app, ["--db", db, "import", str(folder / f"{decomposed}.json"), "--conversation-id", decomposed]
    )
    assert refused.exit_code == 2, refused.output
    assert "conversation_id" in refused.output and "NFC" in refused.output
    imported = runner.invoke(app, ["--db", db, "import", str(folder)])
    assert imported.exit_code == 0, imported.output
    with Ledger.open(db) as ledger:
        assert ledger.store.conversations("default") == ["café"]
