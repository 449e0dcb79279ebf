"""Which backends the store tests run on (imported by ``conftest.py`` and test modules alike)."""

from __future__ import annotations

import os

POSTGRES_URL = os.environ.get("CTXLEDGER_TEST_POSTGRES_URL")
"""The setting read by ``tests/conftest.py`` too (that module cannot be imported by name from here)."""

BACKENDS = ["memory", "sqlite", *(["postgres"] if POSTGRES_URL else [])]
"""Backends the ``store`` fixture runs on (PostgreSQL only when a server URL is configured)."""
