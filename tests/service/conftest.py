"""Fixtures for the service tests: a served SQLite store with two tenants, each with its own key."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from importlib.resources import files
from pathlib import Path

import pytest
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


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    folder: Path = tmp_path_factory.mktemp("served")
    yield from serve_store(f"sqlite:///{folder / 'svc.db'}")
