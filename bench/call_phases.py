"""CPU time of one call by phase: the parts of a snapshot build and of an assembly that visit the whole history.

:func:`timed_phases` wraps the functions of :data:`PHASES` (in every loaded module that binds them) within a
``with`` block, so that each call adds its CPU seconds (``time.process_time``, this process) to the phase's
total; :func:`phase_ms` reads the totals back in milliseconds, with ``snapshot: other`` (the build's own loop and
what no sub-phase names) and ``rest`` (what no phase names: opening the store, the policy's stages, the knapsack,
the payload) computed from the call's CPU time. A phase's time includes what it calls (the collector's pass at the
end of a snapshot load made outside an assembly counts in both). Used by :mod:`bench.first_call` (``--phases``).
"""

from __future__ import annotations

import contextlib
import functools
import importlib
import sys
import time
from collections.abc import Callable, Iterator
from typing import Any

SNAPSHOT = "snapshot (all)"
"""The phase that holds the build's sub-phases (those named ``snapshot: …``)."""

PHASES: tuple[tuple[str, str, str], ...] = (
    ("snapshot: records read and decoded", "ctxledger.store.sql", "SqlStore.records"),
    ("snapshot: facts read and decoded", "ctxledger.assemble.snapshot", "SnapshotLoader._facts"),
    ("snapshot: deferrable blobs listed", "ctxledger.assemble.snapshot", "SnapshotLoader._deferrable"),
    ("snapshot: units built", "ctxledger.assemble.snapshot", "build_units"),
    ("snapshot: lexical and vector index", "ctxledger.assemble.snapshot", "_index_units"),
    ("snapshot: reach index", "ctxledger.assemble.reach", "ReachIndex.extend"),
    ("snapshot: facets", "ctxledger.assemble.facets", "UnitFacets.extend"),
    (SNAPSHOT, "ctxledger.assemble.snapshot", "SnapshotLoader.load"),
    ("turn costs of every unit", "ctxledger.assemble.phases.budget", "unit_turn_costs"),
    ("relevance of every unit", "ctxledger.assemble.phases.select", "relevance_scores"),
    ("collector at the end of the pause", "gc", "collect"),
)
"""Per phase: its label, the module that defines the function, and the function (``Class.method`` for a method)."""


@contextlib.contextmanager
def timed_phases() -> Iterator[dict[str, float]]:
    """Within the block, time every function of :data:`PHASES`: yields the label → CPU seconds totals.

    A function bound by name in other modules (``from … import f``) is replaced there too; every replaced binding
    is put back when the block ends.
    """
    spent = {label: 0.0 for label, _, _ in PHASES}
    building = [0]  # > 0 while the snapshot build runs: its sub-phases count only then
    undo: list[tuple[Any, str, Any]] = []
    try:
        for label, module_name, attribute in PHASES:
            owner: Any = importlib.import_module(module_name)
            *path, leaf = attribute.split(".")
            for part in path:
                owner = getattr(owner, part)
            inner = getattr(owner, leaf)
            holders = [owner] if path else [m for m in list(sys.modules.values()) if getattr(m, leaf, None) is inner]
            wrapper = _timed(inner, label, spent, building)
            for holder in holders:
                undo.append((holder, leaf, inner))
                setattr(holder, leaf, wrapper)
        yield spent
    finally:
        for holder, leaf, inner in reversed(undo):
            setattr(holder, leaf, inner)


def _timed(
    inner: Callable[..., Any], label: str, spent: dict[str, float], building: list[int]
) -> Callable[..., Any]:
    """``inner`` adding its CPU seconds to ``spent[label]``.

    A ``snapshot: …`` sub-phase counts only while the snapshot build (:data:`SNAPSHOT`) runs, so the sub-phases
    add up to at most the build (the same function called elsewhere in the call, such as reading records for
    another purpose, is not counted).
    """
    depth = [0]
    sub = label.startswith("snapshot: ")

    @functools.wraps(inner)
    def timed(*args: Any, **kwargs: Any) -> Any:
        if sub and not building[0]:
            return inner(*args, **kwargs)
        depth[0] += 1
        building[0] += label == SNAPSHOT
        started = time.process_time()
        try:
            return inner(*args, **kwargs)
        finally:
            depth[0] -= 1
            building[0] -= label == SNAPSHOT
            if depth[0] == 0:  # a call within a call of the same phase is counted once
                spent[label] += time.process_time() - started

    return timed


def phase_ms(spent: dict[str, float], call_cpu_s: float) -> dict[str, float]:
    """The totals of :func:`timed_phases` in milliseconds, with ``snapshot: other`` and ``rest`` added."""
    subs = sum(v for k, v in spent.items() if k.startswith("snapshot: "))
    top = sum(v for k, v in spent.items() if not k.startswith("snapshot: "))
    out = {k: round(v * 1000.0, 1) for k, v in spent.items() if k != SNAPSHOT}
    out["snapshot: other"] = round((spent[SNAPSHOT] - subs) * 1000.0, 1)
    out["rest"] = round((call_cpu_s - top) * 1000.0, 1)
    return out


__all__ = ["PHASES", "phase_ms", "timed_phases"]
