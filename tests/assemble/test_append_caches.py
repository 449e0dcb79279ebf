"""An append-one assembly on warm caches is the assembly a cold ledger makes, step after step.

A ledger that assembles after every append keeps its snapshot's memo (stage verdicts, unit flags, selection facts,
annotated units, manifest entries), the ladder's rung tables, the coster's and counter's counts, the conversation's
main branch and the manifest codec's id splits. Generated histories (turns, logs of every size, failed and passing
runs, secrets, repeated tool outputs, calls answered late) are written, assembled, then grown one step at a time with
an assembly after each; every such assembly must equal the one a new ledger on the same store makes with nothing
cached: the payload, and the stored manifest but for what names the call or measures the process.
"""

from __future__ import annotations

import json
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ctxledger import manifest_codec
from ctxledger.errors import CtxledgerError
from ctxledger.ledger import Ledger
from ctxledger.scenarios._graph import GraphBuilder
from ctxledger.testing import MemoryStore

_VOLATILE = ("id", "created_at", "timings", "prefix")
"""Keys that name the call or measure the process (``prefix`` compares with the previous assembly of this process)."""

_SECRET = "AKIAIOSFODNN7EXAMPLE"  # an AWS access key id the default scanner finds

_STEPS = [
    st.tuples(st.just("user"), st.integers(1, 30)),
    st.tuples(st.just("assistant"), st.integers(1, 30)),
    st.tuples(st.just("tool"), st.integers(1, 300)),
    st.tuples(st.just("repeat"), st.integers(1, 300)),
    st.tuples(st.just("secret"), st.integers(1, 5)),
    st.tuples(st.just("failed"), st.integers(1, 40)),
    st.tuples(st.just("passed"), st.integers(1, 40)),  # a later passing run resolves the failed ones
]
_LATE = [
    st.tuples(st.just("pending"), st.integers(1, 5)),  # a call left unanswered …
    st.tuples(st.just("late"), st.integers(1, 300)),  # … answered later: its unit is rebuilt (a new object)
]


def _write(g: GraphBuilder, pending: list[str], i: int, kind: str, size: int) -> None:
    """Write one step; ``pending`` holds the unanswered calls (a ``late`` step answers the oldest)."""
    if kind == "pending":  # two calls at once: a long log answered now, a page fetch left for later
        rows = [{"line": k, "text": f"step {i} log line {k} ok"} for k in range(40 * size)]
        log = {"tool": "read_log", "arguments": {"part": i}, "output": json.dumps(rows)}
        g.tool_calls([log, {"tool": "fetch_page", "arguments": {"page": i}}], name=f"w{i}")
        pending.append(f"w{i}#call1")
    elif kind == "late" and pending:
        g.tool_result(pending.pop(0), " ".join(f"page{i}-{k}" for k in range(size)))
    elif kind == "late":
        g.assistant(f"a{i}", "nothing is pending")
    elif kind == "user":  # words that earlier turns hold too: the best lexical matches beyond the tail change
        g.user(f"u{i}", " ".join(f"question{(i + k) % 7}" for k in range(size)))
    elif kind == "assistant":
        g.assistant(f"a{i}", " ".join(f"note{i}-{k}" for k in range(size)))
    elif kind in ("tool", "repeat"):  # a repeat is the same call with the same output: redundant once newer
        part = 0 if kind == "repeat" else i
        rows = [{"line": k, "text": f"step {part} log line {k} ok"} for k in range(size)]
        g.tool(f"t{i}", "read_log", {"part": part}, json.dumps(rows))
    elif kind == "failed":
        log = "\n".join(f"E{k} AssertionError in test_{k}" for k in range(size))
        g.tool(f"f{i}", "run_tests", {"part": i}, log, status="failed", media_type="text/plain")
    elif kind == "passed":
        log = "\n".join(f"test_{k} PASSED" for k in range(size))
        g.tool(f"p{i}", "run_tests", {"part": i}, log, media_type="text/plain")
    else:
        g.user(f"s{i}", f"the deploy key is {_SECRET} " + " ".join(f"word{k}" for k in range(size)))


def _stored(asm: Any) -> dict[str, Any]:
    """The stored form of the manifest, but for what names the call or measures the process."""
    return {k: v for k, v in manifest_codec.encode(asm.persisted()).items() if k not in _VOLATILE}


def _grow_and_compare(history: list[tuple[str, int]], appended: list[tuple[str, int]], window: int) -> None:
    """Write ``history`` at once and assemble, then each of ``appended`` with an assembly after it; compare each."""
    store = MemoryStore()
    warm = Ledger(store)
    g = GraphBuilder(warm, "append-caches")
    g.system("sys", "You are a careful build engineer.")
    g.user("u", "The nightly build fails; find out why.")
    pending: list[str] = []
    for i, (kind, size) in enumerate(history):
        _write(g, pending, i, kind, size)
    request = {"window_tokens": window, "output_tokens": 300, "margin_tokens": 50}
    for i, (kind, size) in enumerate([("user", 3), *appended], start=len(history)):
        if i > len(history):
            _write(g, pending, i, kind, size)
        try:
            cached = warm.assemble(g.conversation_id, now=g.now, **request)
        except CtxledgerError as exc:  # too small a window for what is required: both must refuse alike
            cold_refusal = _refusal(Ledger(store), g, request)
            assert type(exc) is type(cold_refusal) and str(exc) == str(cold_refusal)
            continue
        cold = Ledger(store).assemble(g.conversation_id, now=g.now, persist=False, **request)
        assert cached.payload == cold.payload and cached.payload_hash == cold.payload_hash
        assert _stored(cached) == _stored(cold)


def _refusal(ledger: Ledger, g: GraphBuilder, request: dict[str, Any]) -> CtxledgerError:
    try:
        ledger.assemble(g.conversation_id, now=g.now, persist=False, **request)
    except CtxledgerError as exc:
        return exc
    raise AssertionError("the cold ledger assembled what the warm one refused")


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    history=st.lists(st.one_of(*_STEPS), min_size=10, max_size=40),
    appended=st.lists(st.one_of(*_STEPS), min_size=1, max_size=5),
    window=st.integers(600, 4000),
)
def test_a_warm_ledger_assembles_each_appended_step_as_a_cold_one(
    history: list[tuple[str, int]], appended: list[tuple[str, int]], window: int
) -> None:
    _grow_and_compare(history, appended, window)


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    history=st.lists(st.one_of(*_STEPS, *_LATE), min_size=10, max_size=40),
    appended=st.lists(st.one_of(*_STEPS, *_LATE, *_LATE), min_size=1, max_size=5),
    window=st.integers(600, 4000),
)
def test_units_rebuilt_by_late_results_are_assembled_afresh(
    history: list[tuple[str, int]], appended: list[tuple[str, int]], window: int
) -> None:
    """A late result rebuilds its call's unit: every cache keyed on the old unit object must let it go."""
    _grow_and_compare(history, appended, window)
