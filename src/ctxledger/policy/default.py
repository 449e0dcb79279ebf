"""The default policy shipped with ctxledger (version pinned; its hash goes into every manifest)."""

from __future__ import annotations

from ctxledger.policy.base import Policy, RehydrationParams, SelectionParams
from ctxledger.policy.stages import STAGES

DEFAULT_POLICY_NAME = "ctxledger-default"
DEFAULT_POLICY_VERSION = "4"


def default_policy() -> Policy:
    """Every built-in stage with its defaults, in order, then utility-ranked selection.

    Order: scope → lineage → visibility → privacy → validity → trust → working_set → protection →
    secrets → compaction → memory_first. Hard filters come before protection (a required unit outside the
    scope is still out); secrets, compaction coverage and memory-first come after it, so that they redact
    rather than drop protected units and never summarise them away.
    """
    return Policy(
        name=DEFAULT_POLICY_NAME,
        version=DEFAULT_POLICY_VERSION,
        stages=tuple(cls() for cls in STAGES.values()),
        selection=SelectionParams(),
        rehydration=RehydrationParams(),
    )
