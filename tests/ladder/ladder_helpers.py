"""Shared constants of the ladder tests: which real trajectories they read."""

from __future__ import annotations

MINI_SWE = "mini-swe-agent-deepseek/pvlib__pvlib-python-1072.traj.json"
"""A mini-swe-agent run with import errors, a failing pytest run (``test_sapm_series``) and long listings."""
TAU = "tau-bench/gpt-4o-airline_tasks0-39.json"
TAU_REPEATED = "gpt-4o-airline_tasks0-39-task13-trial0"
"""A tau-bench trajectory that calls ``get_reservation_details`` for XEWRD9 twice with the same answer."""
