"""Policies, stages and decisions (seed 004 §4.5).

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

import copy
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from ctxledger.errors import InvalidSetting, PolicyError
from ctxledger.hashing import content_hash
from ctxledger.policy.checks import flag, fractions, number
from ctxledger.policy.contracts import WorkingSetContract, bind_contract
from ctxledger.policy.decisions import (
    VERBATIM_REASONS,
    Outcome,
    PolicyDecision,
    ReasonCode,
    Stage,
    StageContext,
    protected_records,
)
from ctxledger.policy.safety import contracts_problem, stage_list_problem
from ctxledger.retention.rules import RetentionRules
from ctxledger.units import ContextClass

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
    "protected_records",
]


@dataclass(frozen=True, slots=True)
class SelectionParams:
    """Weights of the utility function and per-class caps (fractions of ``B_dynamic``).

    ``utility = w_relevance·relevance + w_recency·recency + w_kind·kind_prior`` with each term in
    [0, 1]; recency halves every ``recency_half_life`` units counted back from the newest. Relevance is
    BM25 on stemmed terms of the query without its question words (``drop_question_words``) — mixed with the
    query's semantic similarity (``semantic_weight``) when the ``semantic`` extra is installed, counted
    ``1 + date_boost`` times for units written on a date the query names — each unit's score plus its
    neighbours' (``neighbour_decay`` per unit of distance, up to ``neighbour_window`` units away;
    :func:`ctxledger.assemble.relevance.spread`), then counted ``1 + speaker_boost`` times for units said by the
    one speaker the query names, then lifted by its session's best score (``session_boost``), normalised to
    [0, 1].

    Which weights apply (the rule, decided per request by the assembler):

    * the retrieval query (``request.query``, else the latest user turn) **is a question**
      (:func:`~ctxledger.assemble.relevance.is_question`) and the agent is **not continuing a tool loop**
      (the newest unit is not a tool exchange): ``question_weights`` ``(w_relevance, w_recency, w_kind)``,
      relevance-dominant: what answers the question matters more than what was said last;
    * otherwise (an instruction, a statement, or the next step of a tool loop): ``w_relevance``,
      ``w_recency``, ``w_kind``, recency-dominant: the agent continues from its latest steps.

    ``question_weights = None`` always uses the second set.

    Raises:
        InvalidSetting: a weight that is negative or not a number; ``recency_half_life`` not > 0;
            ``class_caps`` with a key that is not a context class (``conversation``, ``operational``,
            ``epistemic``, ``provenance``, ``policy``, ``recovery``, ``planning``) or a value outside (0, 1];
            ``question_weights`` not three weights; ``neighbour_decay`` outside [0, 1];
            ``neighbour_window`` not an integer >= 0; ``semantic_weight`` or ``bm25_b`` outside [0, 1];
            ``date_boost``, ``speaker_boost`` or ``session_boost`` negative; ``stable_prefix`` or
            ``drop_question_words`` not a boolean; ``stable_headroom`` outside [0, 0.9]; ``stable_keep`` outside
            [0, 1]; ``ladder`` not a boolean.
    """

    w_relevance: float = 0.4
    w_recency: float = 0.45
    w_kind: float = 0.15
    recency_half_life: float = 4.0
    class_caps: Mapping[str, float] = field(default_factory=dict)
    ladder: bool = True
    """Offer the representation ladder (excerpt, extraction, memory, reference) and omit redundant tool
    outputs (:mod:`ctxledger.assemble.represent`); ``False`` = every unit verbatim or not at all."""
    question_weights: tuple[float, float, float] | None = (0.8, 0.1, 0.1)
    """``(w_relevance, w_recency, w_kind)`` when the query is a question outside a tool loop."""
    neighbour_decay: float = 0.5
    """Share of a neighbour's relevance a unit adds per unit of distance (0 = own score only)."""
    neighbour_window: int = 4
    """How many units on each side count as neighbours."""
    semantic_weight: float = 0.5
    """Share of semantic similarity in relevance when an embedding model is installed (the ``semantic`` extra;
    :func:`ctxledger.assemble.relevance.with_semantic`); 0 = lexical only."""
    stable_prefix: bool = False
    """Grow the previous call's selection by what was written since, while it fits, instead of re-choosing it
    (:mod:`ctxledger.assemble.stability`): consecutive payloads then share their prefix with the provider's cache."""
    stable_headroom: float = 0.9
    """Share of ``B_dynamic`` a re-chosen selection leaves free for the next calls to grow into (with
    ``stable_prefix``, after the first call of a conversation). At 0.9 a re-choice is about the required units,
    the essentials and the turns written since: the cheapest base to grow from under cached-input prices."""
    stable_keep: float = 0.7
    """With ``stable_prefix``, the share of a re-chosen selection's budget that keeps the previous payload's
    leading units unchanged (their cached prefix); 0 = re-choose from scratch."""
    date_boost: float = 1.0
    """How much more a unit written on a date the query names counts (relevance × (1 + date_boost);
    :func:`ctxledger.assemble.dates.with_dates`); 0 = dates ignored."""
    speaker_boost: float = 1.0
    """How much more a unit said by the one speaker the query names counts (relevance × (1 + speaker_boost),
    after the neighbour spread; :func:`ctxledger.assemble.speakers.with_speaker`); while it is above 0, the query's
    semantic similarity is taken without that name (:func:`ctxledger.assemble.speakers.without_speaker`); 0 =
    speakers ignored."""
    session_boost: float = 0.2
    """How much a unit is lifted by the best relevance of the units written the same day (relevance ×
    (1 + session_boost · that day's best, over the maximum); :func:`ctxledger.assemble.dates.with_session`),
    after the neighbour spread; 0 = sessions ignored."""
    drop_question_words: bool = True
    """Leave the query's interrogatives and auxiliary verbs ("what", "did", "would" …;
    :data:`ctxledger.assemble.query.QUESTION_WORDS`) out of its BM25 terms and its semantic vector: they say
    that it asks, not what it asks about, and the index's stop list keeps them; ``False`` = the query as written."""
    bm25_b: float = 0.75
    """BM25's length normalisation in relevance (0 = none, 1 = full; 0.75 is the index's own, bm25s's default)."""

    def __post_init__(self) -> None:
        """Validate every setting (see the class docstring)."""
        for key in ("w_relevance", "w_recency", "w_kind"):
            number(getattr(self, key), "selection", key, low=0.0)
        number(self.recency_half_life, "selection", "recency_half_life", low=0.0, low_open=True)
        caps = fractions(self.class_caps, "selection", "class_caps", [c.value for c in ContextClass])
        object.__setattr__(self, "class_caps", caps)
        flag(self.ladder, "selection", "ladder")
        if self.question_weights is not None:
            qw = self.question_weights
            if isinstance(qw, str) or not isinstance(qw, Sequence) or len(qw) != 3:
                raise InvalidSetting("selection", "question_weights", f"must be 3 weights, got {qw!r}")
            for i, w in enumerate(qw):
                number(w, "selection", f"question_weights[{i}]", low=0.0)
            object.__setattr__(self, "question_weights", tuple(qw))
        number(self.neighbour_decay, "selection", "neighbour_decay", low=0.0, high=1.0)
        number(self.neighbour_window, "selection", "neighbour_window", low=0, integer=True)
        number(self.semantic_weight, "selection", "semantic_weight", low=0.0, high=1.0)
        number(self.date_boost, "selection", "date_boost", low=0.0)
        number(self.speaker_boost, "selection", "speaker_boost", low=0.0)
        number(self.session_boost, "selection", "session_boost", low=0.0)
        flag(self.stable_prefix, "selection", "stable_prefix")
        flag(self.drop_question_words, "selection", "drop_question_words")
        number(self.bm25_b, "selection", "bm25_b", low=0.0, high=1.0)
        number(self.stable_headroom, "selection", "stable_headroom", low=0.0, high=0.9)
        number(self.stable_keep, "selection", "stable_keep", low=0.0, high=1.0)

    def weights(self, question: bool) -> tuple[float, float, float]:
        """``(w_relevance, w_recency, w_kind)`` for a request whose query is (or is not) a question (see above)."""
        if question and self.question_weights is not None:
            return (float(self.question_weights[0]), float(self.question_weights[1]), float(self.question_weights[2]))
        return (self.w_relevance, self.w_recency, self.w_kind)

    def as_dict(self) -> dict[str, Any]:
        """JSON-able form (part of the policy hash)."""
        return {
            "w_relevance": self.w_relevance,
            "w_recency": self.w_recency,
            "w_kind": self.w_kind,
            "recency_half_life": self.recency_half_life,
            "class_caps": dict(sorted(self.class_caps.items())),
            "ladder": self.ladder,
            "question_weights": list(self.question_weights) if self.question_weights is not None else None,
            "neighbour_decay": self.neighbour_decay,
            "neighbour_window": self.neighbour_window,
            "semantic_weight": self.semantic_weight,
            "date_boost": self.date_boost,
            "speaker_boost": self.speaker_boost,
            "session_boost": self.session_boost,
            "drop_question_words": self.drop_question_words,
            "bm25_b": self.bm25_b,
            "stable_prefix": self.stable_prefix,
            "stable_headroom": self.stable_headroom,
            "stable_keep": self.stable_keep,
        }


@dataclass(frozen=True, slots=True)
class RehydrationParams:
    """Phase two of rehydration: when a selected memory's raw artifact may be read back.

    Attributes:
        max_bytes: byte budget for raw artifacts read back into one assembly (bytes, all artifacts together).
        max_artifact_bytes: the largest single artifact that may be read back (bytes).
        located_ranges: when a memory's locators give byte ranges of an artifact
            (``byte_start``/``byte_end``, as :class:`~ctxledger.represent.Locator` writes them), read back
            only those ranges — the evidence the memory was derived from — instead of the whole artifact
            (seed 004 §4.11: rehydration is *bounded*). ``False`` always reads whole artifacts.
        recall_tool: expose the ``recall`` tool to the model (:mod:`ctxledger.assemble.recall`): a reference
            or excerpt it was shown can then be read back by the model itself, under this assembly's hard
            filters, up to ``max_artifact_bytes`` per call.
    """

    max_bytes: int = 65_536
    max_artifact_bytes: int = 32_768
    located_ranges: bool = True
    recall_tool: bool = False

    def __post_init__(self) -> None:
        """Byte budgets are integers > 0; ``located_ranges`` is a boolean.

        Raises:
            InvalidSetting: naming the setting.
        """
        number(self.max_bytes, "rehydration", "max_bytes", low=0, low_open=True, integer=True)
        number(self.max_artifact_bytes, "rehydration", "max_artifact_bytes", low=0, low_open=True, integer=True)
        flag(self.located_ranges, "rehydration", "located_ranges")
        flag(self.recall_tool, "rehydration", "recall_tool")

    def as_dict(self) -> dict[str, Any]:
        """JSON-able form (part of the policy hash; ``recall_tool`` only when on, so other hashes are unchanged)."""
        out: dict[str, Any] = {
            "max_bytes": self.max_bytes,
            "max_artifact_bytes": self.max_artifact_bytes,
            "located_ranges": self.located_ranges,
        }
        if self.recall_tool:
            out["recall_tool"] = True
        return out


@dataclass(frozen=True, slots=True)
class Policy:
    """A named, versioned, ordered set of stages plus selection, rehydration and working-set settings.

    Attributes:
        name, version: the policy's identity (a file's ``[policy]`` table).
        stages: the ordered stages (hard filters, then protection, then representation preferences).
        selection: utility weights and class caps.
        rehydration: the byte budget of phase-two rehydration.
        contracts: working-set contracts (agent × call type) this policy can be bound to.
        contract: the contract bound for one call (set by :meth:`for_request`; ``None`` when unbound).
        retention: what is kept, for how long, and in what form (:mod:`ctxledger.retention.rules`); part
            of the hash when it has rules.
        unsafe_without: safety stages (:data:`~ctxledger.policy.safety.SAFETY_STAGES`) deliberately left
            out; part of the hash and of every manifest's ``policy`` block.

    Raises:
        PolicyError: a safety stage is missing and not named in ``unsafe_without``; a stage is listed twice,
            or a custom stage takes a built-in stage's name; ``unsafe_without`` names something else than a
            left-out safety stage; two contracts bind the same agent and call type.
    """

    name: str
    version: str
    stages: tuple[Stage, ...]
    selection: SelectionParams = field(default_factory=SelectionParams)
    rehydration: RehydrationParams = field(default_factory=RehydrationParams)
    contracts: tuple[WorkingSetContract, ...] = ()
    contract: WorkingSetContract | None = None
    unsafe_without: tuple[str, ...] = ()
    retention: RetentionRules = field(default_factory=RetentionRules)
    _hashed: list[Any] = field(default_factory=list, init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        """Check the stage list, the opt-outs and the contracts (:mod:`ctxledger.policy.safety`)."""
        object.__setattr__(self, "unsafe_without", tuple(self.unsafe_without))
        problem = stage_list_problem(self.stages, self.unsafe_without)
        if problem is not None:
            raise PolicyError(f"policy {self.name}@{self.version}, {problem[0]}: {problem[1]}")
        dup = contracts_problem(self.contracts)
        if dup is not None:
            raise PolicyError(f"policy {self.name}@{self.version}, contracts[{dup[0]}]: {dup[1]}")

    def describe(self) -> dict[str, Any]:
        """The canonical description whose hash identifies the policy (and the contract bound, if any)."""
        out: dict[str, Any] = {
            "name": self.name,
            "version": self.version,
            "stages": [{"name": s.name, "version": s.version, "config": dict(s.config())} for s in self.stages],
            "selection": self.selection.as_dict(),
            "rehydration": self.rehydration.as_dict(),
        }
        if self.unsafe_without:
            out["unsafe_without"] = sorted(self.unsafe_without)
        if self.contracts:
            out["contracts"] = [c.as_dict() for c in self.contracts]
        if self.contract is not None:
            out["contract"] = self.contract.as_dict()
        if not self.retention.empty:
            out["retention"] = self.retention.as_dict()
        return out

    @property
    def hash(self) -> str:
        """``"sha256:<hex>"`` of :meth:`describe` in canonical JSON.

        Kept with a copy of the description it was made from and made again when the description differs (a
        stage's configuration changed in place): describing is cheap next to the canonical JSON and digest, which
        every manifest needs.
        """
        description = self.describe()
        if self._hashed and self._hashed[0] == description:
            return self._hashed[1]  # type: ignore[no-any-return]
        found = content_hash(description)
        self._hashed[:] = [copy.deepcopy(description), found]
        return found

    def stage(self, name: str) -> Stage | None:
        """The first stage with that name, or ``None``."""
        return next((s for s in self.stages if s.name == name), None)

    def for_request(self, request: Any) -> Policy:
        """Bind the contract for the request's ``agent`` and ``call_type`` (seed 001; :func:`bind_contract`).

        The bound policy carries the contract (so it is part of the hash in the manifest) and uses the
        contract's class caps when it names any. Unbound requests get the policy unchanged.

        Raises:
            ConfigurationError: the policy has contracts and the request names an agent or call type
                none of them matches (or, naming only one, several match); the message lists them.
        """
        contract = bind_contract(self.contracts, getattr(request, "agent", None), getattr(request, "call_type", None))
        if contract is None:
            return self
        selection = self.selection
        if contract.class_caps:
            selection = replace(selection, class_caps=dict(contract.class_caps))
        return replace(self, selection=selection, contract=contract)
