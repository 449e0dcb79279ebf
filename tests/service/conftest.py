"""Fixtures for the service tests: a served SQLite store with two tenants, each with its own key; a fresh store."""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from service_helpers import Served, serve_store
from sqlalchemy import create_engine, text
from sqlalchemy.engine import make_url

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
    name = f"ctxledger_svc_{uuid.uuid4().hex[:10]}"
    admin = create_engine(POSTGRES_URL, isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        conn.execute(text(f'CREATE DATABASE "{name}"'))
    try:
        yield make_url(POSTGRES_URL).set(database=name).render_as_string(hide_password=False)
    finally:
        with admin.connect() as conn:
            conn.execute(text(f'DROP DATABASE "{name}" WITH (FORCE)'))
        admin.dispose()
