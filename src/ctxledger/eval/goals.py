"""The evaluation goals, checked on one evaluation run, and the pass/fail sections of the report.

:func:`goal_checks` reads a run's aggregates (:func:`ctxledger.eval.harness.aggregate`) and says, for
ctxledger's default policy, whether each goal was reached and by how much; :func:`checks_markdown` renders
those checks plus the seed scenarios (:mod:`ctxledger.scenarios`) and the failure cases
(:func:`ctxledger.eval.cases.run_cases`) as the Markdown that ``ctxledger eval run`` appends to
``report.md``. A goal that the run could not check (its dataset, budget or peer was not run) is reported
as such, never as met.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ctxledger.eval.results import dataset_of

__all__ = [
    "GOAL_CATEGORY",
    "GOAL_CPU_MS",
    "GOAL_RECALL_HELD_OUT",
    "LATENCY_PEER",
    "GoalCheck",
    "checks_markdown",
    "conversations_of",
    "goal_checks",
    "held_out_checks",
]

GOAL_RECALL_HELD_OUT: Mapping[int, float] = {2000: 0.85, 8000: 0.95}
"""Recall goals on LoCoMo conversations nobody tuned to (non-adversarial), by budget in tokens."""

GOAL_CATEGORY = (2000, 0.70)
"""``(budget, recall)``: every non-adversarial LoCoMo category must reach this recall at this budget."""

GOAL_CPU_MS = 10.0
"""The default policy's p50 CPU time per call on a LoCoMo conversation must not exceed this (ms)."""

LATENCY_PEER = "langchain-trim-exact"
"""The peer whose selector latency ours must not exceed (langchain-core ``trim_messages``, exact counter)."""


@dataclass(frozen=True, slots=True)
class GoalCheck:
    """One evaluation goal against one run.

    Attributes:
        goal: what is asked, in words.
        measured: what the run measured, in words (``"not in this run"`` when it could not be checked).
        met: whether the goal is reached (``None`` when it could not be checked).
    """

    goal: str
    measured: str
    met: bool | None


def _cells(aggregates: Sequence[Mapping[str, Any]], selector: str) -> list[Mapping[str, Any]]:
    return [a for a in aggregates if a["selector"] == selector]


def _latency_goal(aggregates: Sequence[Mapping[str, Any]], ours: str) -> GoalCheck:
    goal = f"selector latency (p50) no worse than `{LATENCY_PEER}` on the same calls"
    peer = {(a["dataset"], a["budget"]): a for a in _cells(aggregates, LATENCY_PEER)}
    pairs = [
        (a, peer[(a["dataset"], a["budget"])]) for a in _cells(aggregates, ours) if (a["dataset"], a["budget"]) in peer
    ]
    if not pairs:
        return GoalCheck(goal, "not in this run", None)
    ratios = [(a["dataset"], a["budget"], a["latency_ms"]["p50"], b["latency_ms"]["p50"]) for a, b in pairs]
    worst = max(ratios, key=lambda r: r[2] / r[3] if r[3] else float("inf"))
    ours_ms = sorted(r[2] for r in ratios)
    peer_ms = sorted(r[3] for r in ratios)
    measured = (
        f"p50 {ours_ms[0]:.2f}–{ours_ms[-1]:.2f} ms against {peer_ms[0]:.2f}–{peer_ms[-1]:.2f} ms; worst "
        f"{worst[0]} at {worst[1]} tokens: {worst[2]:.2f} ms against {worst[3]:.2f} ms"
    )
    return GoalCheck(goal, measured, all(r[2] <= r[3] for r in ratios))


_OVERFLOW_GOAL = "zero budget overflows (exact counter)"


def goal_checks(aggregates: Sequence[Mapping[str, Any]], ours: str = "ctxledger-default") -> list[GoalCheck]:
    """Check one run's aggregates (:func:`ctxledger.eval.harness.aggregate`) against the evaluation goals.

    Goals: zero provider-rule violations and zero budget overflows
    for ``ours`` over every dataset and budget of the run where it sent a payload (a cell whose every call was
    refused proves neither, and a run where every call was refused checks neither), and a p50 latency no worse
    than :data:`LATENCY_PEER` on every dataset and budget both ran. LoCoMo's recall, category and CPU goals are
    :func:`held_out_checks`'.
    """
    checks: list[GoalCheck] = []
    mine = _cells(aggregates, ours)
    if not mine:
        return [*checks, GoalCheck("zero provider-rule violations and budget overflows", "not in this run", None)]
    sent = [a for a in mine if a["overflow_rate"] is not None]
    if not sent:
        nothing = "no payload sent: every call was refused (the budget is below the required blocks)"
        checks += [GoalCheck(goal, nothing, None) for goal in ("zero provider-rule violations", _OVERFLOW_GOAL)]
        checks.append(_latency_goal(aggregates, ours))
        return checks
    violations = sum(a["violations"] for a in mine)
    overflow = max(a["overflow_rate"] for a in sent)
    scope = f"{len({a['dataset'] for a in sent})} datasets × their budgets"
    if len(sent) < len(mine):
        scope += f" ({len(mine) - len(sent)} dataset × budget cells sent no payload, not counted)"
    checks.append(GoalCheck("zero provider-rule violations", f"{violations} over {scope}", violations == 0))
    checks.append(GoalCheck(_OVERFLOW_GOAL, f"max overflow rate {overflow:.3f} over {scope}", overflow == 0))
    checks.append(_latency_goal(aggregates, ours))
    return checks


def _locomo_cells(aggregates: Sequence[Mapping[str, Any]], ours: str) -> list[Mapping[str, Any]]:
    return [a for a in _cells(aggregates, ours) if dataset_of(a["dataset"]) in ("locomo", "locomo-memory")]


def held_out_checks(
    aggregates: Sequence[Mapping[str, Any]],
    ours: str = "ctxledger-default",
    conversations: Mapping[str, Sequence[str]] | None = None,
) -> list[GoalCheck]:
    """Check LoCoMo results against the LoCoMo goals, for ``locomo`` and ``locomo-memory`` alike.

    Goals: recall (:data:`GOAL_RECALL_HELD_OUT`), every non-adversarial category at :data:`GOAL_CATEGORY`, and a
    p50 CPU time per call of at most :data:`GOAL_CPU_MS` on every LoCoMo dataset and budget of the run. A goal
    whose dataset or budget was not run is "not in this run". The goals are judged on whatever conversations the
    run read, not on a held-out split: each goal names them (``conversations``: dataset label → the conversation
    ids its cases came from, in order; without it, "this run's LoCoMo conversations").
    """
    judged = _judged_on(aggregates, ours, conversations)
    cells = _locomo_cells(aggregates, ours)
    checks = []
    for budget, target in GOAL_RECALL_HELD_OUT.items():
        goal = f"LoCoMo goal: recall ≥ {target:.2f} at {budget} tokens ({judged})"
        found = [a for a in cells if a["budget"] == budget and a["recall"] is not None]
        if not found:
            checks.append(GoalCheck(goal, "not in this run", None))
            continue
        measured = ", ".join(f"{a['dataset']} {a['recall']:.3f}" for a in found)
        checks.append(GoalCheck(goal, measured, all(a["recall"] >= target for a in found)))
    budget, target = GOAL_CATEGORY
    goal = f"LoCoMo goal: every category ≥ {target:.2f} at {budget} tokens, adversarial excluded ({judged})"
    found = [a for a in cells if a["budget"] == budget]
    if not found:
        checks.append(GoalCheck(goal, "not in this run", None))
    else:
        low = [
            (a["dataset"], k, v)
            for a in found
            for k, v in a["recall_by_category"].items()
            if v is not None and "adversarial" not in k and v < target
        ]
        measured = "; ".join(f"{d} {k} {v:.3f}" for d, k, v in low) if low else "every category reaches it"
        checks.append(GoalCheck(goal, measured, not low))
    goal = f"LoCoMo goal: selector p50 CPU time ≤ {GOAL_CPU_MS:.0f} ms per call ({judged})"
    timed = [a for a in cells if a["latency_ms"].get("cpu_p50") is not None]
    if not timed:
        checks.append(GoalCheck(goal, "not in this run", None))
    else:
        measured = ", ".join(f"{a['dataset']} at {a['budget']}: {a['latency_ms']['cpu_p50']:.1f} ms CPU" for a in timed)
        checks.append(GoalCheck(goal, measured, all(a["latency_ms"]["cpu_p50"] <= GOAL_CPU_MS for a in timed)))
    return checks


def _judged_on(
    aggregates: Sequence[Mapping[str, Any]], ours: str, conversations: Mapping[str, Sequence[str]] | None
) -> str:
    """Which conversations the LoCoMo goals are judged on, as words."""
    labels = dict.fromkeys(a["dataset"] for a in _locomo_cells(aggregates, ours))
    if not conversations or not labels or any(label not in conversations for label in labels):
        return "judged on this run's LoCoMo conversations, not a held-out split"
    parts = []
    for label in labels:
        ids = list(conversations[label])
        shown = ", ".join(ids) if len(ids) <= 4 else f"{ids[0]}, {ids[1]} … {ids[-1]}"
        parts.append(f"{label}: {len(ids)} conversation{'s' if len(ids) != 1 else ''} {shown}")
    return "judged on " + "; ".join(parts) + ", not a held-out split"


def conversations_of(rows: Sequence[Any]) -> dict[str, list[str]]:
    """Dataset label → the conversation ids of its LoCoMo cases, in first-seen order.

    A case id ``"conv-26/q12"`` is of conversation ``conv-26``; ``rows`` are the run's case results.
    """
    out: dict[str, dict[str, None]] = {}
    for row in rows:
        if dataset_of(row.dataset) in ("locomo", "locomo-memory") and "/" in row.case_id:
            out.setdefault(row.dataset, {})[row.case_id.split("/", 1)[0]] = None
    return {label: list(ids) for label, ids in out.items()}


def checks_markdown(goals: Sequence[GoalCheck], scenarios: Sequence[Any] = (), cases: Sequence[Any] = ()) -> str:
    """Markdown sections for the report: the goals, then the seed scenarios and failure cases as pass/fail.

    ``scenarios`` are :class:`ctxledger.scenarios.ScenarioResult`, ``cases`` are
    :class:`ctxledger.eval.cases.CaseOutcome` (either may be empty: the section says it was not run).
    """
    mark = {True: "met", False: "**not met**", None: "not checked"}
    out = ["## Goals", "", "| goal | measured | result |", "|---|---|---|"]
    out += [f"| {g.goal} | {g.measured} | {mark[g.met]} |" for g in goals]
    out += ["", "## Seed scenarios (seed 004 §9, seed 002, seed 001)", ""]
    if scenarios:
        out += ["| scenario | replay tok | assembled tok | required kept | result |", "|---|---|---|---|---|"]
        for r in scenarios:
            result = "pass" if r.passed else "**fail**: " + "; ".join(r.failures)
            kept = f"{r.required_kept}/{r.required_total}"
            out.append(f"| {r.name} | {r.replay_tokens} | {r.assembled_tokens} | {kept} | {result} |")
    else:
        out.append("_not run_")
    out += ["", "## Failure cases (shared/cases)", ""]
    if cases:
        out += ["| case | kind | input tok | result |", "|---|---|---|---|"]
        for c in cases:
            result = "pass" if c.passed else "**fail**: " + "; ".join(c.failures)
            tokens = "refused" if c.input_tokens is None else str(c.input_tokens)
            out.append(f"| {c.case_id} | {c.kind} | {tokens} | {result} |")
    else:
        out.append("_not run_")
    return "\n".join(out) + "\n"
