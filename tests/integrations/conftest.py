"""Fixtures of the framework integration tests."""

from __future__ import annotations

import asyncio
import warnings
from collections.abc import Iterator

import pytest


@pytest.fixture(autouse=True, scope="session")
def _no_agents_sdk_trace_export() -> None:
    """The Agents SDK exports traces to OpenAI by default; tests never reach the network."""
    from agents import set_tracing_disabled

    set_tracing_disabled(True)


@pytest.fixture(autouse=True)
def _close_the_event_loop_left_open() -> Iterator[None]:
    """Close the event loop a framework's sync entry point left set (PydanticAI's ``run_sync`` leaves one open).

    A later ``asyncio.run`` would otherwise drop it unclosed, and its ResourceWarning would fail whichever test
    the garbage collector happens to run in.
    """
    yield
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        try:
            loop = asyncio.get_event_loop()
        except RuntimeError:
            return
    if not loop.is_running():
        loop.close()
        asyncio.set_event_loop(None)
