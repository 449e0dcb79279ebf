"""Fixtures of the framework integration tests."""

from __future__ import annotations

import asyncio
import gc
from collections.abc import Iterator

import pytest


@pytest.fixture(autouse=True, scope="session")
def _no_agents_sdk_trace_export() -> None:
    """The Agents SDK exports traces to OpenAI by default; tests never reach the network."""
    from agents import set_tracing_disabled

    set_tracing_disabled(True)


@pytest.fixture(autouse=True)
def _no_event_loop_left_open() -> Iterator[None]:
    """Fail a test that leaves an open event loop set, and collect garbage before the next test starts.

    An event loop left open (PydanticAI's ``run_sync`` keeps the thread's loop for its next call) holds a
    self-pipe socket pair; once dropped, its ``ResourceWarning`` would surface in whichever later test the garbage
    collector runs in. Collecting here reports anything unclosed in the test that made it.
    """
    yield
    local = getattr(asyncio.get_event_loop_policy(), "_local", None)
    loop = getattr(local, "_loop", None)
    assert loop is None or loop.is_closed(), "the test left an open event loop set; close it (asyncio.run does)"
    gc.collect()
