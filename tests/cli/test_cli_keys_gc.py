"""`ctxledger keys` and `ctxledger gc` on a real SQLite store."""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from sqlalchemy import create_engine, inspect
from typer.testing import CliRunner

from ctxledger.cli import app
from ctxledger.ledger import Ledger
from ctxledger.store.keys import tenant_for_key
from postgres_db import fresh_database


def test_keys_create_prints_the_key_once_and_list_never_shows_it(runner: CliRunner, tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'k.db'}"
    made = runner.invoke(app, ["keys", "create", "--tenant", "acme", "--name", "ci", "--db", url])
    assert made.exit_code == 0, made.output
    key = made.stdout.strip()
    assert key.startswith("ctxl_") and "shown only this once" in made.stderr
    with Ledger.open(url) as ledger:
        assert tenant_for_key(ledger.store, key) == "acme"
    listed = runner.invoke(app, ["--db", url, "--tenant", "acme", "keys", "list"])
    assert listed.exit_code == 0 and "ci" in listed.stdout and key.split("_")[-1] not in listed.stdout
    key_id = key.split("_")[1]
    assert runner.invoke(app, ["--db", url, "keys", "revoke", key_id]).exit_code == 0
    again = runner.invoke(app, ["--db", url, "keys", "revoke", key_id])
    assert again.exit_code == 2 and "not found" in again.stderr
    bad = runner.invoke(app, ["--db", url, "--tenant", "no spaces", "keys", "create"])
    assert bad.exit_code == 2 and "tenant" in bad.stderr


def test_gc_keeps_young_orphans_and_removes_old_ones(runner: CliRunner, tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'g.db'}"
    with Ledger.open(url) as ledger:
        orphan = ledger.store.blobs.put(b"left behind by a killed import")
        path = ledger.store.blobs.path(orphan.sha256)
    young = runner.invoke(app, ["--db", url, "gc"])
    assert young.exit_code == 0 and "removed 0" in young.stdout and path.exists()
    old = time.time() - 7200
    os.utime(path, (old, old))
    dry = runner.invoke(app, ["gc", "--db", url, "--dry-run"])
    assert "would remove 1" in dry.stdout and path.exists()
    done = runner.invoke(app, ["gc", "--db", url, "--grace", "30m"])
    assert done.exit_code == 0 and "removed 1" in done.stdout and not path.exists()
    bad = runner.invoke(app, ["gc", "--db", url, "--grace", "soon"])
    assert bad.exit_code == 2 and "--grace" in bad.stderr


def test_revoking_an_unknown_key_says_where_the_ids_are(runner: CliRunner, tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'k.db'}"
    assert runner.invoke(app, ["--db", url, "keys", "create", "--tenant", "acme"]).exit_code == 0
    answer = runner.invoke(app, ["--db", url, "keys", "revoke", "0123456789ab"])
    flat = " ".join(answer.stderr.split())
    assert answer.exit_code == 2
    assert "'0123456789ab'" in flat and "keys list" in flat and "tenant '*'" not in flat


POSTGRES_URL = os.environ.get("CTXLEDGER_TEST_POSTGRES_URL")
EMPTY_BACKENDS = ["sqlite", *(["postgresql"] if POSTGRES_URL else [])]


@contextmanager
def _empty_database(backend: str, tmp_path: Path) -> Iterator[str]:
    """A database with nothing in it: an empty SQLite file, or a fresh PostgreSQL database (dropped after)."""
    if backend == "sqlite":
        (tmp_path / "empty.db").touch()
        yield f"sqlite:///{tmp_path / 'empty.db'}"
        return
    assert POSTGRES_URL
    with fresh_database(POSTGRES_URL, "ctxledger_keys") as url:
        yield url


def _tables(url: str) -> list[str]:
    engine = create_engine(url)
    try:
        return inspect(engine).get_table_names()
    finally:
        engine.dispose()


@pytest.mark.parametrize("backend", EMPTY_BACKENDS)
def test_keys_list_on_an_empty_database_says_so_and_creates_nothing(
    runner: CliRunner, tmp_path: Path, backend: str
) -> None:
    """Listing only reads: no schema is created; once a key is created, the same listing shows it."""
    with _empty_database(backend, tmp_path) as url:
        listed = runner.invoke(app, ["--db", url, "--tenant", "acme", "keys", "list"])
        assert listed.exit_code == 0, listed.output
        assert "no keys" in listed.stdout and "no API key table yet" in " ".join(listed.stdout.split())
        assert _tables(url) == []
        made = runner.invoke(app, ["--db", url, "--tenant", "acme", "keys", "create", "--name", "ci"])
        assert made.exit_code == 0, made.output
        key_id = made.stdout.strip().split("_")[1]
        again = runner.invoke(app, ["--db", url, "--tenant", "acme", "keys", "list"])
        assert again.exit_code == 0 and key_id in again.stdout and "ci" in again.stdout
        other = runner.invoke(app, ["--db", url, "--tenant", "globex", "keys", "list"])
        assert other.exit_code == 0 and "no keys for tenant globex" in other.stdout
        assert "api_keys" in _tables(url)
