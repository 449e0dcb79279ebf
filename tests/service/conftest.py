"""Fixtures for the service tests: a served SQLite store with two tenants, each with its own key."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from service_helpers import Served, serve_store


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    folder: Path = tmp_path_factory.mktemp("served")
    yield from serve_store(f"sqlite:///{folder / 'svc.db'}")
