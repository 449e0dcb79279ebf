"""Conversation ids that are empty, collide with a record id or nest with another conversation's id are refused
with an InputError naming ``conversation_id`` (CLI exit 2) and nothing is written; never a misleading "already
imported", never a silently invented id.

Ids are generated from a tiny alphabet of ``/``-separated segments (``a``, ``0``, ``main``, ``participant`` …)
so that they collide with each other and with the records the importer and the Recorder name ``<id>/<name>``.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from ctxledger import Ledger
from ctxledger.cli import app
from ctxledger.errors import InputError

SEGMENTS = st.sampled_from(["a", "b", "0", "1", "main", "participant", "user"])
ids = st.lists(SEGMENTS, min_size=1, max_size=3).map("/".join)
bad_ids = st.sampled_from(["", " ", "\t", " a", "a ", "a/", "/a", "a//b", "a\u200bb", "a\x00"])
MESSAGES = [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}]


def _create(ledger: Ledger, how: str, cid: str) -> None:
    if how == "import":
        ledger.import_messages(MESSAGES, conversation_id=cid)
    else:
        rec = ledger.recorder(cid, clock=datetime(2025, 1, 1, tzinfo=UTC))
        rec.user("hi")


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(steps=st.lists(st.tuples(st.sampled_from(["import", "recorder"]), ids | bad_ids), min_size=1, max_size=6))
def test_created_conversations_never_collide_or_nest(steps):
    with Ledger.open("memory://") as ledger:
        created: list[str] = []
        for how, cid in steps:
            before = {c: ledger.store.head_seq("default", c) for c in ledger.store.conversations("default")}
            record_ids = {r.id for c in before for r in ledger.store.records("default", c)}
            nests = any(c.startswith(cid + "/") or cid.startswith(c + "/") for c in created)
            expected_refusal = (
                not cid.strip() or cid != cid.strip() or "" in cid.split("/") or "\u200b" in cid or "\x00" in cid
                or (cid in record_ids and cid not in created)
                or (nests and cid not in created)
                or (how == "import" and cid in created)
            )  # fmt: skip
            try:
                _create(ledger, how, cid)
            except InputError as exc:
                assert exc.field == "conversation_id", exc
                assert expected_refusal, (how, cid, created, str(exc))
                if cid in record_ids and cid not in created:
                    assert "already the id of a" in str(exc) and "re-import" not in str(exc)
                after = {c: ledger.store.head_seq("default", c) for c in ledger.store.conversations("default")}
                assert after == before  # nothing written
                continue
            assert not expected_refusal, (how, cid, created)
            if cid not in created:
                created.append(cid)
        stored = ledger.store.conversations("default")
        assert sorted(stored) == sorted(created)
        for c in stored:
            assert not any(o.startswith(c + "/") for o in stored)
            others = {r.id for o in stored if o != c for r in ledger.store.records("default", o)}
            assert c not in others


@pytest.mark.parametrize("given_id", ["", " ", "a//b"])
def test_an_empty_conversation_id_option_is_refused_not_replaced_by_the_file_stem(tmp_path, given_id):
    path = tmp_path / "chat.json"
    path.write_text(json.dumps({"messages": MESSAGES}))
    db = f"sqlite:///{tmp_path}/ctx.db"
    result = CliRunner().invoke(app, ["--db", db, "import", str(path), "--conversation-id", given_id])
    assert result.exit_code == 2, result.output
    assert "conversation_id" in result.output
    with Ledger.open(db) as ledger:
        assert ledger.store.conversations("default") == []


def test_cli_import_of_an_id_that_is_a_record_id_says_so(tmp_path):
    first, second = tmp_path / "a.json", tmp_path / "second.json"
    first.write_text(json.dumps({"messages": MESSAGES}))
    second.write_text(json.dumps({"messages": MESSAGES}))
    db = f"sqlite:///{tmp_path}/ctx.db"
    runner = CliRunner()
    assert runner.invoke(app, ["--db", db, "import", str(first)]).exit_code == 0
    result = runner.invoke(app, ["--db", db, "import", str(second), "--conversation-id", "a/0"])
    assert result.exit_code == 2, result.output
    flat = " ".join(result.output.split())
    assert "already the id of a message record of conversation 'a'" in flat
    assert "re-import" not in flat
    with Ledger.open(db) as ledger:
        assert ledger.store.conversations("default") == ["a"]


@pytest.mark.parametrize("method", ["user", "assistant", "system", "tool_call", "memory", "branch", "participant"])
@pytest.mark.parametrize("name", ["", "  "])
def test_an_empty_name_is_refused_not_numbered(method, name):
    with Ledger.open("memory://") as ledger:
        rec = ledger.recorder("c", clock=datetime(2025, 1, 1, tzinfo=UTC))
        x = rec.tool_call("lookup", {}, "out")
        head = ledger.store.head_seq("default", "c")
        calls = {
            "user": lambda: rec.user("hi", name=name),
            "assistant": lambda: rec.assistant("hi", name=name),
            "system": lambda: rec.system("hi", name=name),
            "tool_call": lambda: rec.tool_call("lookup", {}, "out", name=name),
            "memory": lambda: rec.memory("a summary", sources=[x], name=name),
            "branch": lambda: rec.branch(name, fork_after=x),
            "participant": lambda: rec.participant(name),
        }
        with pytest.raises(InputError) as err:
            calls[method]()
        assert err.value.field == "name"
        assert ledger.store.head_seq("default", "c") == head


@settings(max_examples=30, deadline=None)
@given(
    cid=st.one_of(
        st.lists(SEGMENTS | st.sampled_from([".", ".."]), min_size=1, max_size=4)
        .map("/".join)
        .filter(lambda c: {".", ".."} & set(c.split("/"))),
        st.text("abc/", min_size=257, max_size=400).map(lambda t: "a" + t.replace("/", "-") + "z"),
    )
)
def test_dot_segments_and_overlong_ids_are_refused_by_name(cid):
    """``../x`` would be resolved away in the service's URL paths; a 5,000-character id is repeated in every record."""
    with Ledger.open("memory://") as ledger:
        with pytest.raises(InputError) as err:
            ledger.import_messages(MESSAGES, conversation_id=cid)
        assert "conversation_id" in str(err.value)
        assert ("'.'" in str(err.value)) or ("at most 256 characters" in str(err.value))
        assert ledger.store.conversations("default") == []
