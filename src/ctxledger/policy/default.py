"""The default policy shipped with ctxledger (version pinned; its hash goes into every manifest)."""

from __future__ import annotations

from ctxledger.policy.base import Policy, SelectionParams
from ctxledger.policy.stages import ProtectionStage, ScopeStage, VisibilityStage

DEFAULT_POLICY_NAME = "ctxledger-default"
DEFAULT_POLICY_VERSION = "1"


def default_policy() -> Policy:
    """Scope → visibility → protection, then utility-ranked selection (DESIGN §3)."""
    return Policy(
        name=DEFAULT_POLICY_NAME,
        version=DEFAULT_POLICY_VERSION,
        stages=(ScopeStage(), VisibilityStage(), ProtectionStage()),
        selection=SelectionParams(),
    )
