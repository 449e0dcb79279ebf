"""Baseline selectors: what an agent does without a context policy.

Every baseline works on *units*: an assistant message with tool calls and all its
results form one unit that enters whole or not at all, so no baseline can split a tool pair ("tool
pairs repaired"). A tool result whose call is not among the candidates cannot be sent validly and is
left out by every baseline except full replay, which sends the history as it is.

All costs are in tokens as given by :attr:`EvalItem.tokens`; a selection's ``payload_tokens`` is
``base_tokens + query_tokens + Σ tokens of the included items``.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass

import bm25s

from ctxledger.eval.base import EvalItem, Selection, SelectionTask


@dataclass(frozen=True, slots=True)
class Unit:
    """Items that enter together, in ``seq`` order, and their total cost in tokens.

    Attributes:
        items: one item, or an assistant item with calls followed by its results.
        tokens: the sum of the items' tokens.
        sendable: false for a tool result whose call is not among the candidates.
    """

    items: tuple[EvalItem, ...]
    tokens: int
    sendable: bool = True

    @property
    def ids(self) -> list[str]:
        """The ids of the unit's items."""
        return [item.id for item in self.items]


def make_units(items: Sequence[EvalItem]) -> list[Unit]:
    """Group ``items`` (in ``seq`` order) into units; results join the unit of the call they answer."""
    groups: list[list[EvalItem]] = []
    owner: dict[str, int] = {}
    orphans: set[int] = set()
    for item in items:
        if item.role == "tool":
            index = owner.get(item.tool_call_id or "")
            if index is not None:
                groups[index].append(item)
                continue
            orphans.add(len(groups))
        for call in item.tool_calls:
            owner[call.call_id] = len(groups)
        groups.append([item])
    return [
        Unit(items=tuple(g), tokens=sum(i.tokens for i in g), sendable=n not in orphans) for n, g in enumerate(groups)
    ]


def _selection(task: SelectionTask, chosen: Sequence[Unit], started: float) -> Selection:
    ids = [i for unit in sorted(chosen, key=lambda u: u.items[0].seq) for i in unit.ids]
    payload = task.base_tokens + task.query_tokens + sum(u.tokens for u in chosen)
    return Selection(included_ids=ids, payload_tokens=payload, latency_s=time.perf_counter() - started)


class FullReplay:
    """Send the whole history as it is, when it fits; otherwise decline (``fits=False``, nothing sent).

    This is the "history replay" every saving is measured against (seed 004 §9).
    """

    name = "full-replay"

    def select(self, task: SelectionTask) -> Selection:
        """Every item if ``base + query + Σ item tokens ≤ budget``; else an empty, non-fitting selection."""
        started = time.perf_counter()
        total = task.base_tokens + task.query_tokens + sum(item.tokens for item in task.items)
        if total > task.budget_tokens:
            return Selection([], payload_tokens=total, latency_s=time.perf_counter() - started, fits=False)
        return Selection([i.id for i in task.items], payload_tokens=total, latency_s=time.perf_counter() - started)


def _pinned_system(units: Sequence[Unit], budget: int) -> list[Unit]:
    """The leading run of system/developer units that fits in ``budget``, oldest first."""
    pinned: list[Unit] = []
    used = 0
    for unit in units:
        if unit.items[0].role not in ("system", "developer") or used + unit.tokens > budget:
            break
        pinned.append(unit)
        used += unit.tokens
    return pinned


def _newest_suffix(units: Sequence[Unit], budget: int) -> list[Unit]:
    """The longest run of newest sendable units whose total fits in ``budget`` (stops at the first miss)."""
    chosen: list[Unit] = []
    used = 0
    for unit in reversed(units):
        if not unit.sendable:
            continue
        if used + unit.tokens > budget:
            break
        chosen.append(unit)
        used += unit.tokens
    return chosen


class NewestThatFits:
    """A sliding window: leading system instructions, then the newest units that fit, contiguously.

    The common default of agent frameworks (``trim_messages(strategy="last", include_system=True)``),
    with tool units kept whole.
    """

    name = "newest-fit"

    def select(self, task: SelectionTask) -> Selection:
        """Pin leading system/developer units that fit, then add units newest first until one misses."""
        started = time.perf_counter()
        units = make_units(task.items)
        pinned = _pinned_system(units, task.item_budget)
        rest = units[len(pinned) :]
        budget = task.item_budget - sum(u.tokens for u in pinned)
        return _selection(task, pinned + _newest_suffix(rest, budget), started)


class HeadTail:
    """The oldest units (task statement, first turns) up to a share of the budget, then the newest.

    Attributes:
        head_share: fraction of the item budget given to the head (0.5 by default).
    """

    name = "head-tail"

    def __init__(self, head_share: float = 0.5) -> None:
        """Configure the share of the item budget (0 < share < 1) that goes to the oldest units."""
        if not 0.0 < head_share < 1.0:
            raise ValueError(f"head_share must be in (0, 1), got {head_share}")
        self.head_share = head_share

    def select(self, task: SelectionTask) -> Selection:
        """Fill the head oldest first up to ``head_share``; fill the rest newest first; no overlap."""
        started = time.perf_counter()
        units = [u for u in make_units(task.items) if u.sendable]
        head: list[Unit] = []
        used = 0
        for unit in units:
            if used + unit.tokens > task.item_budget * self.head_share:
                break
            head.append(unit)
            used += unit.tokens
        tail = _newest_suffix(units[len(head) :], task.item_budget - used)
        return _selection(task, head + tail, started)


class _BM25Index:
    """A BM25 index (Lucene variant, bm25s defaults k1=1.5, b=0.75) over texts, English stopwords removed."""

    def __init__(self, texts: Sequence[str]) -> None:
        """Tokenize and index ``texts``; an all-empty corpus gives an index that scores 0 everywhere."""
        corpus = bm25s.tokenize(list(texts), stopwords="en", return_ids=False, show_progress=False)
        self.size = len(texts)
        self.retriever: bm25s.BM25 | None = None
        if any(corpus):
            self.retriever = bm25s.BM25()
            self.retriever.index(corpus, show_progress=False)

    def scores(self, query: str) -> list[float]:
        """Score of each text for ``query``; all 0.0 when no query term is in the index."""
        if self.retriever is None:
            return [0.0] * self.size
        tokens = bm25s.tokenize(query, stopwords="en", return_ids=False, show_progress=False)[0]
        known = [t for t in tokens if t in self.retriever.vocab_dict]
        if not known:
            return [0.0] * self.size
        return [float(s) for s in self.retriever.get_scores(known)]


class BM25Only:
    """Lexical retrieval only: turns ranked by BM25 against the query, added best first while they fit.

    Only turns with a positive score are candidates (no recency, no pinning); a turn inside a tool unit
    brings its whole unit. Ties break by newer ``seq`` first, so the result is deterministic. The index
    is kept for the last few candidate lists (by identity), as a deployed retriever indexes a
    conversation once and scores each query against it; a new candidate list pays for indexing.
    """

    name = "bm25"
    cache_size = 4

    def __init__(self) -> None:
        """Start with an empty index cache."""
        self._cache: list[tuple[Sequence[EvalItem], list[Unit], list[EvalItem], _BM25Index]] = []

    def _index(self, candidates: Sequence[EvalItem]) -> tuple[list[Unit], list[EvalItem], _BM25Index]:
        for cached, units, items, index in self._cache:
            if cached is candidates:
                return units, items, index
        units = [u for u in make_units(candidates) if u.sendable]
        items = [item for unit in units for item in unit.items]
        index = _BM25Index([item.text for item in items])
        self._cache = [(candidates, units, items, index), *self._cache[: self.cache_size - 1]]
        return units, items, index

    def select(self, task: SelectionTask) -> Selection:
        """Rank items by BM25 score, then add each item's unit if it fits in what is left."""
        started = time.perf_counter()
        units, items, index = self._index(task.items)
        unit_of = {item.id: n for n, unit in enumerate(units) for item in unit.items}
        scores = index.scores(task.query)
        ranked = sorted((n for n in range(len(items)) if scores[n] > 0), key=lambda n: (-scores[n], -items[n].seq))
        chosen: dict[int, Unit] = {}
        left = task.item_budget
        for n in ranked:
            u = unit_of[items[n].id]
            if u not in chosen and units[u].tokens <= left:
                chosen[u] = units[u]
                left -= units[u].tokens
        return _selection(task, list(chosen.values()), started)


def baseline_selectors() -> list[FullReplay | NewestThatFits | HeadTail | BM25Only]:
    """One instance of every baseline, in report order."""
    return [FullReplay(), NewestThatFits(), HeadTail(), BM25Only()]
