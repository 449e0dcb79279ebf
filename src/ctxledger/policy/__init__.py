"""Policies: versioned, ordered stages that decide what a model call may see.

Public API: :class:`Policy`, :class:`PolicyDecision`, :class:`ReasonCode`, :class:`StageContext` and the
:class:`Stage` protocol (:mod:`.base`); the built-in stages (:mod:`.stages`); :func:`default_policy`;
:func:`load_policy` / :func:`loads_policy` for TOML policy files (:mod:`.loader`);
:class:`WorkingSetContract` (:mod:`.contracts`). The safety rails — mandatory stages, the explicit
``unsafe_without`` opt-out, the checks on custom stages' decisions — are :mod:`.safety`; setting validation
is :mod:`.checks`.
"""

from __future__ import annotations

from ctxledger.policy.base import (
    VERBATIM_REASONS,
    Outcome,
    Policy,
    PolicyDecision,
    ReasonCode,
    RehydrationParams,
    SelectionParams,
    Stage,
    StageContext,
)
from ctxledger.policy.contracts import WorkingSetContract
from ctxledger.policy.default import default_policy
from ctxledger.policy.loader import load_policy, loads_policy, policy_from_dict

__all__ = [
    "VERBATIM_REASONS",
    "Outcome",
    "Policy",
    "PolicyDecision",
    "ReasonCode",
    "RehydrationParams",
    "SelectionParams",
    "Stage",
    "StageContext",
    "WorkingSetContract",
    "default_policy",
    "load_policy",
    "loads_policy",
    "policy_from_dict",
]
