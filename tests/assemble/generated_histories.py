"""Generated build-engineer histories for assembly tests: user turns, assistant turns and tool exchanges of any size."""

from __future__ import annotations

import json
from typing import Any

from hypothesis import strategies as st

from ctxledger.ledger import Ledger
from ctxledger.scenarios._graph import GraphBuilder
from ctxledger.testing import MemoryStore


def history(steps: list[tuple[str, int]], name: str) -> tuple[Ledger, GraphBuilder]:
    """A conversation of ``steps`` (``("user" | "assistant" | "tool" | "failed", size)``) between two user turns.

    ``size`` is words for a turn, log rows for a tool output, error lines for a failed ``run_tests`` call.
    """
    ledger = Ledger(MemoryStore())
    g = GraphBuilder(ledger, name)
    g.system("sys", "You are a careful build engineer.")
    g.user("u0", "The nightly build fails; find out why.")
    for i, (kind, size) in enumerate(steps):
        if kind == "user":
            g.user(f"u{i + 1}", " ".join(f"question{i}-{k}" for k in range(size)))
        elif kind == "assistant":
            g.assistant(f"a{i}", " ".join(f"note{i}-{k}" for k in range(size)))
        elif kind == "tool":
            rows = [{"line": k, "text": f"step {i} log line {k} ok"} for k in range(size)]
            g.tool(f"t{i}", "read_log", {"part": i}, json.dumps(rows))
        else:
            log = "\n".join(f"E{k} AssertionError in test_{k}" for k in range(size))
            g.tool(f"f{i}", "run_tests", {"part": i}, log, status="failed", media_type="text/plain")
    g.user("ulast", "What is the cause of the failure?")
    return ledger, g


def history_steps(words: int, rows: int, error_lines: int = 0, *, fewest: int = 1) -> st.SearchStrategy[Any]:
    """One step of :func:`history`: a turn of ``fewest``–``words`` words or a log of 1–``rows`` rows.

    With ``error_lines``, also a failed call of 1–``error_lines`` error lines.
    """
    kinds = [
        st.tuples(st.just("user"), st.integers(fewest, words)),
        st.tuples(st.just("assistant"), st.integers(fewest, words)),
        st.tuples(st.just("tool"), st.integers(1, rows)),
    ]
    if error_lines:
        kinds.append(st.tuples(st.just("failed"), st.integers(1, error_lines)))
    return st.one_of(*kinds)


def assemble_history(ledger: Ledger, g: GraphBuilder, window: int) -> Any:
    """Assemble the history's next call with ``window`` tokens (500 for output, 100 of margin), at its clock."""
    return ledger.assemble(
        g.conversation_id, window_tokens=window, output_tokens=500, margin_tokens=100, branch_id=g.branch_id, now=g.now
    )
