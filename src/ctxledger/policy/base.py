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

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime
from enum import StrEnum
from typing import TYPE_CHECKING, Any, ClassVar, Protocol, TypeVar, runtime_checkable

from ctxledger.errors import InvalidSetting, PolicyError
from ctxledger.hashing import content_hash
from ctxledger.policy.checks import flag, fractions, number
from ctxledger.policy.contracts import WorkingSetContract, bind_contract
from ctxledger.retention.rules import RetentionRules

if TYPE_CHECKING:
    from ctxledger.assemble.units import Unit
    from ctxledger.records import Record, ToolArtifact

T = TypeVar("T")


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
    """Covered by an included compaction record (or a checkpoint that restores that history)."""
    COVERED_BY_MEMORY = "covered_by_memory"
    """A raw tool exchange whose results a selectable compact memory already carries (rehydration phase 1)."""
    OUT_OF_CONTRACT = "out_of_contract"
    """Not a source the agent's working-set contract allows for this call type (seed 001 "Per-Agent Working Sets")."""


VERBATIM_REASONS = frozenset(
    {
        "instruction",
        "latest_user_turn",
        "user_constraint",
        "user_correction",
        "approval",
        "active_goal",
        "pending_operation",
        "environment_constraint",
        "unresolved_tool_call",
        "retry_critical",
        "moderator_directive",
        "checkpoint",
    }
)
"""Protection reasons whose units enter verbatim or not at all: never excerpted, summarised or referenced
(seed 001 "Compresión": approval state, policy constraints, user corrections … are never compressed)."""


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


@dataclass
class StageContext:
    """What a stage sees: the request, the candidate records and their atomic units.

    Attributes:
        request: the :class:`~ctxledger.assemble.assembler.AssemblyRequest`.
        records: candidate records in ``seq`` order (already scoped to tenant and conversation). Besides
            the active lineage they may hold records of other branches of the conversation, so that the
            lineage stage can record branch exclusions (DESIGN §3 step 1; seed 004 §4.10).
        units: atomic units built from the records, in ``seq`` order.
        lineage_branches: ids of the branches of the active lineage.
        omitted: ids already omitted by earlier stages (stages may skip them).
        required: unit id → protection reason, filled as protection decisions arrive.
        lineage: the lineage hops (branch id and the last ``seq`` it contributes, inclusive).
        now: the request's clock (aware UTC) for freshness.
        contract: the working-set contract bound to this call, if any.
        marks: record id → the ``mark`` decisions about it, in stage order.
        find_artifacts: bare-hex sha256 → the request tenant's tool artifacts with those bytes, in any
            conversation (``GraphStore.artifacts_by_sha256`` bound to the tenant); ``None`` when the caller
            has no store to search. The validity stage repairs broken provenance with it.
        find_record: record id → the request tenant's record with that id, in any conversation, or ``None``
            (``GraphStore.get`` bound to the tenant); ``None`` when the caller has no store. The privacy and
            visibility stages look up the sources of a derived record that are no candidates with it
            (:mod:`ctxledger.policy.derivation`).
        snapshot_seq: the snapshot's ``seq`` (records of the request's conversation after it are not seen).
        repairs: memory id → {broken source artifact id → the artifact that repairs it}, filled by the
            validity stage; rehydration reads the repaired artifact's bytes instead of the broken one's.
        warnings: inputs the assembly could not use, as ``{code, input, value, detail}`` dicts (an unknown
            record id a checkpoint promotes, an unknown ``exact_evidence`` id, participant or provider …);
            stages append to it, and the manifest carries it as ``warnings``. A warning never opens
            anything up: what it names was not used.
        tools: the tool schemas (OpenAI ``tools`` form) this call exposes, after the contract's phase rules;
            the secrets stage scans them and marks a schema holding a secret by its ref
            :func:`~ctxledger.policy.contracts.tool_ref` (``tools/<name>``).
        memo: a cache of facts that depend only on one unit (or record), kept across assemblies by the
            snapshot the candidates come from (``namespace → key → entry``; see :meth:`memoized` and
            :meth:`scan`). An entry counts only while its objects are the very ones asked about, so a unit
            the snapshot rebuilt (a late tool result completed it) is computed afresh. ``None``: nothing is
            cached.
    """

    request: Any
    records: Sequence[Record]
    units: Sequence[Unit]
    lineage_branches: frozenset[str]
    omitted: set[str] = field(default_factory=set)
    required: dict[str, str] = field(default_factory=dict)
    lineage: Sequence[Any] = ()
    now: datetime | None = None
    contract: Any = None
    marks: dict[str, list[PolicyDecision]] = field(default_factory=dict)
    find_artifacts: Callable[[str], Sequence[ToolArtifact]] | None = None
    find_record: Callable[[str], Record | None] | None = None
    snapshot_seq: int | None = None
    repairs: dict[str, dict[str, ToolArtifact]] = field(default_factory=dict)
    warnings: list[dict[str, str]] = field(default_factory=list)
    tools: Sequence[Mapping[str, Any]] = ()
    memo: dict[Any, dict[str, tuple[Any, Any]]] | None = field(default=None, repr=False)
    _by_id: dict[str, Record] | None = field(default=None, repr=False)
    _live: tuple[int, list[Unit]] | None = field(default=None, repr=False)
    _unit_of: dict[str, Unit] | None = field(default=None, repr=False)

    def record(self, record_id: str) -> Record | None:
        """The candidate record with that id, or ``None``."""
        if self._by_id is None:
            self._by_id = {r.id: r for r in self.records}
        return self._by_id.get(record_id)

    def unit_of(self, record_id: str) -> Unit | None:
        """The unit that carries a record, or ``None`` (records that render to no unit)."""
        if self._unit_of is None:
            self._unit_of = {rid: u for u in self.units for rid in u.record_ids}
        return self._unit_of.get(record_id)

    def in_lineage(self, rec: Record) -> bool:
        """Whether a record lies on the active lineage (its branch is a hop and ``seq`` within the hop's bound)."""
        if not self.lineage:
            return rec.branch_id in self.lineage_branches
        for hop in self.lineage:
            if hop.branch_id == rec.branch_id:
                return hop.max_seq is None or rec.seq <= hop.max_seq
        return False

    def warn(self, code: str, input_name: str, value: str, detail: str) -> None:
        """Record a warning about an input the assembly could not use (once per code and value)."""
        entry = {"code": code, "input": input_name, "value": value, "detail": detail}
        if entry not in self.warnings:
            self.warnings.append(entry)

    def memoized(self, namespace: Any, obj: Any, compute: Callable[[], T]) -> T:
        """``compute()`` for a unit or record, cached in :attr:`memo` under ``namespace`` and ``obj.id``.

        Only for values that depend on ``obj`` alone (and on what ``namespace`` names, e.g. a stage's
        settings), never on the request or on other candidates.
        """
        if self.memo is None:
            return compute()
        table = self.memo.setdefault(namespace, {})
        hit = table.get(obj.id)
        if hit is not None and hit[0] is obj:
            return hit[1]  # type: ignore[no-any-return]
        value = compute()
        table[obj.id] = (obj, value)
        return value

    def scan(self, namespace: Any, items: Sequence[Any], compute: Callable[[Any], Any]) -> list[tuple[Any, Any]]:
        """``(item, compute(item))`` for every item of ``items`` whose value is truthy, in order.

        For a stage whose verdict on one record (or unit) depends on that item and on what ``namespace``
        names (the stage's settings, the request fields it reads) but not on other candidates: history is
        append-only, so the verdicts on a prefix are kept in :attr:`memo` and only new items are computed.
        The cache holds while ``items`` is the same list object and still starts with the same objects
        (its last cached item is checked; the snapshot replaces every unit after one it rebuilds).
        """
        if self.memo is None:
            return [(item, value) for item in items if (value := compute(item))]
        table = self.memo.setdefault(("scan", namespace), {})
        hit = table.get("")
        start, found = 0, []
        if hit is not None:
            seq, count, last, cached = hit
            if seq is items and count <= len(items) and (count == 0 or items[count - 1] is last):
                start, found = count, list(cached)
        for item in items[start:]:
            value = compute(item)
            if value:
                found.append((item, value))
        table[""] = (items, len(items), items[-1] if items else None, found)
        return list(found)

    def live_units(self) -> list[Unit]:
        """Units none of whose records were omitted so far (``omitted`` only grows, so its size dates the list)."""
        if self._live is None or self._live[0] != len(self.omitted):
            omitted = self.omitted
            self._live = (len(omitted), [u for u in self.units if not any(r in omitted for r in u.record_ids)])
        return list(self._live[1])

    def live(self, record_id: str) -> bool:
        """Whether a record is a candidate not omitted so far."""
        return record_id not in self.omitted and self.record(record_id) is not None

    def protected(self) -> dict[str, str]:
        """Record id → why a custom stage may not omit it (the instructions, the latest user turn, required units).

        A custom stage that omits one of these makes the assembly fail with a ``PolicyError``; skip them
        (:func:`ctxledger.policy.safety.protected_records`).
        """
        from ctxledger.policy.safety import protected_records

        return protected_records(self)


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
    [0, 1]; recency halves every ``recency_half_life`` units counted back from the newest. Relevance is
    BM25 on stemmed terms, each unit's score plus its neighbours' (``neighbour_decay`` per unit of
    distance, up to ``neighbour_window`` units away; :func:`ctxledger.assemble.relevance.spread`),
    normalised to [0, 1].

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
            ``neighbour_window`` not an integer >= 0; ``ladder`` not a boolean.
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
    neighbour_window: int = 3
    """How many units on each side count as neighbours."""

    def __post_init__(self) -> None:
        """Validate every setting (see the class docstring)."""
        from ctxledger.assemble.units import ContextClass

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
        }


@dataclass(frozen=True, slots=True)
class RehydrationParams:
    """Phase two of rehydration: when a selected memory's raw artifact may be read back (DESIGN §3 step 6).

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
        """JSON-able form (part of the policy hash)."""
        return {
            "max_bytes": self.max_bytes,
            "max_artifact_bytes": self.max_artifact_bytes,
            "located_ranges": self.located_ranges,
        }


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

    def __post_init__(self) -> None:
        """Check the stage list, the opt-outs and the contracts (:mod:`ctxledger.policy.safety`)."""
        from ctxledger.policy.safety import contracts_problem, stage_list_problem

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
        """``"sha256:<hex>"`` of :meth:`describe` in canonical JSON."""
        return content_hash(self.describe())

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
