"""The ``store`` fixture: every store test runs on memory, SQLite (a real file) and, when
``CTXLEDGER_TEST_POSTGRES_URL`` is set, PostgreSQL (a fresh database per test session, dropped at the end).
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import create_engine, text
from sqlalchemy.engine import make_url
from store_backends import BACKENDS, POSTGRES_URL

from ctxledger.store import open_store
from ctxledger.store.base import GraphStore
from ctxledger.store.schema import metadata
from postgres_db import fresh_database


@pytest.fixture(scope="session")
def postgres_url() -> Iterator[str]:
    """A fresh PostgreSQL database for this session (``ctxledger_test_<random>``), dropped afterwards."""
    assert POSTGRES_URL, "CTXLEDGER_TEST_POSTGRES_URL is not set"
    with fresh_database(POSTGRES_URL, "ctxledger_test") as url:
        yield url


def _truncate(url: str) -> None:
    engine = create_engine(url)
    with engine.begin() as conn:
        names = ", ".join(t.name for t in metadata.sorted_tables)
        conn.execute(text(f"TRUNCATE {names}"))
    engine.dispose()


@pytest.fixture(params=BACKENDS)
def store_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """The URL of an empty store of each backend."""
    if request.param == "memory":
        yield "memory://"
    elif request.param == "sqlite":
        yield f"sqlite:///{tmp_path}/db/ctxledger.db"
    else:
        url = request.getfixturevalue("postgres_url")
        yield url
        _truncate(url)


@pytest.fixture
def store(store_url: str, tmp_path: Path) -> Iterator[GraphStore]:
    """A fresh, migrated store of each backend, blobs in ``tmp_path/blobs``."""
    opened = open_store(store_url, blobs_dir=tmp_path / "blobs")
    yield opened
    opened.close()


@pytest.fixture(params=[b for b in BACKENDS if b != "memory"])
def empty_sql_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """A database ctxledger never touched: a new SQLite file, or a new schema in the PostgreSQL test db."""
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path}/empty/ctxledger.db"
        return
    base = request.getfixturevalue("postgres_url")
    schema = f"empty_{uuid.uuid4().hex[:12]}"
    admin = create_engine(base, isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        conn.execute(text(f'CREATE SCHEMA "{schema}"'))
    try:
        url = make_url(base).update_query_dict({"options": f"-csearch_path={schema}"})
        yield url.render_as_string(hide_password=False)
    finally:
        with admin.connect() as conn:
            conn.execute(text(f'DROP SCHEMA "{schema}" CASCADE'))
        admin.dispose()
