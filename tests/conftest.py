"""Shared test fixtures: where the real data lives, and which stores to run against."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[1]


def _shared_dir() -> Path:
    env = os.environ.get("CTXLEDGER_SHARED_DIR")
    return Path(env) if env else REPO_ROOT.parent / "shared"


SHARED_DIR = _shared_dir()
DATA_DIR = SHARED_DIR / "data"
CASES_DIR = SHARED_DIR / "cases"
POSTGRES_URL = os.environ.get("CTXLEDGER_TEST_POSTGRES_URL")
"""Set (e.g. ``postgresql+psycopg://postgres@127.0.0.1:5432/test``) to run every store test on PostgreSQL too."""


@pytest.fixture(scope="session")
def data_dir() -> Path:
    """The real datasets of ``../shared/data`` (never copied into the project)."""
    assert DATA_DIR.is_dir(), f"shared data not found at {DATA_DIR}; set CTXLEDGER_SHARED_DIR"
    return DATA_DIR


@pytest.fixture(scope="session")
def cases_dir() -> Path:
    """The failure cases of ``../shared/cases``."""
    assert CASES_DIR.is_dir(), f"shared cases not found at {CASES_DIR}; set CTXLEDGER_SHARED_DIR"
    return CASES_DIR
