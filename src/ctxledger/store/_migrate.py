"""Running the Alembic history programmatically (one explicit ``migrate()``).

The same code path serves ``open_store(url)`` (which migrates by default), ``ctxledger.store.migrate(url)``
and a ``ctxledger migrate`` command. On PostgreSQL the upgrade holds a transaction-scoped advisory lock,
so service replicas starting together migrate one at a time; on SQLite the upgrade runs in a
``BEGIN IMMEDIATE`` transaction, which has the same effect.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from sqlalchemy import inspect, text
from sqlalchemy.engine import URL, Connection, Engine
from sqlalchemy.exc import SQLAlchemyError

from ctxledger.errors import ConfigurationError, MigrationError, StoreConnectionError
from ctxledger.store.schema import VERSION_TABLE

if TYPE_CHECKING:
    from alembic.config import Config

MIGRATIONS_DIR = Path(__file__).with_name("migrations")
"""The Alembic script directory shipped inside the package."""

HEAD_REVISION = "0007_rung_memo"
"""The newest revision of the shipped history, known without loading Alembic: a store already at it opens with
one query instead of importing Alembic and reading every revision script (about 0.3 s of CPU per process).
A test checks that it equals the history's head."""

WRITE_OPTION = "ctxledger_write"
"""Connection execution option that makes the SQLite backend begin with ``BEGIN IMMEDIATE``."""

_ADVISORY_LOCK_KEY = 0x63_74_78_6C_65_64  # "ctxled"

DEFAULT_CONNECT_TIMEOUT = 10
"""Seconds a PostgreSQL connection attempt may take before it fails, unless the URL's ``connect_timeout`` says."""

LEGACY_REVISIONS: dict[str, str] = {
    "0003_w12_keys_blobs": "0003_keys_blobs",
    "0003_w15_retention": "0004_retention",
    "0004_w9f_write_facts": "0005_write_facts",
}
"""Earlier names of shipped revisions (same schema, same order), renamed in the version table on upgrade."""


def alembic_config() -> Config:
    """An Alembic ``Config`` pointing at :data:`MIGRATIONS_DIR` (no ``alembic.ini`` needed)."""
    from alembic.config import Config

    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS_DIR))
    return config


def head_revision() -> str:
    """The newest revision of the shipped history as Alembic reads it from the scripts (e.g. ``"0001_initial"``)."""
    from alembic.script import ScriptDirectory

    head = ScriptDirectory.from_config(alembic_config()).get_current_head()
    assert head is not None, "the shipped migration history is empty"
    return head


def connect_timeout(url: URL) -> int:
    """Seconds a PostgreSQL connection to ``url`` may take: its ``connect_timeout`` query value, else the default.

    ``0`` waits without limit (libpq's meaning); libpq counts any value below 2 as 2.

    Raises:
        ConfigurationError: ``connect_timeout`` is not a whole number of seconds >= 0.
    """
    given = url.query.get("connect_timeout")
    if given is None:
        return DEFAULT_CONNECT_TIMEOUT
    text = given[-1] if isinstance(given, tuple) else given
    if not text.strip().isdigit():
        raise ConfigurationError(
            f"connect_timeout={text!r} in the store URL: expected a whole number of seconds (0: wait without limit)"
        )
    return int(text)


def connect(engine: Engine) -> Connection:
    """A connection to ``engine``'s database.

    Raises:
        StoreConnectionError: the database cannot be reached, refused the connection, or (PostgreSQL) did not
            answer within :func:`connect_timeout` seconds (the message says so; the cause is chained).
    """
    try:
        return engine.connect()
    except SQLAlchemyError as exc:
        url = engine.url
        orig = getattr(exc, "orig", None)
        lines = str(orig if orig is not None else exc).strip().splitlines()
        reason = lines[0].strip() if lines else type(exc).__name__
        if url.password:  # a driver may echo the connection string
            reason = reason.replace(str(url.password), "***")
        if type(orig).__name__ == "ConnectionTimeout" or "timeout expired" in reason:
            reason = (
                f"no answer within {max(connect_timeout(url), 2)} s ({reason}); a wrong host or a firewall that drops "
                "packets looks like this; connect_timeout=SECONDS in the URL's query sets the wait"
            )
        raise StoreConnectionError(url.get_backend_name(), url.host, url.port, url.database, reason) from exc


def current_revision(engine: Engine) -> str | None:
    """The revision a database is at, or ``None`` for a database ctxledger never migrated.

    Raises:
        StoreConnectionError: the database cannot be reached.
    """
    with connect(engine) as conn:
        return _stored_revision(conn)


def _stored_revision(conn: Connection) -> str | None:
    """The revision in the version table, ``None`` when there is no table or no row."""
    if not inspect(conn).has_table(VERSION_TABLE):
        return None
    return conn.execute(text(f"SELECT version_num FROM {VERSION_TABLE}")).scalar_one_or_none()


def upgrade(engine: Engine, read_blob: Callable[[str], bytes] | None = None) -> str:
    """Upgrade the database behind ``engine`` to the newest revision (idempotent); return it.

    ``read_blob`` returns a blob's bytes by sha256: revisions that compute facts from tool results' raw text
    read it (see ``0005_write_facts``); without it those facts are recomputed when first read.

    A database already at :data:`HEAD_REVISION` is answered by reading its version table, without Alembic.

    Raises:
        StoreConnectionError: the database cannot be reached.
        MigrationError: the database refused the migration (the cause is chained).
    """
    try:
        if current_revision(engine) == HEAD_REVISION:
            return HEAD_REVISION
    except SQLAlchemyError as exc:
        raise MigrationError(f"reading the schema revision of {_display(engine)} failed: {exc}") from exc
    from alembic import command

    config = alembic_config()
    conn = connect(engine)
    try:
        with conn:
            conn.execution_options(**{WRITE_OPTION: True})
            with conn.begin():
                if conn.dialect.name == "postgresql":
                    conn.execute(text("SELECT pg_advisory_xact_lock(:key)"), {"key": _ADVISORY_LOCK_KEY})
                _rename_legacy_revision(conn)
                config.attributes["connection"] = conn
                config.attributes["read_blob"] = read_blob
                command.upgrade(config, "head")
    except SQLAlchemyError as exc:
        raise MigrationError(f"migrating {_display(engine)} failed: {exc}") from exc
    return HEAD_REVISION


def check_revision(engine: Engine) -> None:
    """Check that the database is at the newest revision.

    Raises:
        StoreConnectionError: the database cannot be reached.
        MigrationError: it is empty or at another revision; the message says how to migrate.
    """
    current, head = current_revision(engine), HEAD_REVISION
    if current != head:
        raise MigrationError(
            f"{_display(engine)} is at schema revision {current or '<none>'} but this ctxledger needs "
            f"{head}; run `ctxledger migrate URL` or open_store(url, migrate=True)"
        )


def _rename_legacy_revision(conn: Connection) -> None:
    """Rewrite a version row that holds an earlier name of a shipped revision to its current name."""
    if not inspect(conn).has_table(VERSION_TABLE):
        return
    for old, new in LEGACY_REVISIONS.items():
        conn.execute(
            text(f"UPDATE {VERSION_TABLE} SET version_num = :new WHERE version_num = :old"),
            {"new": new, "old": old},
        )


def _display(engine: Engine) -> str:
    return engine.url.render_as_string(hide_password=True)
