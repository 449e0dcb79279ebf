"""ctxledger: policy-governed context assembly for LLM agents.

The public API is re-exported here; see the README for a tour.
"""

from ctxledger.assemble.assembler import Assembly, AssemblyRequest
from ctxledger.budget import Budget
from ctxledger.errors import (
    ConfigurationError,
    CtxledgerError,
    DuplicateRecordId,
    InputError,
    ProviderContractError,
    RecordNotFound,
    RequiredBlocksDoNotFit,
)
from ctxledger.ledger import Ledger
from ctxledger.policy.base import Policy, ReasonCode
from ctxledger.policy.default import default_policy
from ctxledger.policy.loader import load_policy, loads_policy
from ctxledger.recorder import Recorder, ToolExchange
from ctxledger.store import open_store
from ctxledger.tokens import get_counter

__version__ = "0.1.0"

__all__ = [
    "Assembly",
    "AssemblyRequest",
    "Budget",
    "ConfigurationError",
    "CtxledgerError",
    "DuplicateRecordId",
    "InputError",
    "Ledger",
    "Policy",
    "ProviderContractError",
    "ReasonCode",
    "RecordNotFound",
    "Recorder",
    "RequiredBlocksDoNotFit",
    "ToolExchange",
    "default_policy",
    "get_counter",
    "load_policy",
    "loads_policy",
    "open_store",
]
