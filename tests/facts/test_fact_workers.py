"""A large batch's facts computed with worker processes are those of one process, byte for byte and in order."""

from __future__ import annotations

import pytest

import ctxledger._fact_workers as fact_workers
from ctxledger import facts
from ctxledger.ledger import Ledger
from ctxledger.records import Record
from ctxledger.scenarios._graph import GraphBuilder
from ctxledger.scenarios.catalog import SCENARIOS
from ctxledger.testing import MemoryStore


def _scenario_batch() -> tuple[list[Record], MemoryStore]:
    """Every record of every scenario graph (secrets, instructions, memories, compactions, tool outputs)."""
    records: list[Record] = []
    stores = []
    for scenario in SCENARIOS:
        ledger = Ledger(MemoryStore(), policy=scenario.policy() if scenario.policy else None)
        builder = GraphBuilder(ledger, scenario.name)
        scenario.build(builder)
        records += ledger.store.records("default", builder.conversation_id)
        stores.append(ledger.store)
    blobs = MemoryStore().blobs
    for store in stores:
        for rec in records:
            sha = getattr(rec, "sha256", None)
            if sha and store.blobs.exists(sha):
                blobs.put(store.blobs.get(sha))
    holder = MemoryStore(blobs)
    return records, holder


@pytest.fixture(scope="module")
def batch() -> tuple[list[Record], MemoryStore]:
    return _scenario_batch()


def _encoded(records: list[Record], store: MemoryStore) -> list[tuple[str, bytes]]:
    return [(f.record_id, facts.encode_facts(f)) for f in facts.compute_facts(records, store.blobs.get)]


@pytest.fixture
def small_chunks(monkeypatch: pytest.MonkeyPatch) -> None:
    """Chunks of 7 records and workers from 3 chunks on, so a test batch takes the worker path."""
    monkeypatch.setattr(facts, "CHUNK", 7)
    monkeypatch.setattr(facts, "PARALLEL_RECORDS", 21)


def test_workers_give_the_facts_of_one_process(batch, small_chunks, monkeypatch: pytest.MonkeyPatch) -> None:
    """Two and three processes store what one does, for every record of every scenario, in record order."""
    records, store = batch
    assert len(records) > 100
    monkeypatch.setenv(fact_workers.WORKERS_ENV, "1")
    alone = _encoded(records, store)
    assert [rid for rid, _ in alone] == [r.id for r in records]
    for workers in ("2", "3"):
        monkeypatch.setenv(fact_workers.WORKERS_ENV, workers)
        spent = fact_workers.worker_cpu_seconds()
        assert _encoded(records, store) == alone
        assert fact_workers.worker_cpu_seconds() > spent  # the workers did compute (and reported their CPU)


def test_a_worker_that_dies_or_cannot_start_leaves_its_chunks_to_the_caller(
    batch, small_chunks, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A worker that exits at once, or an interpreter that is not there, changes nothing in the result."""
    records, store = batch
    monkeypatch.setenv(fact_workers.WORKERS_ENV, "1")
    alone = _encoded(records, store)
    monkeypatch.setenv(fact_workers.WORKERS_ENV, "2")
    monkeypatch.setattr(fact_workers, "_BOOT", "raise SystemExit(3)  # {paths} {root}")
    assert _encoded(records, store) == alone
    monkeypatch.setattr(fact_workers.sys, "executable", "/nonexistent/python")
    assert _encoded(records, store) == alone


def test_a_detector_error_in_the_caller_stops_the_workers_and_is_raised(
    batch, small_chunks, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An error of the detectors is raised by compute_facts (the append then writes nothing); no worker is left."""
    records, store = batch
    monkeypatch.setenv(fact_workers.WORKERS_ENV, "2")
    calls = []

    def failing(texts):
        calls.append(len(texts))
        raise ValueError("detector failed")

    monkeypatch.setattr(facts, "_detect", failing)
    with pytest.raises(ValueError, match="detector failed"):
        facts.compute_facts(records, store.blobs.get)
    assert calls


def test_small_batches_stay_in_the_calling_process(batch, monkeypatch: pytest.MonkeyPatch) -> None:
    """Below the threshold no worker starts."""
    records, store = batch
    monkeypatch.setenv(fact_workers.WORKERS_ENV, "2")
    started = []
    monkeypatch.setattr(fact_workers, "_Worker", lambda: started.append(1))
    facts.compute_facts(records[: facts.PARALLEL_RECORDS - 1], store.blobs.get)
    assert started == []


@pytest.mark.parametrize(("idle", "expected"), [(2.0, 2), (1.6, 2), (1.4, 1), (1.0, 1), (0.2, 1)])
def test_workers_start_only_for_idle_cores(monkeypatch: pytest.MonkeyPatch, idle: float, expected: int) -> None:
    """On two cores: a worker while a core besides this process's is idle, none while other programs use it."""
    monkeypatch.delenv(fact_workers.WORKERS_ENV, raising=False)
    monkeypatch.setattr(fact_workers.os, "sched_getaffinity", lambda pid: {0, 1}, raising=False)
    monkeypatch.setattr(fact_workers, "idle_cores", lambda cores: idle)
    assert fact_workers.usable_workers() == expected
    monkeypatch.setenv(fact_workers.WORKERS_ENV, "3")
    assert fact_workers.usable_workers() == 3


def test_idle_cores_is_between_none_and_all() -> None:
    """The measured idle share of the processors is a number of cores this machine has."""
    assert 0.0 <= fact_workers.idle_cores(2) <= 2.0


def test_batched_blob_reads_give_the_facts_of_reading_one_by_one(tmp_path, batch, small_chunks, monkeypatch) -> None:
    """``read_blobs`` (a blob folder's ``get_many``) changes nothing, a missing or damaged blob included."""
    from ctxledger.store.blobs import LocalBlobStore

    records, store = batch
    monkeypatch.setenv(fact_workers.WORKERS_ENV, "1")
    folder = LocalBlobStore(tmp_path / "blobs")
    shas = [r.sha256 for r in records if getattr(r, "sha256", None) and store.blobs.exists(r.sha256)]
    for sha in shas[1:]:  # the first result's bytes are missing
        folder.put(store.blobs.get(sha))
    damaged = folder.path(shas[2])
    damaged.parent.mkdir(parents=True, exist_ok=True)
    damaged.write_bytes(b"not the bytes it is named for")  # a file is read before the pack
    one_by_one = [facts.encode_facts(f) for f in facts.compute_facts(records, folder.get)]
    batched = [facts.encode_facts(f) for f in facts.compute_facts(records, folder.get, read_blobs=folder.get_many)]
    assert batched == one_by_one
    assert any(b'"raw_readable":false' in body for body in batched)
