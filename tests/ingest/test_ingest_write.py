"""Writing a parsed batch: blobs first, one append, re-imports refused, progress reported."""

from __future__ import annotations

import io
from collections.abc import Sequence
from pathlib import Path

import pytest
from rich.console import Console

from ctxledger.errors import InputError, StoreError
from ctxledger.ingest import ImportBatch, parse_file, rich_progress, write_batch
from ctxledger.records import Record, ToolArtifact
from ctxledger.testing import MemoryStore


class CountingStore(MemoryStore):
    """A MemoryStore that counts append calls and can be told to fail them."""

    def __init__(self, *, fail: bool = False) -> None:
        """Start empty; with ``fail`` every append raises StoreError."""
        super().__init__()
        self.appends: list[int] = []
        self.fail = fail

    def append(self, records: Sequence[Record]) -> list[Record]:
        """Count the call, then append (or fail)."""
        self.appends.append(len(records))
        if self.fail:
            raise StoreError("disk full")
        return super().append(records)


@pytest.fixture(scope="module")
def tau_slice(tau_path: Path, tmp_path_factory: pytest.TempPathFactory) -> ImportBatch:
    """The first five tau-bench trajectories, as their own file, parsed."""
    import json

    raw = json.loads(tau_path.read_text(encoding="utf-8"))[:5]
    path = tmp_path_factory.mktemp("tau") / "tau5.json"
    path.write_text(json.dumps(raw), encoding="utf-8")
    return parse_file(path)


def test_write_batch_stores_blobs_and_appends_once(tau_slice: ImportBatch) -> None:
    """Five trajectories go in with one append; every artifact's bytes are in the blob store."""
    store = CountingStore()
    result = write_batch(store, tau_slice)
    assert store.appends == [tau_slice.records]
    assert result.conversation_ids == tuple(c.conversation_id for c in tau_slice.conversations)
    assert (result.messages, result.tool_calls, result.artifacts) == (
        tau_slice.messages,
        tau_slice.tool_calls,
        tau_slice.artifacts,
    )
    for record in result.records:
        if isinstance(record, ToolArtifact):
            assert len(store.blobs.get(record.sha256)) == record.size_bytes
    first = tau_slice.conversations[0]
    stored = store.records("default", first.conversation_id)
    assert [r.id for r in stored] == [r.id for r in first.records]
    assert [r.seq for r in stored] == list(range(1, len(first.records) + 1))


def test_failed_append_leaves_no_records(tau_slice: ImportBatch) -> None:
    """When the one append fails, no record of the import exists (only unreferenced blobs may)."""
    store = CountingStore(fail=True)
    with pytest.raises(StoreError):
        write_batch(store, tau_slice)
    assert store.appends == [tau_slice.records]
    assert store.conversations("default") == []


def test_reimport_is_refused_before_any_write(tau_slice: ImportBatch) -> None:
    """Importing the same source again is an InputError raised before blobs or records are written."""
    store = CountingStore()
    write_batch(store, tau_slice)
    blobs_before = len(store.blobs)
    with pytest.raises(InputError, match="already"):
        write_batch(store, tau_slice)
    assert store.appends == [tau_slice.records] and len(store.blobs) == blobs_before


def test_another_tenant_imports_the_same_source_under_the_same_ids(cases_dir: Path) -> None:
    """Ids are unique per tenant: a second tenant's copy keeps the ids; a re-import within a tenant is refused."""
    store = MemoryStore()
    first = write_batch(store, parse_file(cases_dir / "B01.json", tenant_id="a"))
    second = write_batch(store, parse_file(cases_dir / "B01.json", tenant_id="b"))
    assert [r.id for r in second.records] == [r.id for r in first.records]
    assert store.conversations("a") == store.conversations("b") == ["B01"]
    assert {r.tenant_id for r in store.records("b", "B01")} == {"b"}
    with pytest.raises(InputError, match="already in tenant 'b'") as refused:
        write_batch(store, parse_file(cases_dir / "B01.json", tenant_id="b"))
    assert "'a'" not in str(refused.value)
    assert store.records("a", "B01") == first.records


def test_progress_reports_each_trajectory(tau_path: Path) -> None:
    """on_progress sees done climb to the total, once per trajectory."""
    seen: list[tuple[int, int]] = []
    parse_file(tau_path, on_progress=lambda done, total: seen.append((done, total)))
    assert seen == [(i, 160) for i in range(1, 161)]


def test_rich_progress_drives_a_bar(cases_dir: Path) -> None:
    """rich_progress yields a callback that advances a rich bar to completion."""
    out = io.StringIO()
    with rich_progress("B09", console=Console(file=out, width=80), transient=False) as on_progress:
        batch = parse_file(cases_dir / "B09.json", on_progress=on_progress)
    assert batch.messages == 10
    assert "B09" in out.getvalue() and "15/15" in out.getvalue()


def test_batch_and_result_reprs_give_counts_and_ids_not_every_record(tau_path: Path) -> None:
    """Printing an import (in a REPL or a log) shows counts and conversation ids, never thousands of records."""
    batch = parse_file(tau_path)
    result = write_batch(MemoryStore(), batch)
    text = repr(result)
    assert text.startswith("ImportResult(conversation_ids=('gpt-4o-airline_tasks0-39-task0-trial0', ")
    assert "… 150 more)" in text
    counts = f"records={len(result.records)}, messages={result.messages}, tool_calls={result.tool_calls}"
    assert f"{counts}, artifacts={result.artifacts}, blobs={result.blobs})" in text
    assert len(text) < 1000 and "Message(" not in text
    assert repr(batch).startswith(f"ImportBatch(source={str(tau_path)!r}, format='tau-bench', conversations=(")
    assert f"records={batch.records}, messages={batch.messages}" in repr(batch) and len(repr(batch)) < 1200
