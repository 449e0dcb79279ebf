"""Summaries of repeated timings: median and p95 in milliseconds."""

from __future__ import annotations

import math
import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from typing import Any


@dataclass(frozen=True, slots=True)
class Timing:
    """Summary of ``n`` wall-clock samples, in milliseconds.

    Attributes:
        n: number of samples.
        median_ms: the median.
        p95_ms: the 95th percentile by nearest rank (the maximum when ``n < 20``).
        min_ms, max_ms: the extremes.
    """

    n: int
    median_ms: float
    p95_ms: float
    min_ms: float
    max_ms: float

    def as_dict(self) -> dict[str, Any]:
        """The summary as a JSON-able dict."""
        return asdict(self)


def summarize(samples_ms: Sequence[float]) -> Timing:
    """Summarize samples (milliseconds).

    Raises:
        ValueError: no samples.
    """
    if not samples_ms:
        raise ValueError("no timing samples")
    ordered = sorted(samples_ms)
    rank = max(1, math.ceil(0.95 * len(ordered)))
    return Timing(
        n=len(ordered),
        median_ms=statistics.median(ordered),
        p95_ms=ordered[rank - 1],
        min_ms=ordered[0],
        max_ms=ordered[-1],
    )


def time_ms(fn: Callable[[], Any]) -> tuple[float, Any]:
    """Call ``fn`` once; return (CPU milliseconds of this process, its result).

    CPU time (``time.process_time``), not wall clock: the machine is shared, and another process's load
    would otherwise show up as ours. Work done in another process (the PostgreSQL server) is not counted.
    """
    started = time.process_time()
    result = fn()
    return (time.process_time() - started) * 1000.0, result
