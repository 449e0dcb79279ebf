"""Cost of consecutive calls under provider prompt caching: shared prefixes and priced input.

Providers bill a prompt prefix they saw on a recent call at a fraction of the input price (seed 002: cache
is not compaction; seed 000: keep instructions and tools stable so the cache can hit). A selection that
re-chooses old turns on every call changes its payload early and shares little with the previous one, so
full history replay — whose every call extends the previous one — may cost less per call once cached
input is priced. :func:`caching_costs` measures it over the consecutive calls of each trajectory:

* the **shared prefix** of a call is the token count of the longest run of leading payload turns equal
  to the previous call's (turns in payload order, ``seq`` order; each turn costed as the harness does,
  :func:`ctxledger.eval.harness._sent_tokens`);
* a call's **priced cost** is ``(uncached · 1 + cached · read + written · (write − 1)) · price`` per
  million input tokens, with the provider's published multipliers (:data:`OPENAI_GPT_4O`,
  :data:`ANTHROPIC_SONNET_4`): OpenAI caches a prefix of at least 1,024 tokens in 128-token steps
  automatically, at half the input price, with no write premium; Anthropic reads a cached prefix at 0.1×
  and writes a cache entry at 1.25× (5-minute lifetime) from a ``cache_control`` breakpoint, here placed
  at the end of every payload, with a 1,024-token minimum;
* with :data:`ANTHROPIC_SONNET_4_BREAKPOINTS` a prefix counts as cached only where an earlier call set a
  breakpoint (:func:`breakpoint_hits`): a payload that shares a prefix with the previous one but diverges before
  its end finds no cache entry there;
* **full replay with caching** sends every turn before the call, whatever the budget (no overflow check:
  it is the reference a caller without a selector pays).

Sources: OpenAI "Prompt caching" guide and pricing page (gpt-4o: $2.50 input, $1.25 cached input per
million tokens); Anthropic "Prompt caching" documentation (Claude Sonnet 4: $3 input, $3.75 cache write,
$0.30 cache read per million tokens).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from ctxledger.eval.base import EvalCase, EvalDataset, Selection, SelectionTask, Selector
from ctxledger.eval.metrics import recovery_preservation
from ctxledger.tokens import TokenCounter


@dataclass(frozen=True, slots=True)
class CachePrices:
    """A provider's caching rule and prices.

    Attributes:
        name: label for reports.
        input_per_mtok: input price in dollars per million tokens.
        read: multiplier of the input price for cached input tokens.
        write: multiplier for input tokens written to the cache (1.0: no premium).
        min_tokens: shortest prefix the provider caches (tokens).
        step: cached prefixes count in multiples of this many tokens.
        lookback: ``None``: every prefix shared with the previous call is cached. A number: a prefix is cached
            only where an earlier call of the run set a breakpoint (:func:`breakpoint_hits`), found from a
            breakpoint of this call at most this many turns back (Anthropic's rule, about 20 blocks).
    """

    name: str
    input_per_mtok: float
    read: float
    write: float
    min_tokens: int
    step: int
    lookback: int | None = None


OPENAI_GPT_4O = CachePrices("openai gpt-4o", 2.50, 0.5, 1.0, 1024, 128)
ANTHROPIC_SONNET_4 = CachePrices("anthropic claude-sonnet-4", 3.00, 0.1, 1.25, 1024, 1)
ANTHROPIC_SONNET_4_BREAKPOINTS = CachePrices("anthropic claude-sonnet-4, breakpoints", 3.00, 0.1, 1.25, 1024, 1, 20)
"""Anthropic's prices with the cache found only at breakpoints: the end of the part shared with the previous call
and the end of the payload, as :func:`ctxledger.serialize.anthropic_cache.with_breakpoints` places them."""


def cached_tokens(shared: int, prices: CachePrices) -> int:
    """Tokens of a ``shared``-token prefix the provider bills as cached (0 below its minimum)."""
    if shared < prices.min_tokens:
        return 0
    return shared - shared % prices.step


def call_cost(input_tokens: int, shared: int, prices: CachePrices) -> float:
    """Priced input of one call in dollars: cached prefix at ``read``, the rest written at ``write``."""
    cached = min(cached_tokens(shared, prices), input_tokens)
    fresh = input_tokens - cached
    return (cached * prices.read + fresh * prices.write) * prices.input_per_mtok / 1e6


def shared_prefix(previous: Sequence[tuple[str, int]], current: Sequence[tuple[str, int]]) -> int:
    """Tokens of the leading ``(id, tokens)`` turns ``current`` shares with ``previous``."""
    total = 0
    for a, b in zip(previous, current, strict=False):
        if a != b:
            break
        total += b[1]
    return total


def breakpoint_hits(calls: Sequence[Sequence[tuple[str, int]]], prices: CachePrices) -> list[int]:
    """Cached tokens of each call of one run when the cache is written and found only at breakpoints.

    Each call sets a breakpoint after the turns it shares with the previous call (when they reach
    ``min_tokens`` and more turns follow) and after its last turn (when the payload reaches ``min_tokens``);
    each breakpoint writes a cache entry for the prefix before it. A call reads the longest entry of an earlier
    call that is a prefix of its payload and ends at most ``prices.lookback`` turns before one of its own
    breakpoints. Entries do not expire (consecutive calls of an agent run are minutes apart at most).

    Args:
        calls: the payloads in call order, each ``(id, tokens)`` turns.
        prices: the rule (``lookback`` must be set).

    Returns:
        Cached tokens per call (0 for the first).
    """
    lookback = prices.lookback if prices.lookback is not None else 0
    entries: set[tuple[str, ...]] = set()
    out: list[int] = []
    previous: Sequence[tuple[str, int]] = ()
    for payload in calls:
        ids = tuple(i for i, _ in payload)
        ends = [0]
        for _, t in payload:
            ends.append(ends[-1] + t)
        same = 0
        while same < min(len(previous), len(payload)) and previous[same] == payload[same]:
            same += 1
        marks = sorted({n for n in (same, len(payload)) if n > 0 and ends[n] >= prices.min_tokens})
        hit = 0
        for mark in marks:
            for n in range(mark, max(0, mark - lookback) - 1, -1):
                if n > hit and ids[:n] in entries:
                    hit = n
                    break
        out.append(ends[hit])
        entries.update(ids[:n] for n in marks)
        previous = payload
    return out


@dataclass(frozen=True, slots=True)
class CachingRow:
    """One selector on one dataset at one budget under one provider's prices.

    Attributes:
        calls: consecutive calls measured (the first call of each trajectory has no previous one).
        mean_input: mean payload tokens per call.
        mean_shared: mean tokens shared as a prefix with the previous call (with ``lookback`` pricing: the
            tokens found in the cache).
        mean_cost: mean priced cost per call (dollars).
        replay_cost: the same for full history replay with caching.
        ratio: ``mean_cost / replay_cost`` (the goal is at most 0.5).
        recovery: per recovery kind (``goal``, ``latest_error``, ``system`` …), the share of the measured calls
            whose payload carried all of it (:func:`ctxledger.eval.metrics.recovery_preservation`; kinds
            absent at a call are not counted).
    """

    dataset: str
    selector: str
    budget: int
    provider: str
    calls: int
    mean_input: float
    mean_shared: float
    mean_cost: float
    replay_cost: float
    ratio: float | None
    recovery: dict[str, float] = field(default_factory=dict)


def _runs(cases: Iterable[EvalCase]) -> list[list[EvalCase]]:
    runs: dict[str, list[EvalCase]] = {}
    for case in cases:
        run = case.case_id.rpartition("@")[0]
        runs.setdefault(run, []).append(case)
    return [sorted(r, key=lambda c: int(c.case_id.rpartition("@")[2])) for r in runs.values()]


def _payload(case: EvalCase, included: set[str], sent: dict[str, str], counter: TokenCounter) -> list[tuple[str, int]]:
    from ctxledger.eval.harness import sent_tokens

    selection = Selection(sorted(included), 0, 0.0, details={"sent_texts": sent})
    return [
        (f"{item.id}:{sent.get(item.id, '')}", sent_tokens(item, selection, counter))
        for item in case.items
        if item.id in included
    ]


def caching_costs(
    dataset: EvalDataset,
    selectors: Sequence[Selector],
    budget: int,
    counter: TokenCounter,
    prices: Sequence[CachePrices] = (OPENAI_GPT_4O, ANTHROPIC_SONNET_4, ANTHROPIC_SONNET_4_BREAKPOINTS),
) -> list[CachingRow]:
    """Shared-prefix tokens and priced cost per call of each selector against full replay with caching.

    Args:
        dataset: a trajectory dataset (cases ``<run>@<step>``, consecutive calls of each run).
        selectors: the selectors to measure.
        budget: the input budget of every call (tokens).
        counter: the exact counter.
        prices: the providers' caching rules.
    """
    runs = _runs(dataset.cases)
    payloads: dict[str, list[list[tuple[str, int]]]] = {}
    kept: dict[str, list[dict[str, bool] | None]] = {}
    for selector in selectors:
        per_run: list[list[tuple[str, int]]] = []
        preserved: list[dict[str, bool] | None] = []
        for run in runs:
            for case in run:
                task = SelectionTask(case.items, case.query, budget, counter, case.query_tokens)
                sel = selector.select(task)
                included = set(sel.included_ids) if sel.fits else set()
                sent = dict(sel.details.get("sent_texts") or {})
                per_run.append(_payload(case, included, sent, counter))
                preserved.append(recovery_preservation(included, case.recovery))
            per_run.append([])  # a run boundary: the next run's first call shares nothing
            preserved.append(None)
        payloads[selector.name] = per_run
        kept[selector.name] = preserved
    replay = []
    for run in runs:
        replay += [[(item.id + ":", item.tokens) for item in case.items] for case in run] + [[]]
    rows = []
    for name, calls in payloads.items():
        for p in prices:
            rows.append(_row(dataset.name, name, budget, p, calls, replay, kept[name]))
    return rows


def _hits(calls: Sequence[Sequence[tuple[str, int]]], prices: CachePrices) -> list[int]:
    """:func:`breakpoint_hits` over calls of several runs separated by empty payloads (aligned with ``calls``)."""
    out: list[int] = []
    run: list[Sequence[tuple[str, int]]] = []
    for payload in [*calls, []]:
        if payload:
            run.append(payload)
            continue
        out += breakpoint_hits(run, prices)
        out.append(0)
        run = []
    return out[: len(calls)]


def _mean(xs: Sequence[float]) -> float:
    return sum(xs) / len(xs) if xs else 0.0


def _row(
    dataset: str, name: str, budget: int, prices: CachePrices, calls: list, replay: list, preserved: list
) -> CachingRow:
    costs, shared, inputs, replay_costs = [], [], [], []
    held: dict[str, list[bool]] = {}
    hits = _hits(calls, prices) if prices.lookback is not None else None
    replay_hits = _hits(replay, prices) if prices.lookback is not None else None
    for k in range(1, len(calls)):
        if not calls[k] or not calls[k - 1] or not replay[k] or not replay[k - 1]:
            continue
        for kind, ok in (preserved[k] or {}).items():
            held.setdefault(kind, []).append(ok)
        tokens = sum(t for _, t in calls[k])
        prefix = shared_prefix(calls[k - 1], calls[k]) if hits is None else hits[k]
        inputs.append(tokens)
        shared.append(prefix)
        costs.append(call_cost(tokens, prefix, prices))
        rt = sum(t for _, t in replay[k])
        replayed = shared_prefix(replay[k - 1], replay[k]) if replay_hits is None else replay_hits[k]
        replay_costs.append(call_cost(rt, replayed, prices))
    n = len(costs)
    ratio = _mean(costs) / _mean(replay_costs) if n and _mean(replay_costs) else None
    recovery = {kind: sum(v) / len(v) for kind, v in sorted(held.items())}
    return CachingRow(dataset, name, budget, prices.name, n, _mean(inputs), _mean(shared), _mean(costs),
                      _mean(replay_costs), ratio, recovery)  # fmt: skip
