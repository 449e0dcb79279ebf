"""The vocabulary of policy stages: reason codes, decisions, the stage context and the stage protocol.

A stage looks at the candidates of one assembly (:class:`StageContext`) and returns
:class:`PolicyDecision` values: *omit* a candidate (with a :class:`ReasonCode`), *require* it
(protection), or *mark* it (kept, with a flag such as ``stale``). This module sits below the stages, the
safety checks and :class:`~ctxledger.policy.base.Policy`, so each of them imports it downward.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from enum import StrEnum
from typing import TYPE_CHECKING, Any, ClassVar, Protocol, TypeVar, runtime_checkable

from ctxledger.records import Message, Participant, Role
from ctxledger.units import UnitKind

if TYPE_CHECKING:
    from ctxledger.facts import RecordFacts
    from ctxledger.records import Record, ToolArtifact
    from ctxledger.units import Unit

T = TypeVar("T")


class ReasonCode(StrEnum):
    """Why a candidate was left out. Values only ever grow; a test pins them."""

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
    EMPTY = "empty"
    """A message that renders to nothing a provider accepts (blank text, no parts, no tool calls): never sent."""


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
    }
)
"""Protection reasons whose units enter verbatim or not at all: never excerpted, summarised or referenced
(seed 001 "Compresión": approval state, policy constraints, user corrections … are never compressed).

A checkpoint is not among them: its bytes are run state that ``ctxledger rehydrate`` returns whole, and an exact
excerpt with locators loses none of it, whereas refusing to cut it makes every later call of a small window fail
once a turn follows it (it stops being the latest step)."""


class Outcome(StrEnum):
    """What a decision does to its candidate."""

    OMIT = "omit"
    REQUIRE = "require"
    MARK = "mark"


@dataclass(frozen=True, slots=True)
class PolicyDecision:
    """One decision of one stage about one candidate record.

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
            lineage stage can record branch exclusions (seed 004 §4.10).
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
        facts: record id → the record's write-path facts (:class:`~ctxledger.facts.RecordFacts`: secret
            findings, instruction-like phrase, inherited restrictions), computed when it was written. Stages
            read them instead of rescanning; a record without an entry (a request's extra records) is
            computed as before.
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
    facts: Mapping[str, RecordFacts] = field(default_factory=dict, repr=False)
    memo: dict[Any, dict[str, tuple[Any, Any]]] | None = field(default=None, repr=False)
    _by_id: dict[str, Record] | None = field(default=None, repr=False)
    _live: tuple[int, list[Unit]] | None = field(default=None, repr=False)
    _unit_of: dict[str, Unit] | None = field(default=None, repr=False)
    _scanned: dict[int, list[Any]] = field(default_factory=dict, repr=False)
    _differences: dict[tuple[int, int], tuple[set[int], set[int], set[int]]] = field(default_factory=dict, repr=False)
    _participants: dict[str, Participant] | None = field(default=None, repr=False)

    def participants(self) -> dict[str, Participant]:
        """Participant records among the candidates, by id (found once per context, each record's kind kept)."""
        if self._participants is None:
            found = self.scan("participant records", self.records, _is_participant)
            self._participants = {r.id: r for r, _ in found}
        return self._participants

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

    def scan(
        self, namespace: Any, items: Sequence[Any], compute: Callable[[Any], Any], *, slot: str | None = None
    ) -> list[tuple[Any, Any]]:
        """``(item, compute(item))`` for every item of ``items`` whose value is truthy, in order.

        For a stage whose verdict on one record (or unit) depends on that item and on what ``namespace``
        names (the stage's settings, the request fields it reads) but not on other candidates. Verdicts are
        kept in :attr:`memo` per item object (a unit the snapshot rebuilt is a new object and is computed
        afresh), so a call computes only the items no earlier call saw, whichever subset of the history it
        visits, and the set operations that find them and the truthy verdicts among ``items`` run in C: a call
        costs the new items plus the truthy verdicts, not a Python step per candidate. The items and truthy
        verdicts of the last list asked are kept apart too, so a list that mostly repeats the last one looks up
        only its other items in the verdicts of the whole history.

        ``slot``: the memo keeps the verdicts of one namespace per slot, dropping the previous namespace's when
        another is asked for (for namespaces that name request values which change from call to call, such
        as what is promoted to the caller), so the memo does not grow with the number of distinct requests.
        """
        if self.memo is None:
            return [(item, value) for item in items if (value := compute(item))]
        if slot is not None:
            previous = self.memo.get(("slot", slot))
            if previous is not None and previous[1] != namespace:
                self.memo.pop(("scan", previous[1]), None)
            self.memo[("slot", slot)] = (slot, namespace)  # type: ignore[assignment]
        # seen: id(item) -> item for every item computed (holding the item keeps its id from being reused);
        # truthy: id(item) -> (item, value) for those whose verdict is truthy; the last list asked and its answer
        # (the list, its length, its last item, the answer, its ids, id -> (item, value) of its truthy verdicts)
        state = self.memo.setdefault(("scan", namespace), [{}, {}, None])  # type: ignore[arg-type]
        seen, truthy, last = state
        # the very list of the last call, unchanged: a snapshot refresh rebuilds a list's tail in place, and its
        # last item is then a new object
        if last is not None and last[0] is items and last[1] == len(items) and (not items or items[-1] is last[2]):
            return list(last[3])
        ids, idset = self._ids(items)
        if last is None:
            fresh, present = idset, {}
        else:  # an item of the last list was computed then, and its verdict has not changed since
            fresh, kept = self._difference(idset, last[4]), last[5]
            present = {i: kept[i] for i in kept.keys() & idset}
        for k in self._places(items, fresh.difference(seen)):  # set operations with a dict run in C
            item = items[k]
            value = compute(item)
            seen[id(item)] = item
            if value:
                truthy[id(item)] = (item, value)
        for i in fresh.intersection(truthy):
            present[i] = truthy[i]
        if len(ids) == len(idset):  # each item once: the truthy verdicts in list order
            found = [present[i] for i in ids if i in present] if present else []
        else:
            pos = self._position_map(items)
            found = [present[i] for i in sorted(present, key=pos.__getitem__)]
        state[2] = (items, len(items), items[-1] if items else None, found, idset, present)
        return list(found)

    def _places(self, items: Sequence[Any], new: Collection[int]) -> list[int]:
        """Positions in ``items`` of the items whose ids are ``new``, ascending (the last one of an item listed twice).

        A few are looked up in the list of ids (a C-level search each); more through a map of every position.
        """
        if not new:
            return []
        ids, idset = self._ids(items)
        if len(new) <= 16 and len(ids) == len(idset):
            return sorted(map(ids.index, new))
        pos = self._position_map(items)
        return sorted(pos[i] for i in new)

    def _difference(self, ids: set[int], last: set[int]) -> set[int]:
        """``ids - last``, computed once per context for all the namespaces whose last list was the same one.

        Most stages scan the same candidate list, call after call.
        """
        hit = self._differences.get((id(ids), id(last)))
        if hit is None or hit[0] is not ids or hit[1] is not last:
            hit = self._differences[(id(ids), id(last))] = (ids, last, ids.difference(last))
        return hit[2]

    def _ids(self, items: Sequence[Any]) -> tuple[list[int], set[int]]:
        """``(ids in order, set of ids)`` of a candidate list, computed once per list and call."""
        hit = self._scanned.get(id(items))
        if hit is None or hit[0] is not items:
            ids = list(map(id, items))
            hit = self._scanned[id(items)] = [items, ids, set(ids), None]
        return hit[1], hit[2]

    def _position_map(self, items: Sequence[Any]) -> dict[int, int]:
        """Item id → position (the last, for an item listed twice) of a candidate list, made once per list and call."""
        self._ids(items)
        hit = self._scanned[id(items)]
        if hit[3] is None:
            hit[3] = dict(zip(hit[1], range(len(hit[1])), strict=True))
        return hit[3]  # type: ignore[no-any-return]

    def live_units(self) -> list[Unit]:
        """Units none of whose records were omitted so far (``omitted`` only grows, so its size dates the list)."""
        if self._live is None or self._live[0] != len(self.omitted):
            omitted = self.omitted
            self._live = (len(omitted), [u for u in self.units if omitted.isdisjoint(u.record_ids)])
        return list(self._live[1])

    def live(self, record_id: str) -> bool:
        """Whether a record is a candidate not omitted so far."""
        return record_id not in self.omitted and self.record(record_id) is not None

    def protected(self) -> dict[str, str]:
        """Record id → why a custom stage may not omit it (the instructions, the latest user turn, required units).

        A custom stage that omits one of these makes the assembly fail with a ``PolicyError``; skip them
        (:func:`protected_records`).
        """
        return protected_records(self)


def _is_participant(record: Record) -> bool:
    return isinstance(record, Participant)


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


def protected_records(ctx: StageContext) -> dict[str, str]:
    """Record id → why no custom stage may omit it: ``instruction``, ``latest_user_turn``, or a protection reason.

    Computed over the live units (none of whose records was omitted so far): every instruction unit, the
    newest user message, and every unit already required (by the protection stage, when it ran earlier).
    """
    out: dict[str, str] = {}
    latest_user = None
    for unit in ctx.units:
        if not ctx.omitted.isdisjoint(unit.record_ids):
            continue
        why = "instruction" if unit.kind is UnitKind.INSTRUCTION else ctx.required.get(unit.id)
        if why:
            out.update(dict.fromkeys(unit.record_ids, why))
        first = unit.records[0]
        if unit.kind is UnitKind.MESSAGE and isinstance(first, Message) and first.role is Role.USER:
            latest_user = unit
    if latest_user is not None:
        out.update(dict.fromkeys(latest_user.record_ids, "latest_user_turn"))
    return out
