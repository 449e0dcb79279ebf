"""Fixtures for the representation tests: the real o200k_base counter and an in-memory blob store."""

from __future__ import annotations

import pytest

from ctxledger.testing import MemoryBlobStore
from ctxledger.tokens import TokenCounter, get_counter


@pytest.fixture(scope="session")
def counter() -> TokenCounter:
    """The exact, offline o200k_base counter (the tokenizer of current OpenAI models)."""
    return get_counter("o200k_base")


@pytest.fixture
def blobs() -> MemoryBlobStore:
    """A fresh in-memory blob store."""
    return MemoryBlobStore()
