"""Shared test fixtures: where the real data lives, and which stores to run against."""

from __future__ import annotations

import os
import re
from collections.abc import Callable
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


@pytest.fixture(scope="session")
def readme_block() -> Callable[[str, str], str]:
    """``readme_block(lang, marker)``: the one fenced ``lang`` block of README.md that contains ``marker``.

    Tests run the README's examples as written, so the README and the code cannot drift apart.
    """

    def find(lang: str, marker: str) -> str:
        text = (REPO_ROOT / "README.md").read_text(encoding="utf-8")
        found = [b for b in re.findall(rf"```{lang}\n(.*?)```", text, flags=re.S) if marker in b]
        assert len(found) == 1, f"README has {len(found)} {lang} blocks with {marker!r}"
        return found[0]

    return find
