"""The Alembic migration history of ctxledger's schema (one history for SQLite and PostgreSQL).

Run it with :func:`ctxledger.store.migrate` or ``ctxledger migrate URL``; ``env.py`` expects the
connection in ``config.attributes["connection"]`` (see ``ctxledger.store._migrate``).
"""
