"""Fixtures for the ladder tests: real trajectories imported into in-memory ledgers."""

from __future__ import annotations

from pathlib import Path

import pytest
from ladder_helpers import MINI_SWE, TAU

from ctxledger.ledger import Ledger
from ctxledger.testing import MemoryStore


@pytest.fixture(scope="session")
def swe(data_dir: Path) -> tuple[Ledger, str]:
    """A ledger holding the mini-swe-agent run (shared: tests only read it)."""
    ledger = Ledger(MemoryStore())
    result = ledger.import_file(data_dir / MINI_SWE, count_tokens_for=None)
    return ledger, result.conversation_ids[0]


@pytest.fixture(scope="session")
def tau(data_dir: Path) -> Ledger:
    """A ledger holding the 160 tau-bench airline trajectories (shared: tests only read it)."""
    ledger = Ledger(MemoryStore())
    ledger.import_file(data_dir / TAU, count_tokens_for=None)
    return ledger


@pytest.fixture
def fresh_tau(data_dir: Path) -> Ledger:
    """A ledger of its own holding the tau-bench trajectories (for tests that write)."""
    ledger = Ledger(MemoryStore())
    ledger.import_file(data_dir / TAU, count_tokens_for=None)
    return ledger
