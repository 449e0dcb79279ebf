"""The scenario suite of seed 004 §9 (and seed 002's stale-by-commit, seed 001's working sets).

Deterministic graphs and the calls made on them, each checked for what was included, what was omitted and
why, and measured against a full history replay. ``ctxledger eval scenarios`` prints :func:`run_scenarios`'
report.
"""

from __future__ import annotations

from ctxledger.scenarios._graph import GraphBuilder
from ctxledger.scenarios.base import Expect, Scenario
from ctxledger.scenarios.runner import ScenarioResult, format_report, run_scenario, run_scenarios

__all__ = ["Expect", "GraphBuilder", "Scenario", "ScenarioResult", "format_report", "run_scenario", "run_scenarios"]
