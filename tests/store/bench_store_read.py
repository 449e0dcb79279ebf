"""Read-speed benchmark of the stores on real records (not collected by pytest).

Builds one conversation of N records by cycling the history records of the real mini-swe-agent
trajectories (messages, tool calls, artifacts, model runs), appends them, then times reading them all
back with ``GraphStore.records``::

    python tests/store/bench_store_read.py sqlite 10000 100000
    CTXLEDGER_TEST_POSTGRES_URL=postgresql+psycopg://postgres@127.0.0.1:5432/test \
        python tests/store/bench_store_read.py postgres 10000 100000
"""

from __future__ import annotations

import dataclasses
import functools
import os
import sys
import tempfile
import time
import timeit
import uuid
from itertools import cycle, islice
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from store_realdata import trajectory_files, trajectory_records

from ctxledger.records import Branch, Conversation, Participant, Record, ToolArtifact
from ctxledger.store import open_store
from ctxledger.store.base import BlobStore
from ctxledger.testing import MemoryBlobStore

DATA_DIR = Path(os.environ.get("CTXLEDGER_SHARED_DIR", Path(__file__).resolve().parents[3] / "shared")) / "data"
POSTGRES_URL = os.environ.get("CTXLEDGER_TEST_POSTGRES_URL")


@functools.cache
def _history(tenant: str) -> tuple[tuple[Record, ...], MemoryBlobStore]:
    """The history records (no Conversation/Branch/Participant) of every real trajectory, and their raw outputs."""
    blobs = MemoryBlobStore()
    records = tuple(
        r
        for path in trajectory_files(DATA_DIR)
        for r in trajectory_records(path, tenant, blobs=blobs)
        if not isinstance(r, Conversation | Branch | Participant)
    )
    return records, blobs


def big_conversation(n: int, tenant: str, conv: str, blobs: BlobStore) -> list[Record]:
    """A Conversation, its main Branch, then ``n - 2`` real history records re-homed into it.

    The raw outputs of its tool artifacts are put into ``blobs`` (a store refuses artifacts without them).
    """
    history, raw = _history(tenant)
    head: list[Record] = [
        Conversation(id=conv, tenant_id=tenant, conversation_id=conv, branch_id=f"{conv}/main"),
        Branch(id=f"{conv}/main", tenant_id=tenant, conversation_id=conv, branch_id=f"{conv}/main"),
    ]
    body = [
        dataclasses.replace(r, id=f"{conv}/{i}", conversation_id=conv, branch_id=f"{conv}/main")
        for i, r in enumerate(islice(cycle(history), n - 2))
    ]
    for sha in {r.sha256 for r in body if isinstance(r, ToolArtifact)}:
        blobs.put(raw.get(sha))
    return head + body


def measure(url: str, n: int) -> tuple[float, float, float]:
    """Append ``n`` records to a fresh store; return (append s, read wall-clock s, read CPU s of this process)."""
    store = open_store(url, blobs_dir=tempfile.mkdtemp())
    conv = f"bench-{uuid.uuid4().hex[:8]}"
    records = big_conversation(n, "bench", conv, store.blobs)
    t0 = time.perf_counter()
    store.append(records)
    t1, cpu1 = time.perf_counter(), time.process_time()
    back = store.records("bench", conv)
    t2, cpu2 = time.perf_counter(), time.process_time()
    assert len(back) == n and back[-1] == records[-1].with_seq(n)
    store.delete_tenant("bench")
    store.close()
    return t1 - t0, t2 - t1, cpu2 - cpu1


def main(argv: list[str]) -> None:
    """``bench_store_read.py sqlite|postgres|memory N [N …]``."""
    backend, sizes = argv[0], [int(a) for a in argv[1:]]
    for n in sizes:
        if backend == "sqlite":
            url = f"sqlite:///{tempfile.mkdtemp()}/bench.db"
        elif backend == "postgres":
            assert POSTGRES_URL, "set CTXLEDGER_TEST_POSTGRES_URL"
            url = POSTGRES_URL
        else:
            url = "memory://"
        append_s, read_s, read_cpu = measure(url, n)
        print(
            f"{backend:8} n={n:>7}: append {append_s:6.2f} s, read {read_s:6.3f} s wall "
            f"({read_cpu:6.3f} s CPU here; {n / read_s:,.0f} records/s); calibration "
            f"sum(range(1000)) = {_calibration_us():.1f} us"
        )


def _calibration_us() -> float:
    """Microseconds for ``sum(range(1000))`` now (about 8-10 on an idle machine), to judge the load."""
    return min(timeit.repeat("sum(range(1000))", number=2000, repeat=5)) / 2000 * 1e6


if __name__ == "__main__":
    main(sys.argv[1:])
