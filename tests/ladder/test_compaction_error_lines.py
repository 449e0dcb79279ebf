"""A compaction keeps each failed call's error line verbatim, and its fidelity check refuses one that drops it.

Generated runs: tool calls of random tools and outcomes, each failed output a random log with its error at a
random line; every failure is followed by a success of the same tool, so the protection stage lets the
compaction cover it and the compaction is the only place the model can read the error from.
"""

from __future__ import annotations

import dataclasses

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ctxledger.errors import CompactionRefused
from ctxledger.hashing import canonical_json
from ctxledger.ledger import Ledger
from ctxledger.represent import compact
from ctxledger.represent.extract.logs import primary_error
from ctxledger.scenarios._graph import GraphBuilder
from ctxledger.testing import MemoryStore

_ERRORS = st.sampled_from(
    [
        'psycopg.errors.UniqueViolation: duplicate key value violates unique constraint "users_email_key"',
        'ERROR: relation "invoices_2026" does not exist',
        "fatal: could not read from remote repository.",
        "make: *** [Makefile:42: build] Error 2",
        "curl: (7) Failed to connect to api.internal port 443: Connection refused",
        "PermissionError: [Errno 13] Permission denied: '/srv/export/ledger.csv'",
    ]
)
_TOOLS = st.sampled_from(["shell", "db.query", "http.get", "files.write"])


@st.composite
def failed_output(draw: st.DrawFn) -> tuple[str, str]:
    """``(raw output, its error line)``: progress lines with one error line at a random position."""
    before = draw(st.integers(0, 40))
    after = draw(st.integers(0, 40))
    error = draw(_ERRORS)
    lines = [f"INFO step {i} ok" for i in range(before)] + [error] + [f"INFO cleanup {i} ok" for i in range(after)]
    return "\n".join(lines), error


@st.composite
def run(draw: st.DrawFn) -> list[tuple[str, str | None, str | None]]:
    """Tool calls ``(tool, failed output or None, its error line)``, each failure later followed by a success."""
    steps: list[tuple[str, str | None, str | None]] = []
    for _ in range(draw(st.integers(1, 4))):
        tool = draw(_TOOLS)
        if draw(st.booleans()):
            output, error = draw(failed_output())
            steps.append((tool, output, error))
        steps.append((tool, None, None))
    return steps


def _build(steps: list[tuple[str, str | None, str | None]]) -> tuple[Ledger, GraphBuilder]:
    ledger = Ledger(MemoryStore())
    g = GraphBuilder(ledger, "errors")
    g.system("sys", "You are a careful operations agent.")
    g.user("u1", "Load the October export into the ledger database.")
    for i, (tool, output, _) in enumerate(steps):
        if output is None:
            g.tool(f"t{i}", tool, {"step": i}, '{"ok": true}')
        else:
            g.tool(f"t{i}", tool, {"step": i}, output, status="failed", media_type="text/plain; charset=utf-8")
    g.user("u2", "Where are we?")
    return ledger, g


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(steps=run())
def test_compaction_keeps_every_error_line_and_the_payload_shows_it(steps):
    """Each failed call's error line is in the compaction text verbatim, and in the next payload at any budget."""
    ledger, g = _build(steps)
    rec = ledger.compact(g.conversation_id, now=g.now)
    errors = [e for _, _, e in steps if e]
    for error in errors:
        assert error in rec.text
    kept = [i for i in rec.body["tool_errors"] if i.get("exact")]
    assert sorted(i["exact"] for i in kept) == sorted(errors)
    for window in (3_000, 16_000):
        asm = ledger.assemble(g.conversation_id, now=g.now, window_tokens=window, output_tokens=500)
        body = canonical_json(asm.payload)
        assert rec.id in {e["ref"] for e in asm.manifest["included"]}
        assert all(canonical_json(e)[1:-1] in body for e in errors)


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(output=failed_output(), tool=_TOOLS)
def test_a_compaction_that_drops_the_error_line_is_refused(output, tool):
    """A compactor that keeps 'failed' and the artifact id but not the error text is refused; nothing is written."""
    raw, error = output
    ledger, g = _build([(tool, raw, error), (tool, None, None)])

    def forgetful(records, **kwargs):
        rec = compact(records, **kwargs)
        return dataclasses.replace(rec, text=rec.text.replace(error, "(error omitted)"))

    head = ledger.store.head_seq("default", g.conversation_id)
    with pytest.raises(CompactionRefused) as caught:
        ledger.compact(g.conversation_id, compactor=forgetful, now=g.now)
    assert [(m.kind, m.exact) for m in caught.value.missing] == [("tool_errors", error)]
    assert ledger.store.head_seq("default", g.conversation_id) == head


@given(output=failed_output())
@settings(max_examples=40, deadline=None)
def test_primary_error_is_the_line_that_holds_the_error(output):
    """The line a compaction keeps for a failed output is its error line, wherever it sits."""
    raw, error = output
    found = primary_error(raw)
    assert found is not None and found["text"] == error
    assert raw.splitlines()[found["line"] - 1] == error
