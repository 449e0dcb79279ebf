"""Fixtures for the service tests: a served SQLite store with two tenants, each with its own key; a fresh store."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from service_helpers import Served, serve_store

from postgres_db import fresh_database

POSTGRES_URL = os.environ.get("CTXLEDGER_TEST_POSTGRES_URL")


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    folder: Path = tmp_path_factory.mktemp("served")
    yield from serve_store(f"sqlite:///{folder / 'svc.db'}")


@pytest.fixture(scope="module")
def store_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A fresh database of its own on the shared PostgreSQL server when one is configured, else a SQLite file."""
    if not POSTGRES_URL:
        yield f"sqlite:///{tmp_path_factory.mktemp('store') / 'store.db'}"
        return
    with fresh_database(POSTGRES_URL, "ctxledger_svc") as url:
        yield url
