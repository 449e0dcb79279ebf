"""Helpers of the service tests (a module name of its own, so tests of other folders never shadow it)."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from importlib.resources import files
from pathlib import Path

import httpx
import uvicorn
from fastapi.testclient import TestClient

from ctxledger.ledger import Ledger
from ctxledger.service import create_app
from ctxledger.store.keys import create_key

DEMO = files("ctxledger._demo").joinpath("tau_bench_airline_task2.json").read_text(encoding="utf-8")
"""The bundled real tau-bench trajectory (airline task 2; MIT, Sierra)."""


@dataclass
class Served:
    """A test client, the store URL and one key per tenant."""

    client: TestClient
    url: str
    keys: dict[str, str]

    def auth(self, tenant: str) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.keys[tenant]}"}


def serve_store(url: str) -> Iterator[Served]:
    """Serve ``url`` with keys for tenants ``acme`` and ``globex``; acme holds the demo trajectory."""
    with Ledger.open(url) as ledger:
        keys = {t: create_key(ledger.store, t)[0] for t in ("acme", "globex")}
    app = create_app(url)
    with TestClient(app) as client:
        served = Served(client, url, keys)
        answer = client.post(
            "/v1/imports",
            headers=served.auth("acme"),
            json={"content": DEMO, "filename": "tau.json", "format": "tau-bench", "conversation_id": "tau"},
        )
        assert answer.status_code == 201, answer.text
        yield served


def free_port() -> int:
    """A TCP port free on loopback now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextmanager
def live_server(url: str) -> Iterator[str]:
    """A real uvicorn server for the store at ``url`` on a loopback port; yields its base URL."""
    port = free_port()
    server = uvicorn.Server(uvicorn.Config(create_app(url), host="127.0.0.1", port=port, log_level="warning"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    while not server.started:
        time.sleep(0.05)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(10)


def serve_process(url: str, port: int, log: Path) -> subprocess.Popen:
    """``ctxledger serve`` on ``port`` for the store at ``url``, in a process of its own; stderr goes to ``log``."""
    with log.open("wb") as sink:
        return subprocess.Popen(
            [sys.executable, "-m", "ctxledger", "serve", "--port", str(port), "--log-level", "warning"],
            env={**os.environ, "CTXLEDGER_URL": url}, stdout=subprocess.DEVNULL, stderr=sink,
        )  # fmt: skip


def wait_until_up(base: str, proc: subprocess.Popen, log: Path) -> None:
    """Return once ``base/healthz`` answers 200; fail with the server's log if it exits or never answers."""
    for _ in range(300):
        if proc.poll() is not None:
            raise AssertionError(log.read_text())
        try:
            if httpx.get(f"{base}/healthz", timeout=1).status_code == 200:
                return
        except httpx.TransportError:
            time.sleep(0.1)
    raise AssertionError(f"{base} did not come up")
