"""Alembic revisions, oldest first.

``r0001_initial`` (revision ``0001_initial``) creates the schema of ``ctxledger.store.schema``.
"""
