"""The budget's reach: the units of a snapshot one assembly visits, and the count of the rest.

An assembly can only send what fits ``B_input``, so it visits only what could enter it:

* the newest units worth :data:`REACH_BUDGETS` × ``B_input`` tokens (the *tail*; never fewer than
  :data:`TAIL_MIN_UNITS` units);
* the best lexical matches of the query older than the tail (at most :data:`MAX_MATCHES` units), each with its
  two neighbours (a question and its answer), worth up to :data:`MATCH_BUDGETS` × ``B_input`` tokens together
  (a neighbour counts once, when it first enters: scattered matches bring more neighbours, not more visits);
* the units that are pinned whatever their age (:class:`ReachIndex`): instructions, memories, compactions,
  checkpoints, pending or deferred calls, failed exchanges no later call of the same tool succeeded, tagged
  records, user turns whose wording states a constraint or a correction, records that claim to supersede
  others; the records they name (memory sources, promoted records, superseded records) and the records the
  request names as exact evidence;
* the turns up to and including the first user turn, and for every older unit visited the newest user turn
  before it (the role-order repairs need a user turn to open the payload with).

Everything else is *beyond reach*: it is never filtered, scored or costed, and the manifest counts it in one
omission group, reason :data:`BEYOND_REACH`. Skipping it is safe for the payload's budget: the tail alone
holds more than ``B_input``. When the policy leaves out so much of what was visited that the rest cannot
fill ``B_dynamic``, the assembler widens the reach (:func:`widened`) and runs again.

When the whole snapshot costs at most the tail's share, every unit is visited (:attr:`Reach.complete`), and
the assembly is exactly the one without a reach.

:class:`ReachIndex` is kept by the snapshot and updated by the delta of each refresh (units appended, a
rebuilt tail truncated), so finding the reach never walks the history: the tail is found by bisecting the
per-unit token sums, the pins are read from short position lists.
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from operator import attrgetter

import numpy as np

from ctxledger.policy.stages.protection import TAG_REASONS, wording_reason
from ctxledger.records import Checkpoint, Message, Participant, Record, Role, ToolMemory, ToolStatus
from ctxledger.units import Unit, UnitKind

REACH_BUDGETS = 2
"""The tail holds the newest units worth this many ``B_input`` (tokens, verbatim)."""
MATCH_BUDGETS = 2
"""Lexical matches older than the tail are visited up to this many ``B_input`` (tokens, verbatim)."""
MAX_MATCHES = 256
"""Lexical matches visited at most (before their neighbours are added)."""
TAIL_MIN_UNITS = 16
"""The newest units always visited, whatever they cost."""
BEYOND_REACH = "budget (beyond reach)"
"""The omission reason of the units an assembly never visited."""
REACH_STAGE = "reach"
"""The stage name of that omission group."""

_PIN_TAGS = frozenset(TAG_REASONS)
_ALWAYS = (UnitKind.INSTRUCTION, UnitKind.MEMORY, UnitKind.COMPACTION, UnitKind.CHECKPOINT)


@dataclass(slots=True)
class ReachIndex:
    """Per-snapshot positions that find the reach without a walk, updated by each refresh's delta.

    Attributes:
        pins: positions of units visited whatever their age (see the module docstring), ascending.
        failed: positions of failed tool exchanges, ascending (pinned while no later success of the same tool).
        failed_tools: position of a failed exchange → the tools it called.
        successes: tool name → positions of its succeeded exchanges, ascending.
        users: positions of user message units, ascending.
        unit_of: record id → position of the unit that carries it.
        external: external id → position of the unit that carries the record.
        records_before: ``records_before[i]`` = records carried by units ``0 … i-1``.
        loose: the records that render to no unit (participants, skill states …), by id, in ``seq`` order.
        moderators: whether any participant record has the role ``moderator`` (then every unit is visited).
    """

    pins: list[int] = field(default_factory=list)
    failed: list[int] = field(default_factory=list)
    failed_tools: dict[int, tuple[str, ...]] = field(default_factory=dict)
    successes: dict[str, list[int]] = field(default_factory=dict)
    users: list[int] = field(default_factory=list)
    unit_of: dict[str, int] = field(default_factory=dict)
    external: dict[str, int] = field(default_factory=dict)
    records_before: list[int] = field(default_factory=lambda: [0])
    loose: dict[str, Record] = field(default_factory=dict)
    moderators: bool = False

    def truncate(self, units: Sequence[Unit], start: int, from_seq: int) -> None:
        """Forget units ``start …`` of ``units`` and loose records from ``from_seq`` on (they are rebuilt next)."""
        for unit in units[start:]:
            for rid in unit.record_ids:
                self.unit_of.pop(rid, None)
            for rec in unit.records:
                if rec.external_id and self.external.get(rec.external_id, -1) >= start:
                    del self.external[rec.external_id]
        for pos in [p for p in self.failed_tools if p >= start]:
            del self.failed_tools[pos]
        for rid in [rid for rid, rec in self.loose.items() if rec.seq >= from_seq]:
            del self.loose[rid]
        for positions in (self.pins, self.failed, self.users, *self.successes.values()):
            del positions[bisect.bisect_left(positions, start) :]
        for name in [n for n, positions in self.successes.items() if not positions]:
            del self.successes[name]
        del self.records_before[start + 1 :]

    def extend(self, units: Sequence[Unit], start: int, records: Sequence[Record]) -> None:
        """Index ``units`` (built from ``records``), which take the positions ``start, start + 1, …``.

        A record of ``records`` is loose when neither ``units`` nor a unit already indexed carries it: a refresh
        rebuilds from the oldest exchange a late result completes, and the records it rebuilds from include the
        late results of older exchanges, which stay in their (kept) units.
        """
        carried = {rid for u in units for rid in u.record_ids}
        for rec in records:
            if rec.id not in carried and rec.id not in self.unit_of:
                self.loose[rec.id] = rec
                if isinstance(rec, Participant) and rec.role == "moderator":
                    self.moderators = True
        for pos, unit in enumerate(units, start):
            for rid in unit.record_ids:
                self.unit_of[rid] = pos
            for rec in unit.records:
                if rec.external_id:
                    self.external.setdefault(rec.external_id, pos)
            self.records_before.append(self.records_before[-1] + len(unit.record_ids))
            if unit.kind is UnitKind.MESSAGE and _is_user(unit.records[0]):
                self.users.append(pos)
            if unit.kind is UnitKind.TOOL_EXCHANGE and unit.status is ToolStatus.FAILED:
                self.failed.append(pos)
                self.failed_tools[pos] = unit.tool_names
            elif unit.kind is UnitKind.TOOL_EXCHANGE and unit.status is ToolStatus.SUCCEEDED:
                for name in unit.tool_names:
                    self.successes.setdefault(name, []).append(pos)
            if pinned(unit):
                self.pins.append(pos)

    def unresolved_failures(self, before: int) -> list[int]:
        """Positions below ``before`` of failed exchanges that no later exchange of one of their tools succeeded."""
        out = []
        end = bisect.bisect_left(self.failed, before)
        for pos in self.failed[:end]:
            names = self.failed_tools.get(pos, ())
            if not any((found := self.successes.get(n)) and found[-1] > pos for n in names):
                out.append(pos)
        return out


def pinned(unit: Unit) -> bool:
    """Whether a unit is visited whatever its age (the module docstring's list, failures aside)."""
    if unit.kind in _ALWAYS:
        return True
    if unit.kind is UnitKind.TOOL_EXCHANGE and unit.status in (ToolStatus.PENDING, ToolStatus.DEFERRED):
        return True
    for rec in unit.records:
        if _tags(rec) & _PIN_TAGS or getattr(rec, "supersedes", ()):
            return True
    first = unit.records[0]
    if unit.kind is UnitKind.MESSAGE and _is_user(first):
        return wording_reason(unit.text) is not None
    return False


def _is_user(rec: Record) -> bool:
    return isinstance(rec, Message) and rec.role is Role.USER


def _tags(rec: Record) -> frozenset[str]:
    value = rec.meta.get("tags")
    if isinstance(value, str):
        return frozenset({value})
    if isinstance(value, list | tuple | set | frozenset):
        return frozenset(str(v) for v in value)
    return frozenset()


def named_records(unit: Unit) -> list[str]:
    """Record ids a pinned unit names: memory sources, records a checkpoint promotes, superseded records."""
    out: list[str] = []
    for rec in unit.records:
        if isinstance(rec, ToolMemory):
            out += list(rec.source_artifact_ids)
        if isinstance(rec, Checkpoint):
            listed = rec.state.get("promote", ())
            if isinstance(listed, list | tuple):
                out += [str(i) for i in listed]
        out += [str(i) for i in getattr(rec, "supersedes", ()) or ()]
    return out


@dataclass(frozen=True, slots=True)
class Reach:
    """The units one assembly visits.

    Attributes:
        positions: positions (in the snapshot's units) of the visited units, ascending.
        total: how many units the snapshot has.
        tail_start: position of the oldest unit of the tail.
        budgets: the tail's size in ``B_input`` (``inf``: every unit).
    """

    positions: tuple[int, ...]
    total: int
    tail_start: int
    budgets: float = REACH_BUDGETS

    @property
    def complete(self) -> bool:
        """Whether every unit of the snapshot is visited."""
        return len(self.positions) == self.total

    def beyond_runs(self) -> list[tuple[int, int]]:
        """The unvisited positions as inclusive runs ``(first, last)``, oldest first."""
        runs = []
        prev = -1
        for pos in (*self.positions, self.total):
            if pos > prev + 1:
                runs.append((prev + 1, pos - 1))
            prev = pos
        return runs


def find_reach(
    units: Sequence[Unit],
    index: ReachIndex,
    token_sums: Sequence[int],
    input_tokens: int,
    *,
    scores: np.ndarray | None = None,
    named: Iterable[str] = (),
    budgets: float = REACH_BUDGETS,
) -> Reach:
    """The units an assembly with ``B_input = input_tokens`` visits (see the module docstring).

    Args:
        units: the snapshot's units in ``seq`` order.
        index: the snapshot's :class:`ReachIndex` (aligned with ``units``).
        token_sums: ``token_sums[i]`` = verbatim tokens of units ``0 … i-1`` (``len(units) + 1`` entries).
        input_tokens: ``B_input`` in tokens.
        scores: relevance of every unit (aligned with ``units``), or ``None``.
        named: record ids the request names (exact evidence).
        budgets: the tail's size in ``B_input`` (:data:`REACH_BUDGETS`; larger when widened).
    """
    n = len(units)
    total = token_sums[n]
    limit = budgets * max(input_tokens, 1)
    if index.moderators or total <= limit or n <= TAIL_MIN_UNITS:
        return Reach(tuple(range(n)), n, 0, budgets)
    start = max(0, bisect.bisect_right(token_sums, total - limit) - 1)
    start = min(start, n - TAIL_MIN_UNITS)
    extra: set[int] = set()
    end_pins = bisect.bisect_left(index.pins, start)
    extra.update(index.pins[:end_pins])
    extra.update(index.unresolved_failures(start))
    for pos in list(extra):
        for rid in named_records(units[pos]):
            found = index.unit_of.get(rid)
            if found is not None:
                extra.add(found)
    for rid in named:
        found = index.unit_of.get(rid, index.external.get(rid))
        if found is not None:
            extra.add(found)
    if scores is not None and len(scores) == n:
        extra.update(_matches(scores, token_sums, start, input_tokens))
    if index.users:
        extra.update(range(0, index.users[0] + 1))
    for pos in list(extra):
        before = bisect.bisect_left(index.users, pos) - 1
        if before >= 0:
            extra.add(index.users[before])
    positions = sorted(p for p in extra if p < start)
    return Reach((*positions, *range(start, n)), n, start, budgets)


def unvisited_newer(reach: Reach) -> dict[int, int]:
    """Position of each visited unit older than the tail → how many unvisited units are newer than it."""
    out = {}
    count = len(reach.positions)
    for k, pos in enumerate(reach.positions):
        if pos >= reach.tail_start:
            break
        out[pos] = (reach.total - 1 - pos) - (count - 1 - k)
    return out


def _matches(scores: np.ndarray, token_sums: Sequence[int], start: int, input_tokens: int) -> set[int]:
    """The best-scoring units before ``start`` with their neighbours, worth :data:`MATCH_BUDGETS` × ``B_input``."""
    older = scores[:start]
    bound = _bound(older)
    positive = np.flatnonzero(older > 0) if bound <= 0 else np.flatnonzero(older >= bound)
    if not len(positive):
        return set()
    if len(positive) > MAX_MATCHES:  # only those at least as good as the MAX_MATCHES-th best are sorted
        values = older[positive]
        kth = np.partition(values, len(values) - MAX_MATCHES)[len(values) - MAX_MATCHES]
        positive = positive[values >= kth]
    best = positive[np.argsort(-older[positive], kind="stable")[:MAX_MATCHES]]
    out: set[int] = set()
    spent = 0
    for pos in best.tolist():
        for p in (pos - 1, pos, pos + 1):
            if 0 <= p < start and p not in out:
                spent += token_sums[p + 1] - token_sums[p]
                out.add(p)
        if spent > MATCH_BUDGETS * input_tokens:
            break
    return out


_BLOCK = 64
"""Scores per block whose maximum :func:`_bound` ranks."""


def _bound(scores: np.ndarray) -> float:
    """A score no higher than the :data:`MAX_MATCHES`-th best of ``scores``, found without ranking them all.

    The :data:`MAX_MATCHES`-th largest of the maxima of whole blocks of :data:`_BLOCK` scores: that many blocks
    each hold a score at least this high, so the best :data:`MAX_MATCHES` scores are all ``>=`` it and the scores
    below it can be passed over. ``-inf`` when there are fewer blocks than that, or a maximum is not a number.
    """
    blocks = len(scores) // _BLOCK
    if blocks < MAX_MATCHES:
        return -math.inf
    maxima = scores[: blocks * _BLOCK].reshape(blocks, _BLOCK).max(axis=1)
    if np.isnan(maxima).any():
        return -math.inf
    return float(np.partition(maxima, blocks - MAX_MATCHES)[blocks - MAX_MATCHES])


def widened(reach: Reach, budgets: float) -> float | None:
    """The tail size (in ``B_input``) to try after a reach of ``budgets`` visited too little; ``None``: complete."""
    return None if reach.complete else budgets * 4


def beyond_count(index: ReachIndex, reach: Reach) -> int:
    """Records carried by the units ``reach`` does not visit."""
    before = index.records_before
    return sum(before[b + 1] - before[a] for a, b in reach.beyond_runs())


def visited_units(units: Sequence[Unit], reach: Reach) -> list[Unit]:
    """The visited units in ``seq`` order."""
    return list(units) if reach.complete else [units[p] for p in reach.positions]


def visited_records(units: Sequence[Unit], loose: Mapping[str, Record]) -> list[Record]:
    """The records of the visited units plus the records that render to no unit, in ``seq`` order."""
    out = [r for u in units for r in u.records]
    out += loose.values()
    out.sort(key=_SEQ)
    return out


_SEQ = attrgetter("seq")
