"""Candidate snapshots: one branch lineage as of one ``seq``, in units, indexed, cached incrementally.

seed 004 §5.5 "el ensamblado del contexto como consulta al grafo".

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
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ctxledger._collector import collector_paused
from ctxledger.assemble.centred_vectors import CentredVectorIndex
from ctxledger.assemble.facets import UnitFacets
from ctxledger.assemble.lexical_index import IncrementalBM25
from ctxledger.assemble.reach import ReachIndex
from ctxledger.assemble.relevance import tokenize
from ctxledger.assemble.semantic import StaticEmbedder, default_embedder, dequantize, unit_vector
from ctxledger.errors import InputError
from ctxledger.facts import RecordFacts, compute_facts
from ctxledger.policy.secrets import redact_text
from ctxledger.records import Record, ToolArtifact, ToolCall
from ctxledger.retention.state import TRANSFORM as RETAINED
from ctxledger.store._rules import get_or_none
from ctxledger.store.base import GraphStore, LineageHop
from ctxledger.store.blobs import ReadAhead
from ctxledger.units import BLOB_MISMATCH, BLOB_MISSING, Unit, build_units, content_is_parts


@dataclass(slots=True)
class Snapshot:
    """Candidates of one (tenant, conversation, branch) as of ``seq`` (inclusive).

    Attributes:
        records: candidate records in ``seq`` order.
        units: atomic units in ``seq`` order; ``index`` holds one BM25 document per unit.
        vectors: one semantic unit vector per unit (from the records' stored vectors), or ``None`` when no
            embedding model is installed (:mod:`ctxledger.assemble.semantic`).
        tool_schemas: tool schemas of the newest SkillState.
        costs: coster id → verbatim token cost per unit (aligned with ``units``).
        token_sums: coster id → running sums of ``costs`` (``token_sums[c][i]`` = tokens of units ``0 … i-1``).
        reach_index: positions that find an assembly's reach without a walk (:mod:`.reach`).
        facets: each unit's speaker and day, for relevance (:mod:`.facets`), read once per unit.
        graph_ms: milliseconds spent reading the store for this snapshot.
        facts: record id → the record's write-path facts (:class:`~ctxledger.facts.RecordFacts`: secret
            findings, instruction-like phrase, inherited restrictions), read from the store, recomputed (and
            stored again) only when the detectors changed since they were written. Their lexical terms and
            vectors are left out once ``index`` and ``vectors`` hold them.
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
    vectors: CentredVectorIndex | None = None
    costs: dict[str, list[int]] = field(default_factory=dict)
    token_sums: dict[str, list[int]] = field(default_factory=dict)
    reach_index: ReachIndex = field(default_factory=ReachIndex)
    facets: UnitFacets = field(default_factory=UnitFacets)
    facts: dict[str, RecordFacts] = field(default_factory=dict)
    graph_ms: float = 0.0
    memo: dict[Any, dict[str, tuple[Any, Any]]] = field(default_factory=dict)

    @property
    def lineage_branches(self) -> frozenset[str]:
        """Ids of the branches in the lineage."""
        return frozenset(h.branch_id for h in self.lineage)


FACTS_WINDOW = 4096
"""Records whose facts (with their lexical terms) a snapshot build reads at a time: the terms are indexed and
dropped window by window, so a long history's terms are never all in memory at once."""


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

    def load(
        self,
        tenant_id: str,
        conversation_id: str,
        branch_id: str,
        as_of_seq: int | None = None,
        *,
        head: int | None = None,
    ) -> Snapshot:
        """Return the snapshot as of ``as_of_seq`` (inclusive; ``None`` = the conversation head).

        ``head`` is the conversation's head ``seq`` when the caller has just read it (``GraphStore.head_seq``);
        ``None`` reads it.

        Raises:
            RecordNotFound: the branch does not exist in the tenant.
        """
        started = time.perf_counter()
        with self._lock:
            key = (tenant_id, conversation_id, branch_id)
            if head is None:
                head = self.store.head_seq(tenant_id, conversation_id)
            target = head if as_of_seq is None else min(as_of_seq, head)
            cached = self._cache.get(key)
            if cached is not None and cached.seq <= target:
                self._refresh(cached, target)
                self._cache.move_to_end(key)
                snap = cached
            else:
                with collector_paused():  # every object the build makes stays alive in the snapshot
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
        shas = [r.sha256 for r in records if isinstance(r, ToolArtifact) and r.sha256]
        later = self._deferrable(shas)
        now = ReadAhead(self.store.blobs, [s for s in shas if s not in later])
        units, tools = build_units(records, now, later, self.store.blobs.get)
        index = IncrementalBM25()
        snap = Snapshot(tenant_id, conversation_id, branch_id, seq, lineage, records, units, tools, index)
        snap.reach_index.extend(units, 0, records)
        snap.facets.extend(units, records)
        embedder = default_embedder()
        if embedder is not None:
            snap.vectors = CentredVectorIndex(embedder.dim, embedder.model_id)
        pending: dict[str, RecordFacts] = {}
        next_unit = 0
        for start in range(0, len(records), FACTS_WINDOW):
            window = records[start : start + FACTS_WINDOW]
            facts = self._facts(
                tenant_id, conversation_id, lineage, window, as_of_seq=window[-1].seq, after_seq=window[0].seq - 1
            )
            pending.update(facts)
            snap.facts.update({rid: f.without_terms() for rid, f in facts.items()})
            done = next_unit
            while done < len(units) and units[done].last_seq <= window[-1].seq:
                done += 1
            _index_units(index, snap.vectors, units[next_unit:done], pending)
            for unit in units[next_unit:done]:
                for rid in unit.record_ids:
                    pending.pop(rid, None)
            next_unit = done
        _index_units(index, snap.vectors, units[next_unit:], pending)
        return snap

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
        rebuilt = snap.records[start_record:]
        shas = [r.sha256 for r in rebuilt if isinstance(r, ToolArtifact) and r.sha256]
        units, tools = build_units(rebuilt, self.store.blobs.get, self._deferrable(shas))
        after = rebuilt[0].seq - 1 if rebuilt else target
        facts = self._facts(
            snap.tenant_id, snap.conversation_id, snap.lineage, rebuilt, as_of_seq=target, after_seq=after
        )
        snap.reach_index.truncate(snap.units, first_unit, rebuilt[0].seq if rebuilt else target + 1)
        del snap.units[first_unit:]
        snap.facets.truncate(first_unit)
        snap.index.truncate(first_unit)
        if snap.vectors is not None:
            snap.vectors.truncate(first_unit)
        for costs in snap.costs.values():
            del costs[first_unit:]
        for sums in snap.token_sums.values():
            del sums[first_unit + 1 :]
        snap.reach_index.extend(units, first_unit, rebuilt)
        snap.units.extend(units)
        snap.facets.extend(units, new)
        _index_units(snap.index, snap.vectors, units, facts)
        snap.facts.update({rid: f.without_terms() for rid, f in facts.items()})
        if tools:
            snap.tool_schemas = tools

    def _deferrable(self, shas: Sequence[str]) -> Collection[str]:
        """The blobs among ``shas`` whose reads can wait until a result's content is asked for.

        Those the blob store's ``deferrable`` lists (stored where a read will find them, so a result's
        transform is known without reading it); none when the store cannot tell, and every result is read
        while its unit is built.
        """
        lister = getattr(self.store.blobs, "deferrable", None)
        if lister is None or not shas:
            return frozenset()
        try:
            return frozenset(lister(list(dict.fromkeys(shas))))
        except InputError:  # a name that cannot be a blob: read now, which gives its blob_missing reference
            return frozenset()

    def _facts(
        self,
        tenant_id: str,
        conversation_id: str,
        lineage: Sequence[LineageHop],
        records: Sequence[Record],
        *,
        as_of_seq: int,
        after_seq: int = 0,
    ) -> dict[str, RecordFacts]:
        """The stored facts of ``records``; those missing or computed by other detectors are computed and stored.

        A tool result whose bytes were unreadable when its facts were computed is computed again (its bytes may
        be back); facts are written back only when they changed.
        """
        reader = getattr(self.store, "record_facts", None)
        stored: dict[str, RecordFacts] = {}
        if reader is not None:
            stored = reader(tenant_id, conversation_id, lineage=lineage, as_of_seq=as_of_seq, after_seq=after_seq)
        stale = [r for r in records if _stale(r, stored.get(r.id))]
        if not stale:
            return stored
        fresh = compute_facts(stale, self.store.blobs.get, self._find)
        changed = [f for f in fresh if f.record_id in stored and stored[f.record_id] != f]
        stored.update({f.record_id: f for f in fresh})
        writer = getattr(self.store, "put_facts", None)
        if changed and writer is not None:
            writer(tenant_id, changed)
        return stored

    def _find(self, tenant_id: str, record_id: str) -> Record | None:
        return get_or_none(self.store, tenant_id, record_id)


def _stale(rec: Record, facts: RecordFacts | None) -> bool:
    if facts is None or not facts.current:
        return True
    return isinstance(rec, ToolArtifact) and not facts.raw_readable


_UNREADABLE = (BLOB_MISSING, BLOB_MISMATCH, RETAINED)


def unit_facts(unit: Unit, facts: Mapping[str, RecordFacts]) -> list[RecordFacts] | None:
    """The stored facts of ``unit``'s records, in record order, when they can stand for the unit's text.

    A unit's relevance text is its records' relevance texts joined by newlines, in record order, and terms never
    span a newline, so its terms are the sum of theirs (its vector their re-normalised sum). ``None`` when a
    record has no stored facts to use (none, or a tool result rendered as an unavailable-bytes reference, or a
    result shown as content parts): tokenize and embed ``unit.text`` instead.
    """
    if any(t in _UNREADABLE for t in unit.transforms.values()):
        return None
    parts = [facts.get(rid) for rid in unit.record_ids]
    if any(f is None or not f.raw_readable for f in parts):
        return None
    # a result shown as content parts: its unit text is the parts' text, not the raw text; a result not read
    # yet answers from its facts (checked above: stored, computed from its readable bytes)
    if any(t.role == "tool" and content_is_parts(t, facts[t.ref].parts) for t in unit.turns):
        return None
    return parts  # type: ignore[return-value]


def _index_units(
    index: IncrementalBM25, vectors: CentredVectorIndex | None, units: Sequence[Unit], facts: Mapping[str, RecordFacts]
) -> None:
    """Add each unit's document to ``index`` and its vector to ``vectors``, in unit order.

    Stored terms and vectors are used where :func:`unit_facts` allows; elsewhere the unit's text (secrets
    redacted, as the stored terms are) is tokenized and embedded.
    """
    stored = [unit_facts(u, facts) for u in units]
    missing = [redact_text(u.text) for u, parts in zip(units, stored, strict=True) if parts is None]
    tokenized = iter(tokenize(missing))
    for parts in stored:
        if parts is None:
            index.add(next(tokenized))
        else:
            index.add_keyed([(f.term_keys, f.term_counts) for f in parts], sum(f.length for f in parts))
    if vectors is not None and units:
        rows, codes = _unit_vectors(units, stored, missing, vectors.dim)
        vectors.add_many(rows, codes)


def _unit_vectors(
    units: Sequence[Unit], stored: Sequence[list[RecordFacts] | None], missing: Sequence[str], dim: int
) -> tuple[np.ndarray, np.ndarray]:
    """The ``(len(units), dim)`` float32 unit vectors and int8 codes of ``units``.

    A unit's vector is its records' stored vectors, summed and re-normalised, and its code those vectors' bytes
    summed (:func:`_summed_code`; zeros for a unit embedded here). ``missing`` are the redacted texts of the units
    without usable facts, in unit order; they, and units with text but no stored vector, are embedded here. A unit
    with neither gets zeros.
    """
    rows = np.zeros((len(units), dim), dtype=np.float32)
    texts = iter(missing)
    todo: list[tuple[int, str]] = []
    vectors: list[tuple[int, list[bytes]]] = []
    for i, (unit, parts) in enumerate(zip(units, stored, strict=True)):
        found = [f.vector for f in parts if f.vector] if parts is not None else []
        if parts is None:
            todo.append((i, next(texts)))
        elif found:
            vectors.append((i, found))
        elif unit.text.strip():
            todo.append((i, redact_text(unit.text)))
    stored_unit_vectors(rows, vectors)
    embedder: StaticEmbedder | None = default_embedder() if todo else None
    if embedder is not None:
        rows[[i for i, _ in todo]] = embedder.embed([t for _, t in todo])
    return rows, summed_codes(vectors, len(units), dim)


BATCHED_PARTS = 4
"""Stored vectors a unit may have for :func:`stored_unit_vectors` to sum it with the others (more: one by one)."""


def stored_unit_vectors(rows: np.ndarray, vectors: Sequence[tuple[int, Sequence[bytes]]]) -> None:
    """Set ``rows[i]`` to :func:`~ctxledger.assemble.semantic.unit_vector` of unit ``i``'s stored int8 vectors.

    ``vectors`` gives each unit's position and its records' stored vectors (:func:`~ctxledger.assemble.semantic.
    quantize`'s bytes, at least one). The rows equal ``unit_vector([dequantize(v) for v in found])`` bit for bit:
    units of at most :data:`BATCHED_PARTS` vectors of ``rows``' width are dequantised, summed left to right (as
    ``numpy.sum`` over the first axis adds them) and divided by their norms together, each norm computed as
    :func:`numpy.linalg.norm` computes it; the others one by one.
    """
    dim = rows.shape[1]
    batch: list[tuple[int, Sequence[bytes]]] = []
    for i, found in vectors:
        if len(found) <= BATCHED_PARTS and all(len(v) == dim for v in found):
            batch.append((i, found))
        else:
            rows[i] = unit_vector([dequantize(v) for v in found])
    if not batch:
        return
    sums = dequantize(b"".join(found[0] for _, found in batch)).reshape(-1, dim)
    for part in range(1, BATCHED_PARTS):
        having = [k for k, (_, found) in enumerate(batch) if len(found) > part]
        if not having:
            break
        sums[having] += dequantize(b"".join(batch[k][1][part] for k in having)).reshape(-1, dim)
    # numpy.linalg.norm of a float32 vector is the float32 square root of its dot product with itself
    norms = np.sqrt(np.fromiter((row.dot(row) for row in sums), dtype=np.float32, count=len(sums)))
    scaled = np.zeros_like(sums)
    np.divide(sums, norms[:, None], out=scaled, where=(norms > 0)[:, None])
    rows[[i for i, _ in batch]] = scaled


def summed_codes(vectors: Sequence[tuple[int, Sequence[bytes]]], n: int, dim: int) -> np.ndarray:
    """Int8 ``(n, dim)``: row ``i`` the sum of unit ``i``'s stored int8 vectors, given as ``(i, their bytes)``.

    The bytes are :func:`~ctxledger.assemble.semantic.quantize`'s. A row stays zeros when a component of its sum
    leaves the int8 range, a vector is not ``dim`` bytes long, or ``vectors`` names no vector of it.
    """
    codes = np.zeros((n, dim), dtype=np.int8)
    kept = [(i, found) for i, found in vectors if found and all(len(v) == dim for v in found)]
    if not kept:
        return codes
    counts = np.fromiter((len(found) for _, found in kept), dtype=np.intp, count=len(kept))
    starts = np.zeros(len(kept), dtype=np.intp)
    np.cumsum(counts[:-1], out=starts[1:])
    flat = np.frombuffer(b"".join(v for _, found in kept for v in found), dtype=np.int8).reshape(-1, dim)
    sums = np.add.reduceat(flat.astype(np.int32), starts, axis=0)
    fits = np.abs(sums).max(axis=1) <= 127
    owners = np.fromiter((i for i, _ in kept), dtype=np.intp, count=len(kept))
    codes[owners[fits]] = sums[fits].astype(np.int8)
    return codes


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
