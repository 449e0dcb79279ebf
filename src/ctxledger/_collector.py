"""Pausing Python's cyclic garbage collector while a snapshot of a whole history is built, or an assembly made.

Building a snapshot allocates hundreds of thousands of objects (records, units, turns, facts) that all stay
alive in the snapshot cache; every full collection during the build walks all of them and frees nothing.
:func:`collector_paused` turns the collector off for the duration of such a build and back on after, only if
it was on: reference counting still frees what is not in a cycle, and cycles made meanwhile are collected
when the pause ends. Builds in several threads share one pause (the collector is process-wide), which ends
when the last of them ends.

An assembly is paused too (:meth:`ctxledger.ledger.Ledger.assemble`): it makes tens of thousands of short-lived
objects (selection options, payload messages, manifest entries) and no cycles, and frees them itself before it
returns. A collection during the call would walk them while they are alive and promote them towards the old
generation, whose growth then triggers a full collection of the whole heap every few dozen calls; paused, they
die young and unwalked.

When the pause ends and the collector was on, a build that made more than a quarter of the objects the
process held before (and at least :data:`LARGE_BUILD`) is followed by one full collection. Its objects are all
young then; left to the collector's schedule they would be walked three times (as the young generation, as the
middle one, then by the full collection their number triggers) in whichever later calls happen to allocate;
one full collection walks them once and counts them as old. A build small against the heap (most builds of a
long-lived process, every build of a test suite) pays nothing: the schedule would not walk the heap for it.
"""

from __future__ import annotations

import gc
import threading

LARGE_BUILD = 10_000
"""Fewest new objects (the young generation's count) after which the end of a pause may collect at once."""

_lock = threading.Lock()
_depth = 0
_resume = False
_old: int | None = None
"""The old generation's size when last counted, plus the builds collected since (``None``: never counted)."""


def collector_paused() -> _Pause:
    """Disable the cyclic collector within the block; re-enable it after if it was enabled before.

    A context manager that allocates nothing once the collector is on again, so no young collection starts
    while the block's results are still held by the frame that leaves it.
    """
    return _Pause()


class _Pause:
    """The context manager :func:`collector_paused` returns."""

    __slots__ = ()

    def __enter__(self) -> None:
        global _depth, _resume
        with _lock:
            if _depth == 0:
                _resume = gc.isenabled()
                gc.disable()
            _depth += 1

    def __exit__(self, *exc: object) -> None:
        global _depth
        with _lock:
            _depth -= 1
            resume = _depth == 0 and _resume
            made = gc.get_count()[0]
            due = resume and _due()  # decided while the collector is still off
            if resume:
                gc.enable()
        if due:
            _collect(made)  # one pass over what the build made, not the three its promotion would cost


def _due() -> bool:
    """Whether the build made enough objects that the collector's own schedule would soon walk the whole heap.

    CPython runs a full collection once the objects promoted since the last one exceed a quarter of the old
    generation; a build that made that many (and at least :data:`LARGE_BUILD`) is collected at once instead.

    Listing the old generation to count it walks the whole heap, so it is counted only to confirm a yes: the size
    last counted (plus what the collections ended here have kept since) answers no by itself. An old generation
    that shrank since (a snapshot dropped) can make that no wrong; the collector's own schedule then collects.
    """
    global _old
    made = gc.get_count()[0]
    if made < LARGE_BUILD or (_old is not None and 4 * made <= _old):
        return False
    _old = len(gc.get_objects(generation=2))
    return 4 * made > _old


def _collect(made: int) -> None:
    """One full collection; what the build made (``made`` objects) is counted as old from then on."""
    global _old
    gc.collect()
    if _old is not None:
        _old += made
