"""Throw-away stores for the benchmark: a fresh SQLite file, or a fresh PostgreSQL database.

The PostgreSQL database (``ctxledger_bench_<random>`` by default, so that two runs on one server never
drop each other's database) is created on the server named by the maintenance URL
(``postgresql+psycopg://postgres@127.0.0.1:5432/test``) and dropped afterwards; nothing else on the
server is touched. Blobs go to a folder of the run's work directory in both cases.
"""

from __future__ import annotations

import contextlib
import re
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from sqlalchemy.engine import make_url

from ctxledger.errors import ConfigurationError

DEFAULT_POSTGRES_URL = "postgresql+psycopg://postgres@127.0.0.1:5432/test"
DEFAULT_POSTGRES_DB = "ctxledger_bench"
"""Prefix of the throw-away database's name (a random suffix is added per run)."""


@dataclass(frozen=True, slots=True)
class Backend:
    """Where one benchmark store lives.

    Attributes:
        name: ``sqlite`` or ``postgres``.
        url: the store URL.
        blobs_dir: the blob folder.
    """

    name: str
    url: str
    blobs_dir: Path


def sqlite_backend(folder: Path) -> Backend:
    """A new SQLite store in ``folder`` (which must not hold one already)."""
    folder.mkdir(parents=True, exist_ok=True)
    db = folder / "bench.db"
    if db.exists():
        raise ConfigurationError(f"{db} already exists; the benchmark needs a fresh folder")
    return Backend("sqlite", f"sqlite:///{db}", folder / "blobs")


def _psycopg_dsn(url: str) -> str:
    return make_url(url).set(drivername="postgresql").render_as_string(hide_password=False)


def _admin(maintenance_url: str, sql: str) -> None:
    import psycopg

    with psycopg.connect(_psycopg_dsn(maintenance_url), autocommit=True) as conn:
        conn.execute(sql)  # type: ignore[arg-type]


@contextlib.contextmanager
def postgres_backend(folder: Path, maintenance_url: str, prefix: str = DEFAULT_POSTGRES_DB) -> Iterator[Backend]:
    """Create database ``<prefix>_<random>``, yield its backend, drop it on exit.

    Raises:
        ConfigurationError: an unsafe prefix (only ``[a-z0-9_]`` is allowed).
    """
    if not re.fullmatch(r"[a-z_][a-z0-9_]*", prefix):
        raise ConfigurationError(f"unsafe PostgreSQL database name prefix {prefix!r}")
    database = f"{prefix}_{uuid.uuid4().hex[:10]}"
    _admin(maintenance_url, f"CREATE DATABASE {database}")
    url = make_url(maintenance_url).set(database=database).render_as_string(hide_password=False)
    folder.mkdir(parents=True, exist_ok=True)
    try:
        yield Backend("postgres", url, folder / "blobs")
    finally:
        _admin(maintenance_url, f"DROP DATABASE IF EXISTS {database} WITH (FORCE)")
