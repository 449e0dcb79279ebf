"""Alembic environment for ctxledger (one schema, one migration history, both dialects).

``ctxledger.store._migrate`` passes an open connection in ``config.attributes["connection"]``; for the
plain ``alembic`` command line, ``sqlalchemy.url`` is read from the config instead. SQLite runs in
batch mode so that future ``ALTER`` migrations work there too. The version table is
``ctxledger_alembic_version``.
"""

from __future__ import annotations

from alembic import context
from sqlalchemy import create_engine
from sqlalchemy.engine import Connection

from ctxledger.store.schema import VERSION_TABLE, metadata


def _run(connection: Connection) -> None:
    context.configure(
        connection=connection,
        target_metadata=metadata,
        version_table=VERSION_TABLE,
        render_as_batch=connection.dialect.name == "sqlite",
        compare_type=True,
    )
    with context.begin_transaction():
        context.run_migrations()


def _main() -> None:
    if context.is_offline_mode():
        context.configure(
            url=context.config.get_main_option("sqlalchemy.url"),
            target_metadata=metadata,
            version_table=VERSION_TABLE,
            literal_binds=True,
        )
        with context.begin_transaction():
            context.run_migrations()
        return
    connection = context.config.attributes.get("connection")
    if connection is not None:
        _run(connection)
        return
    engine = create_engine(str(context.config.get_main_option("sqlalchemy.url")))
    with engine.begin() as conn:
        _run(conn)
    engine.dispose()


_main()
