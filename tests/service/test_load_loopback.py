"""A bounded load test on loopback: two `ctxledger serve` processes on one PostgreSQL store, several clients.

Each client appends numbered user turns (to its own conversation and to one conversation all clients
share) through both servers in turn, and assembles its own conversation now and then. Afterwards the
store must hold every turn exactly once, each client's turns in the order it sent them. Latencies
(p50/p95 per operation) are printed and written to ``load-report.json`` in the test's folder; they are
never asserted (the machine is shared).
"""

from __future__ import annotations

import json
import os
import statistics
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import pytest
from service_helpers import free_port, serve_process, wait_until_up
from sqlalchemy import create_engine, text
from sqlalchemy.engine import make_url

from ctxledger.ledger import Ledger
from ctxledger.records import Message
from ctxledger.store.keys import create_key

POSTGRES_URL = os.environ.get("CTXLEDGER_TEST_POSTGRES_URL")
CLIENTS, TURNS, ASSEMBLE_EVERY = 6, 8, 4

pytestmark = [pytest.mark.postgres, pytest.mark.skipif(not POSTGRES_URL, reason="needs CTXLEDGER_TEST_POSTGRES_URL")]


@pytest.fixture
def database() -> str:
    assert POSTGRES_URL
    name = f"ctxledger_load_{uuid.uuid4().hex[:10]}"
    admin = create_engine(POSTGRES_URL, isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        conn.execute(text(f'CREATE DATABASE "{name}"'))
    yield make_url(POSTGRES_URL).set(database=name).render_as_string(hide_password=False)
    with admin.connect() as conn:
        conn.execute(text(f'DROP DATABASE "{name}" WITH (FORCE)'))
    admin.dispose()


def _client(bases: list[str], key: str, c: int) -> dict[str, list[float]]:
    timings: dict[str, list[float]] = {"append": [], "assemble": []}
    auth = {"Authorization": f"Bearer {key}"}
    with httpx.Client(timeout=60, headers=auth) as http:
        for i in range(TURNS):
            base = bases[(c + i) % len(bases)]
            for conv in (f"own-{c}", "shared"):
                started = time.perf_counter()
                turn = {"messages": [{"role": "user", "content": f"client {c} turn {i}"}]}
                answer = http.post(f"{base}/v1/conversations/{conv}/messages", json=turn)
                timings["append"].append(time.perf_counter() - started)
                assert answer.status_code == 201, answer.text
            if i % ASSEMBLE_EVERY == ASSEMBLE_EVERY - 1:
                started = time.perf_counter()
                answer = http.post(f"{base}/v1/conversations/own-{c}/assemble",
                                   json={"window_tokens": 4000, "output_tokens": 500})  # fmt: skip
                timings["assemble"].append(time.perf_counter() - started)
                assert answer.status_code == 200, answer.text
    return timings


def _quantiles(values: list[float]) -> dict[str, float]:
    cuts = statistics.quantiles(values, n=20, method="inclusive")
    return {"n": len(values), "p50_ms": round(1000 * statistics.median(values), 1), "p95_ms": round(1000 * cuts[18], 1)}


def test_two_servers_one_store_lose_duplicate_or_reorder_nothing(database: str, tmp_path: Path) -> None:
    with Ledger.open(database) as ledger:
        key = create_key(ledger.store, "load")[0]
    ports = [free_port(), free_port()]
    logs = [tmp_path / f"server-{port}.log" for port in ports]
    procs = [serve_process(database, port, log) for port, log in zip(ports, logs, strict=True)]
    try:
        bases = [f"http://127.0.0.1:{port}" for port in ports]
        for base, proc, log in zip(bases, procs, logs, strict=True):
            wait_until_up(base, proc, log)
        cpu = time.process_time()
        wall = time.perf_counter()
        with ThreadPoolExecutor(CLIENTS) as pool:
            results = list(pool.map(lambda c: _client(bases, key, c), range(CLIENTS)))
        wall = time.perf_counter() - wall
    finally:
        for proc in procs:
            proc.terminate()
            proc.wait(20)
    report = {op: _quantiles([t for r in results for t in r[op]]) for op in ("append", "assemble")}
    report.update(servers=2, clients=CLIENTS, wall_s=round(wall, 2), client_cpu_s=round(time.process_time() - cpu, 2))
    (tmp_path / "load-report.json").write_text(json.dumps(report, indent=2))
    print("\nload test:", json.dumps(report))
    with Ledger.open(database) as ledger:
        for conv, senders in [("shared", range(CLIENTS)), *((f"own-{c}", [c]) for c in range(CLIENTS))]:
            texts = [r.content for r in ledger.store.records("load", conv) if isinstance(r, Message)]
            assert len(texts) == len(set(texts)) == len(senders) * TURNS, conv  # none lost, none duplicated
            for c in senders:
                mine = [t for t in texts if t.startswith(f"client {c} ")]
                assert mine == [f"client {c} turn {i}" for i in range(TURNS)], conv  # each client's order kept
            seqs = [r.seq for r in ledger.store.records("load", conv)]
            assert seqs == list(range(1, len(seqs) + 1))
