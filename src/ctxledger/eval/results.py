"""The records of one evaluation run: a judged case, a dataset's summary, the whole run.

The harness (:mod:`ctxledger.eval.harness`) produces them and the report (:mod:`ctxledger.eval.report`)
reads them, so the report never imports the harness.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

OURS = "ctxledger-default"
"""The name under which ctxledger's default policy registers itself (the hook for the lead)."""
COMPARED_BASELINES = ("bm25", "newest-fit")
"""Baselines every run of the default policy is compared with (added by :func:`ctxledger.eval.harness.run_named`)."""


def dataset_of(label: str) -> str:
    """The dataset name behind a dataset label of the report: ``"locomo (a.json)"`` → ``"locomo"``.

    A run holding several datasets of one name labels each ``"<name> (<its source's file name>)"``
    (:func:`ctxledger.eval.harness.run_eval`); any other dataset is labelled by its name alone.
    """
    return label.split(" (", 1)[0]


@dataclass(frozen=True, slots=True)
class CaseResult:
    """The judged outcome of one selector on one case at one budget (a row of ``rows.jsonl``).

    Token fields are tokens under the exact counter. ``None`` marks a metric undefined for the case.
    """

    dataset: str
    case_id: str
    category: str
    selector: str
    budget: int
    fits: bool
    included: int
    payload_tokens: int
    claimed_tokens: int
    replay_tokens: int
    overflow: bool
    recall: float | None
    omission: bool | None
    precision: float | None
    stale: bool | None
    pairs_touched: int
    pairs_broken: int
    violations: tuple[str, ...]
    occupancy: Mapping[str, float]
    recovery: Mapping[str, bool]
    latency_s: float
    payload_hash: str
    deterministic: bool | None
    provenance: float | None = None
    rehydration: float | None = None
    fidelity: float | None = None
    self_reported: tuple[str, ...] = ()
    cpu_s: float | None = None
    """Process CPU time of the ``select`` call (seconds): unlike the wall clock, not inflated by other
    processes sharing the machine."""


@dataclass(frozen=True, slots=True)
class DatasetInfo:
    """What the report says about a dataset: size, budgets, quirks handled, counter error."""

    name: str
    kind: str
    cases: int
    budgets: tuple[int, ...]
    quirks: Mapping[str, int]
    source: str
    counter_error: Mapping[str, Any] | None
    listed: Mapping[str, Sequence[str]] = field(default_factory=dict)


@dataclass
class EvalResults:
    """Everything one run produced.

    Attributes:
        config: counter id, selectors, budgets, start time, determinism sampling.
        datasets: one :class:`DatasetInfo` per dataset.
        aggregates: see :func:`ctxledger.eval.harness.aggregate`.
        rows: every :class:`CaseResult` (empty when the run kept no rows).
    """

    config: dict[str, Any]
    datasets: list[DatasetInfo]
    aggregates: list[dict[str, Any]]
    rows: list[CaseResult] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        """The machine-readable summary (``results.json``): config, datasets and aggregates."""
        return {"config": self.config, "datasets": [asdict(d) for d in self.datasets], "aggregates": self.aggregates}
