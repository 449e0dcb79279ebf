"""Bounded excerpts of large tool outputs, with locators back to the exact bytes.

Seed 000 ("Lo que merece protección"): for a large result, send "lines 480-510, timeout connecting to db,
file X and hash Y", not "full log: 20 MB". Seed 002 names the risk of this representation ("Selección":
omitting an exception), so an excerpt keeps, in priority order: lines matching the caller's ``focus``
strings; error lines (tracebacks, ``fatal:``, failing tests); the last lines (where summaries, exit
statuses and final answers are printed), from the end; the first lines and warning lines; the lines
around the errors; then whatever else fits, nearest to those anchors first.

An output of at most :data:`BYTE_MODE_LINES` lines (a one-line JSON document, a minified file) has no
head and tail *lines* to keep, so it is cut by bytes instead: into pieces of :func:`piece_bytes` bytes
(at UTF-8 boundaries), kept in the order focus spans, error spans (the words
:data:`~ctxledger.represent._patterns.ERROR_RE` matches on an error line), the first and the last
piece, the bytes within :data:`CONTEXT_BYTES` of the spans (nearest first), then head and tail
alternately from both ends of the output, the head first. A 256-token excerpt of a 1 KB user profile
thus shows its opening (the name, the ids) and its end, never its end alone.

The invariant this module holds: every run of text an excerpt shows is *exactly*
``data[byte_start:byte_end]`` of one of its locators, decoded as UTF-8 (undecodable bytes replaced), so a
locator always rehydrates to the bytes the excerpt claims. Everything else in the text (the header, the
``… lines 12\u2013480 omitted (N bytes) …`` markers, the footer) is framing that names the artifact and says
what was left out; the footer says how to read more (:mod:`ctxledger.fetch_hints`: a ``recall`` call when the
reader has that tool, else the ``ctxledger rehydrate`` command). The excerpt's exact token count, measured with
the caller's counter on the final text (the footer included), is at most ``max_tokens``.

One exception, asked for by the caller: the lines named in ``withheld`` (line number → placeholder, e.g.
the lines of a tool output that hold a secret) are never shown. A shown run that touches such a line shows
its placeholder in that line's place, once, whatever part of the line the run covers — so not even a
fragment of the line, cut at a run boundary, gets out. The run's locator still gives the exact raw byte
range (whoever rehydrates it reads the raw bytes under their own rules).
"""

from __future__ import annotations

import bisect
import itertools
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from ctxledger.errors import BudgetError, ConfigurationError
from ctxledger.fetch_hints import more
from ctxledger.represent._lines import LineIndex, Locator
from ctxledger.represent._patterns import ERROR_RE, is_error_line, is_warning_line
from ctxledger.tokens import TokenCounter

MAX_PIECE_BYTES = 512
"""Lines longer than this are cut into pieces (at UTF-8 boundaries) so one huge line can be excerpted."""

MIN_PIECE_BYTES = 32
"""The smallest piece an output of few lines is cut into (bytes; see :func:`piece_bytes`)."""

HEAD_LINES = 3
TAIL_LINES = 5
CONTEXT_LINES = 3
"""Lines within this distance of a focus or error line rank right after the anchors."""
BYTE_MODE_LINES = HEAD_LINES + TAIL_LINES
"""Outputs with at most this many lines (where head and tail lines would overlap) are cut by bytes."""
CONTEXT_BYTES = 128
"""In an output cut by bytes, pieces within this many bytes of a focus or error span rank right after them."""

DASH = "\u2013"
"""The en dash of line ranges in omission markers (``lines 12\u2013480``)."""

_TIER_FOCUS, _TIER_ERROR, _TIER_TAIL, _TIER_FRAME, _TIER_CONTEXT, _TIER_REST = range(6)


@dataclass(frozen=True, slots=True)
class Excerpt:
    """A bounded, model-facing excerpt of one artifact.

    Attributes:
        text: the excerpt (header, shown runs, omission markers, footer).
        tokens: exact token count of ``text`` under the counter it was made with (≤ ``max_tokens``).
        locators: one per shown run, in byte order; run *i* is exactly the bytes of ``locators[i]``.
    """

    text: str
    tokens: int
    locators: tuple[Locator, ...]


@dataclass(frozen=True, slots=True)
class _Piece:
    line: int
    start: int
    end: int


def piece_bytes(size: int) -> int:
    """Piece size (bytes) for an output of ``size`` bytes cut by bytes.

    About 1/32 of it, within [:data:`MIN_PIECE_BYTES`, :data:`MAX_PIECE_BYTES`], so a small output is kept
    in fine steps.
    """
    return min(MAX_PIECE_BYTES, max(MIN_PIECE_BYTES, size // 32))


def _cut_points(data: bytes, start: int, end: int, size: int = MAX_PIECE_BYTES) -> list[int]:
    points = [start]
    while end - points[-1] > size:
        cut = points[-1] + size
        while cut > points[-1] + 1 and (data[cut] & 0xC0) == 0x80:
            cut -= 1
        points.append(cut)
    return [*points, end]


def _pieces(index: LineIndex, size: int = MAX_PIECE_BYTES) -> list[_Piece]:
    pieces: list[_Piece] = []
    for line in range(1, index.line_count + 1):
        start, end = index.line_span(line)
        points = _cut_points(index.data, start, end, size)
        pieces.extend(_Piece(line, a, b) for a, b in itertools.pairwise(points))
    return pieces


def _line_tiers(index: LineIndex, focus: Sequence[str]) -> dict[int, int]:
    """Tier of each anchor line: focus, error, tail, or frame (head, warning)."""
    needles = [f.casefold() for f in focus if f]
    n = index.line_count
    tiers: dict[int, int] = {}
    for line in range(1, n + 1):
        text = index.line_text(line)
        if needles and any(s in text.casefold() for s in needles):
            tiers[line] = _TIER_FOCUS
        elif is_error_line(text):
            tiers[line] = _TIER_ERROR
        elif line > n - TAIL_LINES:
            tiers[line] = _TIER_TAIL
        elif line <= HEAD_LINES or is_warning_line(text):
            tiers[line] = _TIER_FRAME
    return tiers


def _distances(n: int, anchors: Sequence[int]) -> list[int]:
    """Distance of every line (index 1..n) to the nearest anchor line (two linear sweeps)."""
    far = n + 1
    dist = [far] * (n + 2)
    for a in anchors:
        dist[a] = 0
    for i in range(2, n + 1):
        dist[i] = min(dist[i], dist[i - 1] + 1)
    for i in range(n - 1, 0, -1):
        dist[i] = min(dist[i], dist[i + 1] + 1)
    return dist


def _priority(pieces: Sequence[_Piece], index: LineIndex, focus: Sequence[str]) -> list[int]:
    """Piece indices, most important first (deterministic)."""
    tiers = _line_tiers(index, focus)
    strong = [line for line, t in tiers.items() if t <= _TIER_ERROR]
    near = _distances(index.line_count, strong)
    every = _distances(index.line_count, list(tiers))

    def key(i: int) -> tuple[int, int, int]:
        line = pieces[i].line
        if line in tiers:
            return (tiers[line], -i if tiers[line] == _TIER_TAIL else 0, i)  # the tail from its end
        if near[line] <= CONTEXT_LINES:
            return (_TIER_CONTEXT, near[line], i)
        return (_TIER_REST, every[line], i)

    return sorted(range(len(pieces)), key=key)


def _spans(index: LineIndex, focus: Sequence[str]) -> list[tuple[int, int, int]]:
    """``(byte start, byte end, tier)`` of every focus match and every error word on an error line."""
    needles = [re.compile(re.escape(f), re.IGNORECASE) for f in focus if f]
    spans: list[tuple[int, int, int]] = []
    for line in range(1, index.line_count + 1):
        start, end = index.line_span(line)
        text = index.data[start:end].decode("utf-8", errors="surrogateescape")  # one char per undecodable byte
        found = [(m.start(), m.end(), _TIER_FOCUS) for n in needles for m in n.finditer(text)]
        if is_error_line(text.rstrip("\r\n")):
            found += [(m.start(), m.end(), _TIER_ERROR) for m in ERROR_RE.finditer(text)]
        for a, b, tier in found:
            a_byte = start + len(text[:a].encode("utf-8", errors="surrogateescape"))
            b_byte = start + len(text[:b].encode("utf-8", errors="surrogateescape"))
            spans.append((a_byte, b_byte, tier))
    return spans


def _byte_priority(pieces: Sequence[_Piece], index: LineIndex, focus: Sequence[str]) -> list[int]:
    """Piece indices of an output cut by bytes, most important first (module docstring; deterministic)."""
    starts = [p.start for p in pieces]
    keys: dict[int, tuple[int, int, int]] = {}
    for a, b, tier in _spans(index, focus):
        first = max(0, bisect.bisect_right(starts, a - CONTEXT_BYTES) - 1)
        for i in range(first, len(pieces)):
            piece = pieces[i]
            if piece.start >= b + CONTEXT_BYTES:
                break
            gap = max(0, piece.start - b + 1, a - piece.end + 1)  # 0: the piece overlaps the span
            key = (tier, 0, i) if gap == 0 else (_TIER_CONTEXT, gap, i)
            keys[i] = min(keys.get(i, key), key)
    last = len(pieces) - 1

    def key(i: int) -> tuple[int, int, int]:
        found = keys.get(i)
        if found is not None and found[0] < _TIER_CONTEXT:  # focus, error
            return found
        if i in (0, last):  # the first and the last piece: the output's opening and its end
            return _TIER_TAIL, 0 if i == 0 else 1, i
        if found is not None:  # the bytes around focus and error spans
            return found
        return _TIER_REST, min(i, last - i), 0 if i <= last - i else 1  # head and tail alternately, head first

    return sorted(range(len(pieces)), key=key)


def _marker(index: LineIndex, start: int, end: int) -> str:
    first, last = index.line_of(start), index.line_of(end - 1)
    whole = index.line_span(first)[0] == start and index.line_span(last)[1] == end
    nbytes = end - start
    if whole and first == last:
        return f"… line {first} omitted ({nbytes} bytes) …"
    if whole:
        return f"… lines {first}{DASH}{last} omitted ({nbytes} bytes) …"
    lines = f"line {first}" if first == last else f"lines {first}{DASH}{last}"
    return f"… {nbytes} bytes omitted ({lines}, bytes {start}{DASH}{end}) …"


class _Renderer:
    """Renders a chosen set of pieces into excerpt text plus locators."""

    def __init__(
        self,
        index: LineIndex,
        pieces: Sequence[_Piece],
        *,
        artifact_id: str,
        sha256: str,
        source_version: str | None,
        ref_uri: str | None,
        withheld: Mapping[int, str] | None = None,
        recall: bool = False,
    ) -> None:
        self.index = index
        self.recall = recall
        self.withheld = dict(withheld or {})
        self.withheld_lines = sorted(self.withheld)
        self.pieces = pieces
        self.artifact_id = artifact_id
        self.sha256 = sha256
        self.source_version = source_version
        self.ref_uri = ref_uri

    def header(self, shown_lines: int) -> str:
        name = f"{self.ref_uri} (artifact {self.artifact_id})" if self.ref_uri else f"artifact {self.artifact_id}"
        version = f", source version {self.source_version}" if self.source_version else ""
        return (
            f"[excerpt of {name}, sha256:{self.sha256[:16]}, {len(self.index.data)} bytes, "
            f"{self.index.line_count} lines{version}; showing {shown_lines} lines]"
        )

    def footer(self) -> str:
        return more(self.artifact_id, recall=self.recall)

    def runs(self, chosen: Sequence[int]) -> list[tuple[int, int]]:
        runs: list[tuple[int, int]] = []
        for i in sorted(chosen):
            piece = self.pieces[i]
            if runs and runs[-1][1] == piece.start:
                runs[-1] = (runs[-1][0], piece.end)
            else:
                runs.append((piece.start, piece.end))
        return runs

    def shown(self, start: int, end: int) -> str:
        """The text a run of bytes ``[start, end)`` shows: its bytes, withheld lines replaced whole."""
        first, last = self.index.line_of(start), self.index.line_of(max(start, end - 1))
        lo = bisect.bisect_left(self.withheld_lines, first)
        if lo == len(self.withheld_lines) or self.withheld_lines[lo] > last:
            return self.index.data[start:end].decode("utf-8", errors="replace")
        parts: list[str] = []
        cursor = start
        for line in self.withheld_lines[lo : bisect.bisect_right(self.withheld_lines, last)]:
            a, b = self.index.line_span(line)
            a, b = max(a, start), min(b, end)
            parts.append(self.index.data[cursor:a].decode("utf-8", errors="replace"))
            parts.append(self.withheld[line] + "\n")
            cursor = b
        parts.append(self.index.data[cursor:end].decode("utf-8", errors="replace"))
        return "".join(parts)

    def render(self, chosen: Sequence[int]) -> tuple[str, tuple[Locator, ...]]:
        runs = self.runs(chosen)
        shown = len({self.pieces[i].line for i in chosen})
        parts = [self.header(shown), "\n"]
        cursor = 0
        for start, end in runs:
            if start > cursor:
                parts += [_marker(self.index, cursor, start), "\n"]
            text = self.shown(start, end)
            parts += [text, "" if text.endswith("\n") else "\n"]
            cursor = end
        if cursor < len(self.index.data):
            parts += [_marker(self.index, cursor, len(self.index.data)), "\n"]
        parts.append(self.footer())
        locators = tuple(self.index.locator(self.artifact_id, self.sha256, a, b, self.source_version) for a, b in runs)
        return "".join(parts), locators


class _Plan:
    """The chosen pieces and their estimated cost (piece tokens plus one marker per gap)."""

    def __init__(self, costs: Sequence[int], marker_cost: int) -> None:
        self.costs = costs
        self.marker_cost = marker_cost
        self.flags = [False] * (len(costs) + 2)  # padded: piece i lives at i + 1
        self.picked: list[int] = []
        self.used = 0
        self.runs = 0

    def estimate(self, extra_cost: int = 0, extra_runs: int = 0) -> int:
        """Estimated tokens of pieces and markers (at most one marker per run, plus one)."""
        return self.used + extra_cost + (self.runs + extra_runs + 1) * self.marker_cost

    def fill(self, order: Sequence[int], budget: int) -> None:
        """Add unchosen pieces in priority order while the estimate stays within ``budget``."""
        for i in order:
            if self.flags[i + 1]:
                continue
            delta_runs = 1 - self.flags[i] - self.flags[i + 2]
            if self.estimate(self.costs[i], delta_runs) <= budget:
                self.flags[i + 1] = True
                self.picked.append(i)
                self.used += self.costs[i]
                self.runs += delta_runs

    def drop_last(self) -> int:
        """Remove the most recently added piece; return its cost."""
        i = self.picked.pop()
        self.flags[i + 1] = False
        self.runs -= 1 - self.flags[i] - self.flags[i + 2]
        self.used -= self.costs[i]
        return self.costs[i]


def make_excerpt(
    data: bytes,
    *,
    artifact_id: str,
    sha256: str,
    max_tokens: int,
    counter: TokenCounter,
    source_version: str | None = None,
    focus: Sequence[str] = (),
    ref_uri: str | None = None,
    withheld: Mapping[int, str] | None = None,
    recall: bool = False,
) -> Excerpt:
    r"""Return a bounded excerpt of an artifact's bytes that keeps what matters (see module docstring).

    Args:
        data: the artifact's exact bytes (as stored in the blob store).
        artifact_id: id of the ToolArtifact; named in the text and in every locator's ``fetch``.
        sha256: bare-hex sha256 of ``data`` (the blob name), copied into the locators.
        max_tokens: ceiling, in tokens of ``counter``, for the whole excerpt text.
        counter: the target model's token counter; the final text is counted exactly with it.
        source_version: version of the source the output observed (commit, ETag …), if known.
        focus: strings (e.g. from the current goal) whose lines are kept first; case-insensitive.
        ref_uri: the artifact's external reference (e.g. ``artifact://runs/r-41/call_s1/stdout``),
            named in the header when given.
        withheld: 1-based line number → the text shown instead of that line wherever a shown run touches
            it (see the module docstring); line numbers count ``\n``-terminated lines of ``data``.
        recall: the reader can call the ``recall`` tool: the footer names a ``recall`` call instead of the
            ``ctxledger rehydrate`` command (:mod:`ctxledger.fetch_hints`).

    Returns:
        An :class:`Excerpt` whose ``tokens`` ≤ ``max_tokens``. When everything fits, it shows the whole
        output with one locator covering all bytes.

    Raises:
        ConfigurationError: ``max_tokens`` is not positive.
        BudgetError: not even the header, footer and one omission marker fit in ``max_tokens``.
    """
    excerpter = Excerpter(
        data,
        artifact_id=artifact_id,
        sha256=sha256,
        counter=counter,
        source_version=source_version,
        focus=focus,
        ref_uri=ref_uri,
        withheld=withheld,
        recall=recall,
    )
    return excerpter.excerpt(max_tokens)


class Excerpter:
    """Excerpts of one artifact at several sizes, sharing what does not depend on the size.

    The line index, the pieces, the rendering of the whole output and its count, each piece's count and the
    pieces' priority order are computed once; :meth:`excerpt` then plans and fits one size. The arguments are
    those of :func:`make_excerpt` without ``max_tokens``, and ``excerpt(n)`` returns what
    ``make_excerpt(…, max_tokens=n)`` returns.
    """

    def __init__(
        self,
        data: bytes,
        *,
        artifact_id: str,
        sha256: str,
        counter: TokenCounter,
        source_version: str | None = None,
        focus: Sequence[str] = (),
        ref_uri: str | None = None,
        withheld: Mapping[int, str] | None = None,
        recall: bool = False,
    ) -> None:
        self.index = LineIndex(data)
        self.counter = counter
        self.focus = focus
        self.by_bytes = self.index.line_count <= BYTE_MODE_LINES
        self.pieces = _pieces(self.index, piece_bytes(len(data)) if self.by_bytes else MAX_PIECE_BYTES)
        self.render = _Renderer(
            self.index,
            self.pieces,
            artifact_id=artifact_id,
            sha256=sha256,
            source_version=source_version,
            ref_uri=ref_uri,
            withheld=withheld,
            recall=recall,
        )
        text, locators = self.render.render(range(len(self.pieces)))
        self.whole = Excerpt(text, counter.count(text), locators)
        self._shared: tuple[list[int], int, int, list[int]] | None = None

    def _plan_inputs(self) -> tuple[list[int], int, int, list[int]]:
        """Piece costs, frame cost, marker cost and priority order (computed on the first partial excerpt)."""
        if self._shared is None:
            render, index, pieces, counter = self.render, self.index, self.pieces, self.counter
            costs = list(counter.count_many([render.shown(p.start, p.end) for p in pieces]))
            frame = counter.count(render.header(index.line_count) + "\n" + render.footer())
            marker = counter.count(_marker_sample(len(index.data), index.line_count))
            order = _byte_priority(pieces, index, self.focus) if self.by_bytes else _priority(pieces, index, self.focus)
            self._shared = (costs, frame, marker, order)
        return self._shared

    def excerpt(self, max_tokens: int) -> Excerpt:
        """The excerpt of at most ``max_tokens`` tokens (see :func:`make_excerpt`; same errors)."""
        if max_tokens <= 0:
            raise ConfigurationError(f"max_tokens must be positive, got {max_tokens}")
        if self.whole.tokens <= max_tokens:
            return self.whole
        costs, frame, marker, order = self._plan_inputs()
        plan = _Plan(costs, marker)
        plan.fill(order, max_tokens - frame)
        excerpt = _fit(self.render, self.counter, plan, max_tokens)
        if excerpt.tokens < max_tokens and len(plan.picked) < len(self.pieces):
            plan.fill(order, plan.estimate() + max_tokens - excerpt.tokens)
            excerpt = _fit(self.render, self.counter, plan, max_tokens)
        return excerpt


def _marker_sample(nbytes: int, nlines: int) -> str:
    return f"… lines {nlines}{DASH}{nlines} omitted ({nbytes} bytes) …\n"


def _fit(render: _Renderer, counter: TokenCounter, plan: _Plan, max_tokens: int) -> Excerpt:
    """Render, count exactly, and drop the most recently added pieces until the text fits."""
    while True:
        text, locators = render.render(plan.picked)
        tokens = counter.count(text)
        if tokens <= max_tokens:
            return Excerpt(text, tokens, locators)
        if not plan.picked:
            raise BudgetError(
                f"an excerpt of artifact {render.artifact_id} needs at least {tokens} tokens of framing; "
                f"max_tokens is {max_tokens}"
            )
        over = tokens - max_tokens
        while plan.picked and over > 0:
            over -= plan.drop_last()
