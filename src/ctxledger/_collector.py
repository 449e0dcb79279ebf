"""Pausing Python's cyclic garbage collector while a snapshot of a whole history is built.

Building a snapshot allocates hundreds of thousands of objects (records, units, turns, facts) that all stay
alive in the snapshot cache; every full collection during the build walks all of them and frees nothing.
:func:`collector_paused` turns the collector off for the duration of such a build and back on after, only if
it was on: reference counting still frees what is not in a cycle, and cycles made meanwhile are collected
at the next collection after the build. Builds in several threads share one pause (the collector is
process-wide), which ends when the last of them ends.
"""

from __future__ import annotations

import gc
import threading
from collections.abc import Iterator
from contextlib import contextmanager

_lock = threading.Lock()
_depth = 0
_resume = False


@contextmanager
def collector_paused() -> Iterator[None]:
    """Disable the cyclic collector within the block; re-enable it after if it was enabled before."""
    global _depth, _resume
    with _lock:
        if _depth == 0:
            _resume = gc.isenabled()
            gc.disable()
        _depth += 1
    try:
        yield
    finally:
        with _lock:
            _depth -= 1
            if _depth == 0 and _resume:
                gc.enable()
