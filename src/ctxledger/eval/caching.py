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
  and writes what follows it at 1.25× (5-minute lifetime) up to a ``cache_control`` breakpoint at the end of
  the payload, set only when the payload reaches the 1,024-token minimum (below it, the input price); with
  :data:`ANTHROPIC_SONNET_4` the prefix shared with the previous call counts as cached wherever it ends;
* with :data:`ANTHROPIC_SONNET_4_BREAKPOINTS` a prefix counts as cached only where an earlier call set a
  breakpoint (:func:`breakpoint_marks`, :func:`breakpoint_hits`), found from a breakpoint of this call at most
  20 content blocks back (each turn counted in the blocks Anthropic's Messages form gives it,
  :func:`content_blocks`): a payload that shares a prefix with the previous one but diverges before its end
  finds no cache entry there — Anthropic's documented lookup;
* **full replay with caching** sends every turn before the call, whatever the budget (no overflow check:
  it is the reference a caller without a selector pays);
* the **floor** (:func:`floor_rows`) is a reference point for selections that carry the required state: each
  call sends the instructions, the goal, the constraints, the latest error and the unresolved calls, perfectly
  cached, plus the turns written since the previous call verbatim, which no cache holds yet (a selection that
  excerpts or leaves out a new turn can cost less).

Tool definitions are in neither payload (the datasets do not give them); sent with every call, they would be
cached in both and move each ratio towards 1.

Sources: OpenAI "Prompt caching" guide and pricing page (gpt-4o: $2.50 input, $1.25 cached input per
million tokens); Anthropic "Prompt caching" documentation (Claude Sonnet 4: $3 input, $3.75 cache write,
$0.30 cache read per million tokens).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from ctxledger.eval.base import EvalCase, EvalDataset, EvalItem, Selection, SelectionTask, Selector
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
"""Anthropic's prices with the cache found only at breakpoints (the end of the instructions, the end of the part
shared with the previous call and the end of the payload, as
:func:`ctxledger.serialize.anthropic_cache.with_breakpoints` places them), 20 content blocks of look-back."""

Turn = tuple
"""One payload turn as the cost model sees it: ``(what was sent, tokens)`` or ``(what was sent, tokens, content
blocks)`` or ``(what was sent, tokens, content blocks, is an instruction)``; two turns are the same when the
tuples are equal. Blocks default to 1 and instructions to false."""


def _tokens(turn: Turn) -> int:
    return int(turn[1])


def _blocks(turn: Turn) -> int:
    return int(turn[2]) if len(turn) > 2 else 1


def _instruction(turn: Turn) -> bool:
    return bool(turn[3]) if len(turn) > 3 else False


def content_blocks(item: EvalItem) -> int:
    """Content blocks ``item`` takes in Anthropic's Messages form: a text block, one ``tool_use`` per call.

    System and user turns and tool results are one block each (a tool result is one ``tool_result`` block); an
    assistant turn is its text block (when it has text) plus one ``tool_use`` block per call, at least one.
    """
    if item.role != "assistant":
        return 1
    return max(1, (1 if item.text else 0) + len(item.tool_calls))


def cached_tokens(shared: int, prices: CachePrices) -> int:
    """Tokens of a ``shared``-token prefix the provider bills as cached (0 below its minimum)."""
    if shared < prices.min_tokens:
        return 0
    return shared - shared % prices.step


def call_cost(input_tokens: int, shared: int, prices: CachePrices) -> float:
    """Priced input of one call in dollars.

    The cached prefix is billed at ``read``; the rest at ``write`` when the payload reaches ``min_tokens`` (a
    breakpoint at its end writes it to the cache), else at the input price (nothing is written).
    """
    cached = min(cached_tokens(shared, prices), input_tokens)
    fresh = input_tokens - cached
    write = prices.write if input_tokens >= prices.min_tokens else 1.0
    return (cached * prices.read + fresh * write) * prices.input_per_mtok / 1e6


def shared_prefix(previous: Sequence[Turn], current: Sequence[Turn]) -> int:
    """Tokens of the leading turns (:data:`Turn`) ``current`` shares with ``previous``."""
    total = 0
    for a, b in zip(previous, current, strict=False):
        if a != b:
            break
        total += _tokens(b)
    return total


def breakpoint_marks(previous: Sequence[Turn], payload: Sequence[Turn], min_tokens: int) -> list[int]:
    """Where a payload carries breakpoints, as counts of leading turns (ascending).

    After the leading instructions, after the turns shared with ``previous`` and after the last turn, each only
    when the prefix before it reaches ``min_tokens``
    (:func:`ctxledger.serialize.anthropic_cache.with_breakpoints`).
    """
    ends = [0]
    for turn in payload:
        ends.append(ends[-1] + _tokens(turn))
    head = 0
    while head < len(payload) and _instruction(payload[head]):
        head += 1
    same = 0
    while same < min(len(previous), len(payload)) and previous[same] == payload[same]:
        same += 1
    return sorted({n for n in (head, same, len(payload)) if n > 0 and ends[n] >= min_tokens})


def breakpoint_hits(calls: Sequence[Sequence[Turn]], prices: CachePrices) -> list[int]:
    """Cached tokens of each call of one run when the cache is written and found only at breakpoints.

    Each call sets the breakpoints of :func:`breakpoint_marks`; each writes a cache entry for the prefix before
    it. A call reads the longest entry of an earlier call that is a prefix of its payload and ends at most
    ``prices.lookback`` content blocks before one of its own breakpoints (Anthropic looks up the breakpoint's
    own position and the block boundaries before it). Entries do not expire (consecutive calls of an agent run
    are seconds to minutes apart; Anthropic keeps an entry 5 minutes after its last use).

    Args:
        calls: the payloads in call order (:data:`Turn` each).
        prices: the rule (``lookback`` must be set).

    Returns:
        Cached tokens per call (0 for the first).
    """
    lookback = prices.lookback if prices.lookback is not None else 0
    entries: set[tuple[Turn, ...]] = set()
    out: list[int] = []
    previous: Sequence[Turn] = ()
    for payload in calls:
        turns = tuple(payload)
        ends = [0]
        for turn in turns:
            ends.append(ends[-1] + _tokens(turn))
        marks = breakpoint_marks(previous, turns, prices.min_tokens)
        hit = 0
        for mark in marks:
            n, back = mark, 0
            while n > hit and back <= lookback:
                if turns[:n] in entries:
                    hit = n
                    break
                back += _blocks(turns[n - 1])
                n -= 1
        out.append(ends[hit])
        entries.update(turns[:n] for n in marks)
        previous = turns
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


def _instructions(item: EvalItem) -> bool:
    return item.role in ("system", "developer")


def _payload(case: EvalCase, included: set[str], sent: dict[str, str], counter: TokenCounter) -> list[Turn]:
    from ctxledger.eval.harness import sent_tokens

    selection = Selection(sorted(included), 0, 0.0, details={"sent_texts": sent})
    return [
        (f"{item.id}:{sent.get(item.id, '')}", sent_tokens(item, selection, counter), content_blocks(item),
         _instructions(item))
        for item in case.items
        if item.id in included
    ]  # fmt: skip


def _replay(runs: Sequence[Sequence[EvalCase]]) -> list[list[Turn]]:
    out: list[list[Turn]] = []
    for run in runs:
        for case in run:
            out.append([(item.id + ":", item.tokens, content_blocks(item), _instructions(item)) for item in case.items])
        out.append([])
    return out


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
    payloads: dict[str, list[list[Turn]]] = {}
    kept: dict[str, list[dict[str, bool] | None]] = {}
    for selector in selectors:
        per_run: list[list[Turn]] = []
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
    replay = _replay(runs)
    rows = []
    for name, calls in payloads.items():
        for p in prices:
            rows.append(_row(dataset.name, name, budget, p, calls, replay, kept[name]))
    return rows


def _hits(calls: Sequence[Sequence[Turn]], prices: CachePrices) -> list[int]:
    """:func:`breakpoint_hits` over calls of several runs separated by empty payloads (aligned with ``calls``)."""
    out: list[int] = []
    run: list[Sequence[Turn]] = []
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
        tokens = sum(_tokens(t) for t in calls[k])
        prefix = shared_prefix(calls[k - 1], calls[k]) if hits is None else hits[k]
        inputs.append(tokens)
        shared.append(prefix)
        costs.append(call_cost(tokens, prefix, prices))
        rt = sum(_tokens(t) for t in replay[k])
        replayed = shared_prefix(replay[k - 1], replay[k]) if replay_hits is None else replay_hits[k]
        replay_costs.append(call_cost(rt, replayed, prices))
    n = len(costs)
    ratio = _mean(costs) / _mean(replay_costs) if n and _mean(replay_costs) else None
    recovery = {kind: sum(v) / len(v) for kind, v in sorted(held.items())}
    return CachingRow(dataset, name, budget, prices.name, n, _mean(inputs), _mean(shared), _mean(costs),
                      _mean(replay_costs), ratio, recovery)  # fmt: skip


FLOOR = "floor"
"""The selector name of :func:`floor_rows`."""


def floor_rows(
    dataset: EvalDataset,
    prices: Sequence[CachePrices] = (OPENAI_GPT_4O, ANTHROPIC_SONNET_4, ANTHROPIC_SONNET_4_BREAKPOINTS),
) -> list[CachingRow]:
    """The cost of carrying each call's required state, perfectly cached, and every new turn, against replay.

    Each call sends its recovery state (instructions, goal, constraints, latest error, unresolved calls) and
    the turns written since the previous call of the run, verbatim. A reference point rather than a strict
    bound: a selection that sends a new turn as an excerpt or leaves it out, or that does not carry every turn
    the dataset counts as a constraint, can cost less. The turns written since are billed as
    fresh (no earlier call could have sent them); the rest as cached from the first call on, whatever the
    provider's look-back (at its minimum and step). A call costs the cheaper of that and full replay (priced as
    in :func:`caching_costs`), which may cache more where the provider rounds cached prefixes down.

    Args:
        dataset: a trajectory dataset (cases ``<run>@<step>``).
        prices: the providers' caching rules.

    Returns:
        One :class:`CachingRow` per provider, selector :data:`FLOOR`, ``budget`` 0 (the floor ignores it).
    """
    runs = _runs(dataset.cases)
    replay = _replay(runs)
    floor: list[tuple[int, int] | None] = []
    for run in runs:
        before: set[str] = set()
        for case in run:
            required = set().union(*case.recovery.values()) if case.recovery else set()
            new = [i for i in case.items if i.id not in before]
            old = sum(i.tokens for i in case.items if i.id in required and i.id in before)
            floor.append((old + sum(i.tokens for i in new), old))
            before = {i.id for i in case.items}
        floor.append(None)
    rows = []
    for p in prices:
        hits = _hits(replay, p) if p.lookback is not None else None
        costs, replay_costs, inputs, shared = [], [], [], []
        for k in range(1, len(replay)):
            here = floor[k]
            if here is None or floor[k - 1] is None:
                continue
            tokens, cached = here
            replayed = shared_prefix(replay[k - 1], replay[k]) if hits is None else hits[k]
            replay_costs.append(call_cost(sum(_tokens(t) for t in replay[k]), replayed, p))
            inputs.append(tokens)
            shared.append(cached)
            costs.append(min(call_cost(tokens, cached, p), replay_costs[-1]))
        ratio = _mean(costs) / _mean(replay_costs) if costs and _mean(replay_costs) else None
        rows.append(CachingRow(dataset.name, FLOOR, 0, p.name, len(costs), _mean(inputs), _mean(shared),
                               _mean(costs), _mean(replay_costs), ratio))  # fmt: skip
    return rows
