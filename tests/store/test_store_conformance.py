"""Every backend passes the conformance suite shipped in ``ctxledger.testing``."""

from __future__ import annotations

from ctxledger.testing import StoreConformance


class TestStoreConformance(StoreConformance):
    """The suite, run by the ``store`` fixture on memory, SQLite and (when configured) PostgreSQL."""
