"""Test runner output (pytest, unittest): counts, and each failure with its file and line.

pytest is read from its own report structure: the final ``=== 1 failed, 18 passed in 0.05s ===`` line,
``FAILED node::id - message`` summary lines (and ``node::id FAILED`` verbose lines), and the
``___ Test.name ___`` sections under ``=== FAILURES ===``, whose ``path.py:228: AttributeError`` line
gives the file and line and whose ``E   …`` lines give the message. unittest is read from ``FAIL: test
(module.Class)`` blocks, ``Ran N tests`` and ``FAILED (failures=1)``/``OK``. Output cut by ``| tail``
still yields the failures its surviving lines name.

``fields`` of the memory::

    {"runner": "pytest" | "unittest", "exit_status": 1 | None,
     "counts": {"failed": 1, "passed": 18, ...},
     "failures": [{"test": "pkg/tests/test_x.py::TestX::test_y", "file": "pkg/tests/test_x.py",
                   "line": 228, "error": "AttributeError: ...", "outcome": "failed" | "error",
                   "raised_at": "pandas/x.py:1442"}]}   # only when raised elsewhere

``file``/``line`` prefer the deepest frame in the test's own file; ``raised_at`` is the innermost frame;
``error`` is the first ``E`` line of the last exception in a chain (the one that propagated).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from ctxledger.records import Freshness
from ctxledger.represent._lines import LineIndex
from ctxledger.represent._patterns import exit_status
from ctxledger.represent.extract._base import Extraction, Source, clip

MAX_FAILURES = 20
_PYTEST_TOTALS = re.compile(r"^=+ (.*?\b(?:passed|failed|errors?|skipped|deselected|no tests ran)\b.*?) =+$")
_PYTEST_MARKERS = re.compile(
    r"^=+ (?:test session starts|short test summary info|FAILURES|ERRORS) =+$|^(?:FAILED|ERROR) \S+::", re.M
)
_COUNT = re.compile(r"(\d+) (passed|failed|errors?|skipped|deselected|xfailed|xpassed|warnings?)")
_SUMMARY_LINE = re.compile(r"^(FAILED|ERROR) (\S+)(?: - (.*))?$")
_VERBOSE_LINE = re.compile(r"^(\S+::\S+) (FAILED|ERROR)\b")
_SECTION_START = re.compile(r"^=+ (FAILURES|ERRORS) =+$")
_SECTION_HEAD = re.compile(r"^_{3,} (.+?) _{3,}$")
_RULE = re.compile(r"^=+( .* )?=+$")
_LOCATION = re.compile(r"^([^\s:]+\.pyx?):(\d+):(?: .*)?$")
_CHAINED = re.compile(r"^(?:During handling of the above exception|The above exception was the direct cause)")
_UNITTEST_RAN = re.compile(r"^Ran (\d+) tests? in ", re.M)
_UNITTEST_HEAD = re.compile(r"^(FAIL|ERROR): (\S+) \((\S+)\)")
_UNITTEST_RESULT = re.compile(r"^(?:FAILED \((.*)\)|OK\b)", re.M)
_FRAME = re.compile(r'^\s*File "([^"]+)", line (\d+)')


@dataclass(slots=True)
class _Failure:
    test: str
    outcome: str
    first: int
    last: int
    file: str | None = None
    line: int | None = None
    error: str | None = None
    raised_at: str | None = None

    def as_field(self) -> dict[str, Any]:
        fields: dict[str, Any] = {
            "test": self.test,
            "file": self.file,
            "line": self.line,
            "error": self.error,
            "outcome": self.outcome,
        }
        if self.raised_at:
            fields["raised_at"] = self.raised_at
        return fields


def _pytest_counts(index: LineIndex) -> dict[str, int]:
    for line in range(index.line_count, 0, -1):
        match = _PYTEST_TOTALS.match(index.line_text(line))
        if match and _COUNT.search(match.group(1)):
            counts: dict[str, int] = {}
            for number, word in _COUNT.findall(match.group(1)):
                key = {"error": "errors", "warning": "warnings"}.get(word, word)
                counts[key] = int(number)
            return counts
    return {}


def _sections(index: LineIndex) -> list[tuple[str, int, int]]:
    """(title, first line, last line) of each failure section."""
    out: list[tuple[str, int, int]] = []
    inside = False
    for line in range(1, index.line_count + 1):
        text = index.line_text(line)
        if _SECTION_START.match(text):
            inside = True
            continue
        if inside and _RULE.match(text):
            inside = False
        head = _SECTION_HEAD.match(text) if inside else None
        if head:
            out.append((head.group(1), line, line))
        elif inside and out:
            out[-1] = (out[-1][0], out[-1][1], line)
    return out


def _read_section(index: LineIndex, failure: _Failure) -> None:
    """File, line and message of a failure from its section.

    The location prefers the deepest frame in the test's own file; the message is the first ``E`` line
    of the last exception in a chain (the one that propagated).
    """
    locations: list[tuple[str, int]] = []
    error: str | None = None
    for line in range(failure.first, failure.last + 1):
        text = index.line_text(line)
        location = _LOCATION.match(text)
        if location:
            locations.append((location.group(1), int(location.group(2))))
        elif _CHAINED.match(text):
            error = None
        elif text.startswith("E ") and error is None:
            error = clip(text[1:].strip())
    failure.error = error or failure.error
    if not locations:
        return
    own = [loc for loc in locations if failure.file and loc[0] == failure.file]
    failure.file, failure.line = own[-1] if own else locations[-1]
    if locations[-1] != (failure.file, failure.line):
        failure.raised_at = f"{locations[-1][0]}:{locations[-1][1]}"


def _same_test(nodeid: str, title: str) -> bool:
    return nodeid.split("::", 1)[-1].replace("::", ".") == title


def _pytest_failures(index: LineIndex) -> list[_Failure]:
    found: dict[str, _Failure] = {}
    for line in range(1, index.line_count + 1):
        text = index.line_text(line)
        summary = _SUMMARY_LINE.match(text)
        verbose = _VERBOSE_LINE.match(text)
        if summary and "::" in summary.group(2):
            outcome, test, message = summary.group(1).lower(), summary.group(2), summary.group(3)
        elif verbose:
            test, outcome, message = verbose.group(1), verbose.group(2).lower(), None
        else:
            continue
        failure = found.setdefault(test, _Failure(test, outcome, line, line, file=test.split("::")[0]))
        failure.error = failure.error or (clip(message) if message else None)
    sections = _sections(index)
    for title, first, last in sections:
        known = next((f for f in found.values() if _same_test(f.test, title)), None)
        failure = known or found.setdefault(title, _Failure(title, "failed", first, last))
        failure.first, failure.last = first, last
        _read_section(index, failure)
    if not sections and found:
        _read_orphan(index, list(found.values())[-1])
    return list(found.values())


def _read_orphan(index: LineIndex, failure: _Failure) -> None:
    """Output cut by ``| tail`` starts inside the last failure's section: read it up to the first rule."""
    last = next((n for n in range(1, index.line_count + 1) if _RULE.match(index.line_text(n))), 0) - 1
    if last >= 1:
        orphan = _Failure(failure.test, failure.outcome, 1, last, file=failure.file)
        _read_section(index, orphan)
        if orphan.line is not None:
            failure.first, failure.last = 1, last
            failure.line, failure.error, failure.raised_at = orphan.line, orphan.error, orphan.raised_at
            failure.file = orphan.file


def _unittest_failures(index: LineIndex) -> list[_Failure]:
    failures: list[_Failure] = []
    current: _Failure | None = None
    for line in range(1, index.line_count + 1):
        text = index.line_text(line)
        head = _UNITTEST_HEAD.match(text)
        if head:
            current = _Failure(f"{head.group(3)}.{head.group(2)}", head.group(1).lower(), line, line)
            failures.append(current)
        elif text.startswith(("=====", "Ran ")) or (
            text.startswith("-----") and current and current.last > current.first
        ):
            current = None
        elif current is not None and text.strip() and not text.startswith("-----"):
            current.last = line
            frame = _FRAME.match(text)
            if frame:
                current.file, current.line = frame.group(1), int(frame.group(2))
            elif not text[0].isspace() and not text.startswith("Traceback"):
                current.error = clip(text.strip())
    return failures


def _unittest_counts(text: str) -> dict[str, int]:
    counts: dict[str, int] = {}
    ran = _UNITTEST_RAN.search(text)
    result = _UNITTEST_RESULT.search(text)
    if ran:
        counts["ran"] = int(ran.group(1))
    if result and result.group(1):
        for key, value in re.findall(r"(\w+)=(\d+)", result.group(1)):
            counts[key] = int(value)
    return counts


def detect(text: str) -> str | None:
    """``"pytest"``, ``"unittest"`` or ``None``: which runner printed this output."""
    if _PYTEST_MARKERS.search(text) or any(_PYTEST_TOTALS.match(t) for t in text.splitlines()[-5:]):
        return "pytest"
    if _UNITTEST_RAN.search(text) or _UNITTEST_HEAD.search(text):
        return "unittest"
    return None


def extract_testrun(source: Source) -> Extraction | None:
    """Extract test results (see the module docstring); ``None`` when no test runner printed this."""
    runner = detect(source.text)
    if runner is None:
        return None
    if runner == "pytest":
        counts, failures = _pytest_counts(source.index), _pytest_failures(source.index)
    else:
        counts, failures = _unittest_counts(source.text), _unittest_failures(source.index)
    status = exit_status(source.text)
    fields = {
        "runner": runner,
        "exit_status": status,
        "counts": counts,
        "failures": [f.as_field() for f in failures[:MAX_FAILURES]],
    }
    locators = [
        source.whole(),
        *(source.locate_lines(f.first, f.last, test=f.test) for f in failures[:MAX_FAILURES]),
    ]
    return Extraction(
        kind="testrun",
        summary=_summary(source.artifact.name or runner, runner, counts, failures, status),
        fields=fields,
        confidence=0.95 if counts else 0.85,
        freshness=Freshness.SESSION,
        locators=tuple(locators),
    )


def _summary(name: str, runner: str, counts: dict[str, int], failures: list[_Failure], status: int | None) -> str:
    totals = ", ".join(f"{n} {k}" for k, n in counts.items()) or "no totals printed"
    head = f"{name} ({runner}): {totals}"
    if status is not None:
        head += f"; exit status {status}"
    for failure in failures[:5]:
        where = f" at {failure.file}:{failure.line}" if failure.line else ""
        head += f"; {failure.outcome.upper()} {failure.test}{where}"
        if failure.error:
            head += f" — {clip(failure.error, 160)}"
    return clip(head, 900)
