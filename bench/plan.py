"""How long each measurement may run, so that a whole run stays bounded (a whole run within about 15 minutes).

* :func:`repeats_for`: how many samples each scenario takes at a size (fewer for bigger conversations);
  each scenario also stops taking new samples after ``scenario_seconds`` (at least one is taken).
* :class:`Predictor`: before a scenario runs on a synthetic conversation, its time per call is predicted
  by linear extrapolation from the largest smaller size measured on the same backend in this run
  (latency per event assumed constant, which is optimistic for anything super-linear), or by what the
  other backend measured at the same size, whichever is larger. A scenario
  predicted slower than ``max_call_seconds`` is *skipped* and reported as such, with the prediction;
  an import predicted longer than ``max_import_seconds`` skips the backend for that size.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from bench.ours import Repeat

SCENARIOS = ("cold", "restart", "warm", "append-one")


@dataclass(frozen=True, slots=True)
class Limits:
    """Time limits of one run (seconds).

    Attributes:
        scenario_seconds: no new sample of a scenario after this long.
        max_call_seconds: skip a scenario predicted slower than this per call.
        max_import_seconds: skip a backend for a size whose import is predicted longer than this.
    """

    scenario_seconds: float = 30.0
    max_call_seconds: float = 120.0
    max_import_seconds: float = 600.0


def repeats_for(events: int, quick: bool, limits: Limits) -> dict[str, Repeat]:
    """Samples per scenario (and for the peers, under ``"peers"``) at a conversation size."""
    if events <= 5_000:
        counts = (3, 3, 10, 10, 3) if quick else (5, 5, 30, 30, 5)
    elif events <= 20_000:
        counts = (1, 1, 10, 10, 1) if quick else (3, 3, 20, 20, 3)
    else:
        counts = (1, 1, 5, 5, 1) if quick else (1, 1, 10, 10, 1)
    names = (*SCENARIOS, "peers")
    return {name: Repeat(n, limits.scenario_seconds) for name, n in zip(names, counts, strict=True)}


@dataclass(slots=True)
class Predictor:
    """Linear extrapolation of milliseconds per call from smaller sizes (see the module docstring)."""

    seen: dict[tuple[str, str], tuple[int, float]] = field(default_factory=dict)
    same_size: dict[tuple[str, int], list[float]] = field(default_factory=dict)

    def record(self, backend: str, scenario: str, events: int, ms: float) -> None:
        """Remember a measured median (or import time) at a size."""
        self.seen[(backend, scenario)] = (events, ms)
        self.same_size.setdefault((scenario, events), []).append(ms)

    def predict(self, backend: str, scenario: str, events: int) -> float | None:
        """Predicted milliseconds at ``events``, or ``None`` with nothing to predict from."""
        guesses = list(self.same_size.get((scenario, events), ()))
        known = self.seen.get((backend, scenario))
        if known is not None and known[0] < events:
            guesses.append(known[1] * events / known[0])
        return max(guesses) if guesses else None
