"""Policies, stages and decisions (DESIGN §3 steps 2–3, §5; seed 004 §4.5).

A :class:`Policy` is a frozen, versioned value: a name, a version, an ordered tuple of stages and the
selection parameters. Its canonical hash goes into every manifest, so two assemblies made under "the
same policy" can be proven to be so.

A :class:`Stage` is a small callable: configuration in ``__init__``, work in ``__call__``. It looks at
the candidates of one assembly and returns :class:`PolicyDecision` values: *omit* a candidate (with a
:class:`ReasonCode`), *require* it (protection), or *mark* it (kept, with a flag such as ``stale``).
Stages never rank; ranking happens after every hard filter has run ("constraints first, relevance
second", seed 002).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import TYPE_CHECKING, Any, ClassVar, Protocol, runtime_checkable

from ctxledger.hashing import content_hash

if TYPE_CHECKING:
    from ctxledger.assemble.units import Unit
    from ctxledger.records import Record


class ReasonCode(StrEnum):
    """Why a candidate was left out (DESIGN §5). Values only ever grow; a test pins them."""

    OUT_OF_SCOPE = "out_of_scope"
    NOT_IN_LINEAGE = "not_in_lineage"
    PRIVATE_TO_PARTICIPANT = "private_to_participant"
    AUDIT_ONLY = "audit_only"
    NOT_PROMOTED = "not_promoted"
    PRIVACY_RESTRICTED = "privacy_restricted"
    PROVIDER_RESTRICTED = "provider_restricted"
    SECRET = "secret"
    SUPERSEDED = "superseded"
    STALE = "stale"
    CONFLICT_SUPPRESSED = "conflict_suppressed"
    UNTRUSTED_NON_EVIDENCE = "untrusted_non_evidence"
    REDUNDANT = "redundant"
    BUDGET = "budget"
    CLASS_CAP = "class_cap"
    BYTE_BUDGET = "byte_budget"
    ROLE_ORDER = "role_order"
    """Dropped so the payload starts with a user turn after the instructions (provider role order)."""
    SUMMARIZED = "summarized"
    """Covered by an included compaction record."""


class Outcome(StrEnum):
    """What a decision does to its candidate."""

    OMIT = "omit"
    REQUIRE = "require"
    MARK = "mark"


@dataclass(frozen=True, slots=True)
class PolicyDecision:
    """One decision of one stage about one candidate record (DESIGN §1 PolicyDecision).

    Attributes:
        ref: the candidate record id.
        stage: the stage name that decided.
        outcome: omit, require or mark.
        reason: a :class:`ReasonCode` for omissions, or a short protection/mark reason
            (e.g. ``"instruction"``, ``"latest_user_turn"``, ``"unresolved_tool_call"``).
        detail: human-readable detail (never secret content).
    """

    ref: str
    stage: str
    outcome: Outcome
    reason: str
    detail: str = ""


@dataclass(slots=True)
class StageContext:
    """What a stage sees: the request, the candidate records and their atomic units.

    Attributes:
        request: the :class:`~ctxledger.assemble.assembler.AssemblyRequest`.
        records: candidate records in ``seq`` order (already scoped to tenant and conversation).
        units: atomic units built from the records, in ``seq`` order.
        lineage_branches: ids of the branches of the active lineage.
        omitted: ids already omitted by earlier stages (stages may skip them).
    """

    request: Any
    records: Sequence[Record]
    units: Sequence[Unit]
    lineage_branches: frozenset[str]
    omitted: set[str] = field(default_factory=set)


@runtime_checkable
class Stage(Protocol):
    """A policy stage. ``name`` and ``version`` are class attributes; ``config()`` returns its settings."""

    name: ClassVar[str]
    version: ClassVar[str]

    def config(self) -> Mapping[str, Any]:
        """The stage's configuration as JSON-able data (part of the policy hash)."""
        ...

    def __call__(self, ctx: StageContext) -> Iterable[PolicyDecision]:
        """Decide about candidates. Must be deterministic for the same context."""
        ...


@dataclass(frozen=True, slots=True)
class SelectionParams:
    """Weights of the utility function and per-class caps (fractions of ``B_dynamic``).

    ``utility = w_relevance·relevance + w_recency·recency + w_kind·kind_prior`` with each term in
    [0, 1]; recency halves every ``recency_half_life`` units counted back from the newest.
    """

    w_relevance: float = 0.4
    w_recency: float = 0.45
    w_kind: float = 0.15
    recency_half_life: float = 4.0
    class_caps: Mapping[str, float] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        """JSON-able form (part of the policy hash)."""
        return {
            "w_relevance": self.w_relevance,
            "w_recency": self.w_recency,
            "w_kind": self.w_kind,
            "recency_half_life": self.recency_half_life,
            "class_caps": dict(sorted(self.class_caps.items())),
        }


@dataclass(frozen=True, slots=True)
class Policy:
    """A named, versioned, ordered set of stages plus selection parameters."""

    name: str
    version: str
    stages: tuple[Stage, ...]
    selection: SelectionParams = field(default_factory=SelectionParams)

    def describe(self) -> dict[str, Any]:
        """The canonical description whose hash identifies the policy."""
        return {
            "name": self.name,
            "version": self.version,
            "stages": [
                {"name": s.name, "version": s.version, "config": dict(s.config())} for s in self.stages
            ],
            "selection": self.selection.as_dict(),
        }

    @property
    def hash(self) -> str:
        """``"sha256:<hex>"`` of :meth:`describe` in canonical JSON."""
        return content_hash(self.describe())
