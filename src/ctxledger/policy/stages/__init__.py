"""The built-in policy stages (seed 004 §4.5).

Hard filters omit candidates with a reason code before anything is ranked; protection requires what must
stay verbatim; representation preferences (compaction coverage, memory first) run last. Each stage is a
small class: configuration in ``__init__``, work in ``__call__`` (the structlog processor shape), ``name``
and ``version`` as class attributes. :data:`STAGES` maps stage names to classes for policy files.
"""

from __future__ import annotations

from ctxledger.policy.stages.compaction import CompactionStage
from ctxledger.policy.stages.lineage import LineageStage
from ctxledger.policy.stages.memory_first import MemoryFirstStage
from ctxledger.policy.stages.privacy import PrivacyStage
from ctxledger.policy.stages.protection import ProtectionStage
from ctxledger.policy.stages.scope import ScopeStage
from ctxledger.policy.stages.secrets import SecretsStage
from ctxledger.policy.stages.trust import TrustStage
from ctxledger.policy.stages.validity import ValidityStage
from ctxledger.policy.stages.visibility import VisibilityStage
from ctxledger.policy.stages.working_set import WorkingSetStage

STAGES: dict[str, type] = {
    cls.name: cls
    for cls in (
        ScopeStage,
        LineageStage,
        VisibilityStage,
        PrivacyStage,
        ValidityStage,
        TrustStage,
        WorkingSetStage,
        ProtectionStage,
        SecretsStage,
        CompactionStage,
        MemoryFirstStage,
    )
}
"""Built-in stage classes by name, in the default order."""

__all__ = [
    "STAGES",
    "CompactionStage",
    "LineageStage",
    "MemoryFirstStage",
    "PrivacyStage",
    "ProtectionStage",
    "ScopeStage",
    "SecretsStage",
    "TrustStage",
    "ValidityStage",
    "VisibilityStage",
    "WorkingSetStage",
]
