"""Candidate snapshots: one branch lineage as of one ``seq``, in units, indexed, cached incrementally.

DESIGN §3 step 1; seed 004 §5.5 "el ensamblado del contexto como consulta al grafo".

History is append-only, so a snapshot at the head can be extended instead of rebuilt: a refresh reads only
records with ``seq`` above the cached one, rebuilds only the units those records touch (a late tool result
completes its exchange) and appends the new units to the relevance index. Assembly cost therefore does not
grow with the part of history a new event does not touch. A snapshot older than the cached one is built
fresh and not cached.
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ctxledger.assemble.relevance import IncrementalBM25, tokenize
from ctxledger.units import Unit, build_units
from ctxledger.records import Record, ToolArtifact, ToolCall
from ctxledger.store.base import GraphStore, LineageHop


@dataclass(slots=True)
class Snapshot:
    """Candidates of one (tenant, conversation, branch) as of ``seq`` (inclusive).

    Attributes:
        records: candidate records in ``seq`` order.
        units: atomic units in ``seq`` order; ``index`` holds one BM25 document per unit.
        tool_schemas: tool schemas of the newest SkillState.
        costs: coster id → verbatim token cost per unit (aligned with ``units``).
        graph_ms: milliseconds spent reading the store for this snapshot.
        memo: facts that depend on one unit or record alone (secret findings, tags, stage verdicts,
            rendered units, manifest entries), kept across assemblies as ``namespace → key → entry``; an
            entry is valid only for the very objects it was made from
            (:meth:`~ctxledger.policy.base.StageContext.memoized`, :meth:`~ctxledger.policy.base.StageContext.scan`).
    """

    tenant_id: str
    conversation_id: str
    branch_id: str
    seq: int
    lineage: list[LineageHop]
    records: list[Record]
    units: list[Unit]
    tool_schemas: tuple[Mapping[str, Any], ...]
    index: IncrementalBM25
    costs: dict[str, list[int]] = field(default_factory=dict)
    graph_ms: float = 0.0
    memo: dict[Any, dict[str, tuple[Any, Any]]] = field(default_factory=dict)

    @property
    def lineage_branches(self) -> frozenset[str]:
        """Ids of the branches in the lineage."""
        return frozenset(h.branch_id for h in self.lineage)


class SnapshotLoader:
    """Loads snapshots from a store, keeping the newest snapshot of recent branches in an LRU cache.

    Args:
        store: the graph store.
        cache_size: how many (tenant, conversation, branch) snapshots to keep.
    """

    def __init__(self, store: GraphStore, cache_size: int = 32) -> None:
        self.store = store
        self.cache_size = cache_size
        self._cache: OrderedDict[tuple[str, str, str], Snapshot] = OrderedDict()
        self._lock = threading.Lock()

    def load(self, tenant_id: str, conversation_id: str, branch_id: str, as_of_seq: int | None = None) -> Snapshot:
        """Return the snapshot as of ``as_of_seq`` (inclusive; ``None`` = the conversation head).

        Raises:
            RecordNotFound: the branch does not exist in the tenant.
        """
        started = time.perf_counter()
        with self._lock:
            key = (tenant_id, conversation_id, branch_id)
            head = self.store.head_seq(tenant_id, conversation_id)
            target = head if as_of_seq is None else min(as_of_seq, head)
            cached = self._cache.get(key)
            if cached is not None and cached.seq <= target:
                self._refresh(cached, target)
                self._cache.move_to_end(key)
                snap = cached
            else:
                snap = self._build(tenant_id, conversation_id, branch_id, target)
                if target == head:
                    self._cache[key] = snap
                    while len(self._cache) > self.cache_size:
                        self._cache.popitem(last=False)
            snap.graph_ms = (time.perf_counter() - started) * 1000
            return snap

    def invalidate(self, tenant_id: str | None = None) -> None:
        """Drop cached snapshots (all, or one tenant's), e.g. after retention deleted records."""
        with self._lock:
            for key in [k for k in self._cache if tenant_id is None or k[0] == tenant_id]:
                del self._cache[key]

    def _build(self, tenant_id: str, conversation_id: str, branch_id: str, seq: int) -> Snapshot:
        lineage = self.store.lineage(tenant_id, branch_id)
        records = self.store.records(tenant_id, conversation_id, lineage=lineage, as_of_seq=seq)
        units, tools = build_units(records, self.store.blobs.get)
        index = IncrementalBM25()
        for tokens in tokenize([u.text for u in units]):
            index.add(tokens)
        return Snapshot(tenant_id, conversation_id, branch_id, seq, lineage, records, units, tools, index)

    def _refresh(self, snap: Snapshot, target: int) -> None:
        if target == snap.seq:
            return
        new = self.store.records(
            snap.tenant_id, snap.conversation_id, lineage=snap.lineage, as_of_seq=target, after_seq=snap.seq
        )
        snap.seq = target
        if not new:
            return
        first_unit = _first_touched_unit(snap.units, new)
        start_record = _record_position(snap.records, snap.units, first_unit)
        snap.records.extend(new)
        units, tools = build_units(snap.records[start_record:], self.store.blobs.get)
        del snap.units[first_unit:]
        snap.index.truncate(first_unit)
        for costs in snap.costs.values():
            del costs[first_unit:]
        snap.units.extend(units)
        for tokens in tokenize([u.text for u in units]):
            snap.index.add(tokens)
        if tools:
            snap.tool_schemas = tools


def _first_touched_unit(units: Sequence[Unit], new: Sequence[Record]) -> int:
    """Index of the earliest existing unit a new record belongs to (``len(units)`` when none)."""
    owner: dict[str, int] = {}
    touched = len(units)
    wanted = {r.message_id for r in new if isinstance(r, ToolCall)} | {
        r.tool_call_id for r in new if isinstance(r, ToolArtifact)
    }
    if not wanted:
        return touched
    for i in range(len(units) - 1, -1, -1):
        for rid in units[i].record_ids:
            owner[rid] = i
        if wanted <= owner.keys():
            break
    for rid in wanted:
        if rid in owner:
            touched = min(touched, owner[rid])
    return touched


def _record_position(records: Sequence[Record], units: Sequence[Unit], unit_index: int) -> int:
    """Position in ``records`` where unit ``unit_index`` starts (``len(records)`` past the end)."""
    if unit_index >= len(units):
        return len(records)
    first_id = units[unit_index].id
    for i in range(len(records) - 1, -1, -1):
        if records[i].id == first_id:
            return i
    return 0
