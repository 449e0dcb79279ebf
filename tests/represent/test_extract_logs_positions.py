"""The logs extractor names the line that holds the error, for every error shape, at any position of any log.

Generated logs: ordinary progress lines (``INFO step 12 ok``) with one error of a known shape placed at a random
line; the extraction must report that line's number and text, and its summary must quote it.
"""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st
from represent_helpers import OBSERVED, artifact_for

from ctxledger.records import ToolStatus
from ctxledger.represent import extract
from ctxledger.represent._lines import LineIndex
from ctxledger.represent.extract._base import Source, clip, query_terms
from ctxledger.represent.extract.logs import extract_logs

_WORDS = st.sampled_from(["step", "batch", "shard", "worker", "upload", "index", "cache", "sync", "rows", "chunk"])
_LEVELS = st.sampled_from(["INFO", "DEBUG", "TRACE", "NOTICE"])
_STAMPS = st.sampled_from(["", "2026-09-01T09:00:00Z ", "12:00:01 ", "[0042] "])

benign_line = st.builds(
    lambda stamp, level, word, n, m: f"{stamp}{level} {word} {n} ok ({m} items)",
    _STAMPS,
    _LEVELS,
    _WORDS,
    st.integers(0, 99_999),
    st.integers(0, 5_000),
)
"""A progress line that reports neither an error nor a warning."""

_EXC = st.sampled_from(["DiskFull", "ValueError", "psycopg.errors.UniqueViolation", "TimeoutError", "KeyError"])
_ERROR_NAMES = st.sampled_from(["ValueError", "TimeoutError", "KeyError", "RuntimeException", "OSError"])
"""Exception names of the ``FooError:`` / ``FooException:`` shape (a line of its own reports these)."""
_MSG = st.sampled_from(["no space left on device", "duplicate key value violates unique constraint", "'user_id'"])

one_line_error = st.one_of(
    st.builds(lambda w, m: f"ERROR {w} crashed: {m}", _WORDS, _MSG),
    st.builds(lambda m: f"fatal: could not read submodule: {m}", _MSG),
    st.builds(lambda w: f"make: *** [{w}] Error 2", _WORDS),
    st.builds(lambda e, m: f"E   {e}: {m}", _EXC, _MSG),
    st.builds(lambda e, m: f"{e}: {m}", _ERROR_NAMES, _MSG),
    st.builds(lambda w: f"curl: (7) Failed to connect to {w}.internal port 443: Connection refused", _WORDS),
    st.builds(lambda w: f"Killed {w}", _WORDS),
    st.builds(lambda w: f"ssh: connect to host {w}: Connection timed out", _WORDS),
    st.builds(lambda w: f"{w}: Permission denied", _WORDS),
    st.builds(lambda w, e, m: f"ERROR {w} crashed: Traceback (most recent call last): {e}: {m}", _WORDS, _EXC, _MSG),
)
"""Error shapes that fit on one line, the one-line traceback among them."""


@st.composite
def traceback_block(draw: st.DrawFn) -> tuple[list[str], int, str]:
    """A multi-line Python traceback: ``(lines, index of the exception line, exception line)``."""
    prefix = draw(st.sampled_from(["", "ERROR worker crashed: ", "2026-09-01 09:00:00 ERROR "]))
    frames = draw(st.integers(1, 4))
    lines = [f"{prefix}Traceback (most recent call last):"]
    for i in range(frames):
        lines += [f'  File "/srv/app/mod{i}.py", line {draw(st.integers(1, 900))}, in f{i}', f"    f{i + 1}(x)"]
    exc = f"{draw(_EXC)}: {draw(_MSG)}"
    lines.append(exc)
    return lines, len(lines) - 1, exc


def _source(text: str, status: ToolStatus = ToolStatus.SUCCEEDED) -> Source:
    data = text.encode()
    return Source(artifact_for(data, status=status), data, text, LineIndex(data), query_terms(""), OBSERVED)


def _entries(text: str) -> list[dict]:
    extraction = extract_logs(_source(text))
    assert extraction is not None
    return extraction.fields["errors"]


@settings(max_examples=60, deadline=None)
@given(before=st.lists(benign_line, max_size=60), after=st.lists(benign_line, max_size=60), error=one_line_error)
def test_one_line_error_is_reported_at_its_line(before: list[str], after: list[str], error: str):
    """Whatever surrounds it, a one-line error is the entry of its own line, with its text."""
    text = "\n".join([*before, error, *after]) + "\n"
    (entry,) = _entries(text)
    assert entry["line"] == len(before) + 1
    assert entry["text"] == clip(error)
    summary = extract_logs(_source(text)).summary  # type: ignore[union-attr]
    assert f"line {len(before) + 1}: {clip(error, 160)}" in summary


@settings(max_examples=50, deadline=None)
@given(before=st.lists(benign_line, max_size=40), after=st.lists(benign_line, max_size=40), block=traceback_block())
def test_traceback_is_reported_at_its_exception_line(before, after, block):
    """A traceback is reported at its exception line, with the innermost frame, never at a neighbour."""
    lines, at, exc = block
    text = "\n".join([*before, *lines, *after])
    (entry,) = _entries(text)
    assert entry["line"] == len(before) + at + 1
    assert entry["text"] == exc and entry["kind"] == "exception"
    assert entry["file"].startswith("/srv/app/mod")


@settings(max_examples=40, deadline=None)
@given(
    before=st.lists(benign_line, max_size=30),
    after=st.lists(benign_line, max_size=30),
    errors=st.lists(one_line_error, min_size=1, max_size=4),
    gaps=st.lists(st.lists(benign_line, max_size=5), min_size=4, max_size=4),
)
def test_every_error_keeps_its_own_line(before, after, errors, gaps):
    """Several errors apart from each other: each entry points at the line that holds it."""
    lines = list(before)
    expected = []
    for error, gap in zip(errors, gaps, strict=False):
        lines.append(error)
        expected.append((len(lines), clip(error)))
        lines += gap
    lines += after
    entries = _entries("\n".join(lines))
    assert [(e["line"], e["text"]) for e in entries] == expected


def test_the_reported_case_through_the_dispatcher():
    """3,000 lines of progress with the crash at line 1,500: the memory names line 1,500 and its error text."""
    crash = "ERROR worker crashed: Traceback (most recent call last): DiskFull: no space left"
    lines = [f"INFO step {i} ok" for i in range(1, 3001)]
    lines[1499] = crash
    data = ("\n".join(lines) + "\n").encode()
    memory = extract(artifact_for(data, status=ToolStatus.FAILED), data, memory_id="mem-crash", observed_at=OBSERVED)
    assert memory is not None
    (entry,) = memory.fields["errors"]
    assert (entry["line"], entry["text"]) == (1500, crash)
    assert f"line 1500: {crash}" in memory.summary and "INFO step 1501" not in memory.summary
