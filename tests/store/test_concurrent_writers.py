"""Several writers on one conversation: real processes on SQLite and PostgreSQL (when configured).

The store gives every record its own ``seq`` under its write lock; a Recorder whose self-chosen number was
stored first by another writer renumbers and writes again, while a taken ``name=`` stays an error.
"""

from __future__ import annotations

import logging
import multiprocessing
import threading
import traceback
from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import create_engine, text
from store_backends import BACKENDS

from ctxledger.errors import DuplicateRecordId
from ctxledger.ledger import Ledger
from ctxledger.records import Message, Role
from ctxledger.store import open_store
from ctxledger.store.schema import metadata

WRITERS = 3
PER_WRITER = 40  # writes per process: every fifth a tool exchange (three records), the rest user messages
_FORK = multiprocessing.get_context("fork")


@pytest.fixture(params=[b for b in BACKENDS if b != "memory"])
def shared_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """A migrated, empty store that several processes can open: a SQLite file, or the PostgreSQL test db."""
    sqlite_ = request.param == "sqlite"
    url = f"sqlite:///{tmp_path}/db/shared.db" if sqlite_ else request.getfixturevalue("postgres_url")
    open_store(url, blobs_dir=tmp_path / "blobs").close()  # migrate once, before the writers start
    yield url
    if request.param == "postgres":
        engine = create_engine(url)
        with engine.begin() as conn:
            conn.execute(text(f"TRUNCATE {', '.join(t.name for t in metadata.sorted_tables)}"))
        engine.dispose()


def _run(target, *args) -> list[str]:  # target: a module-level worker function
    """Run ``target(*args, writer, errors)`` in WRITERS forked processes at once; the errors they reported."""
    errors = _FORK.Queue()
    start = _FORK.Barrier(WRITERS)
    procs = [_FORK.Process(target=target, args=(*args, w, start, errors)) for w in range(WRITERS)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(timeout=300)
    found = []
    while not errors.empty():
        found.append(errors.get())
    assert all(p.exitcode == 0 for p in procs), (found, [p.exitcode for p in procs])
    return found


def _record(url: str, blobs: str, writer: int, start, errors) -> None:
    try:
        ledger = Ledger(open_store(url, blobs_dir=blobs, migrate=False))
        start.wait()
        rec = ledger.recorder("shared")  # every process may be the one that creates it
        for i in range(PER_WRITER):
            if i % 5 == 0:
                rec.tool_call("probe", {"writer": writer, "i": i}, f"writer {writer} output {i}")
            else:
                rec.user(f"writer {writer} message {i}")
        ledger.close()
    except Exception:  # reported to the parent, which fails the test
        errors.put(traceback.format_exc())


def _append(url: str, blobs: str, writer: int, start, errors) -> None:
    try:
        ledger = Ledger(open_store(url, blobs_dir=blobs, migrate=False))
        start.wait()
        for i in range(PER_WRITER):
            ledger.append([_message(f"shared/w{writer}-{i}", f"writer {writer} message {i}")])
        ledger.close()
    except Exception:
        errors.put(traceback.format_exc())


def _message(rid: str, text_: str) -> Message:
    return Message(
        id=rid, tenant_id="default", conversation_id="shared", branch_id="shared/main", role=Role.USER, content=text_
    )


def test_store_assigns_unique_seqs_to_concurrent_appenders(shared_url, tmp_path):
    """Processes appending to one conversation at once get distinct, gap-free seqs in their own order."""
    ledger = Ledger(open_store(shared_url, blobs_dir=tmp_path / "blobs"))
    ledger.recorder("shared")  # the conversation (seq 1) and its main branch (seq 2)
    assert _run(_append, shared_url, str(tmp_path / "blobs")) == []
    stored = ledger.store.records("default", "shared")
    seqs = [r.seq for r in stored]
    assert seqs == list(range(1, 3 + WRITERS * PER_WRITER))
    assert ledger.store.head_seq("default", "shared") == 2 + WRITERS * PER_WRITER
    for w in range(WRITERS):
        mine = [r.content for r in stored if r.id.startswith(f"shared/w{w}-")]
        assert mine == [f"writer {w} message {i}" for i in range(PER_WRITER)]
    ledger.close()


def test_recorders_in_several_processes_all_succeed(shared_url, tmp_path):
    """Every process's recorder writes all its records into one conversation (ids renumbered on a clash)."""
    assert _run(_record, shared_url, str(tmp_path / "blobs")) == []
    ledger = Ledger(open_store(shared_url, blobs_dir=tmp_path / "blobs"))
    stored = ledger.store.records("default", "shared")
    exchanges = PER_WRITER // 5
    assert len(stored) == 2 + WRITERS * (PER_WRITER - exchanges + 3 * exchanges)
    assert len({r.seq for r in stored}) == len(stored) and len({r.id for r in stored}) == len(stored)
    assert sum(r.kind.value == "conversation" for r in stored) == 1
    for w in range(WRITERS):
        texts = [r.content for r in stored if isinstance(r, Message) and (r.content or "").startswith(f"writer {w} ")]
        assert texts == [f"writer {w} message {i}" for i in range(PER_WRITER) if i % 5]
    # each exchange stays whole: its call names its own message, its artifact its own call
    by_id = {r.id: r for r in stored}
    calls = [r for r in stored if r.kind.value == "tool_call"]
    arts = [r for r in stored if r.kind.value == "tool_artifact"]
    assert len(calls) == len(arts) == WRITERS * exchanges
    assert all(by_id[a.tool_call_id].call_id == a.call_id for a in arts)
    assert all(by_id[c.message_id].role is Role.ASSISTANT for c in calls)
    ledger.close()


def test_a_stale_recorder_renumbers_but_a_taken_name_stays_an_error(store):
    """Two recorders of one conversation in one process: numbers move on, names do not."""
    ledger = Ledger(store)
    first, second = ledger.recorder("c"), ledger.recorder("c")
    assert first.user("one") == "c/0"
    assert second.user("two") == "c/1"  # c/0 was taken by the other recorder: re-read, next number
    ex = first.tool_call("ls", {}, "a\nb\n")
    assert (ex.message, ex.call, ex.artifact) == ("c/2", "c/3", "c/4")
    assert [r.content for r in store.records("default", "c") if isinstance(r, Message)] == ["one", "two", None]
    assert second.refresh() == 3 and second.seq(ex.artifact) == first.seq(ex.artifact)
    first.user("named", name="plan")
    with pytest.raises(DuplicateRecordId) as err:
        second.user("again", name="plan")  # this recorder has not seen c/plan yet: the store refuses it
    assert err.value.record_id == "c/plan" and err.value.field == "id"


def test_concurrent_recorders_leave_nothing_on_stderr(shared_url, tmp_path, caplog, capfd, recwarn):
    """Threads racing to create one conversation and for its numbers: no driver warning on stderr or in the log.

    On PostgreSQL, psycopg runs executemany in pipeline mode; a statement failing there (a key taken by the
    other writer) used to be reported as "error ignored terminating <psycopg.Pipeline …>: pipeline aborted".
    """
    caplog.set_level(logging.DEBUG, logger="psycopg")
    errors: list[str] = []

    def write(writer: int) -> None:
        try:
            ledger = Ledger(open_store(shared_url, blobs_dir=tmp_path / "blobs", migrate=False))
            start.wait()
            rec = ledger.recorder("raced")
            for i in range(PER_WRITER // 2):
                if i % 5 == 0:
                    rec.tool_call("probe", {"writer": writer, "i": i}, f"writer {writer} output {i}")
                else:
                    rec.user(f"writer {writer} message {i}")
            ledger.close()
        except Exception:
            errors.append(traceback.format_exc())

    start = threading.Barrier(WRITERS + 1)
    threads = [threading.Thread(target=write, args=(w,)) for w in range(WRITERS + 1)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=300)
    assert errors == []
    with Ledger(open_store(shared_url, blobs_dir=tmp_path / "blobs", migrate=False)) as ledger:
        stored = ledger.store.records("default", "raced")
    assert sum(r.kind.value == "conversation" for r in stored) == 1
    assert len(stored) == 2 + (WRITERS + 1) * (PER_WRITER // 2 + 2 * (PER_WRITER // 10))
    driver = [r.getMessage() for r in caplog.records if r.name.startswith("psycopg") and r.levelno >= logging.WARNING]
    assert driver == []
    assert [str(w.message) for w in recwarn] == []
    assert "pipeline" not in capfd.readouterr().err.lower()
