"""Logs, shell and build output: errors, warnings and exit status.

Error and warning lines are recognised by :mod:`ctxledger.represent._patterns`. A Python traceback is
reported as one error: its exception line (``ModuleNotFoundError: No module named 'x'``) with the
innermost ``File "…", line N`` frame, and a locator spanning the whole traceback.

``fields`` of the memory::

    {"exit_status": 1 | None, "tool_status": "failed" | ..., "line_count": n,
     "error_count": k, "warning_count": w,
     "errors": [{"line": 242, "text": "...", "kind": "error" | "exception",
                 "file": "/testbed/x.py", "file_line": 1}],   # first 8 and last 2 when more than 10
     "warnings": [{"line": 121, "text": "..."}]}               # first 5

This extractor accepts any non-empty text, so the dispatcher tries it last.
"""

from __future__ import annotations

import re
from typing import Any

from ctxledger.records import Freshness
from ctxledger.represent._lines import LineIndex
from ctxledger.represent._patterns import exit_status, is_error_line, is_warning_line
from ctxledger.represent.extract._base import Extraction, Source, clip

_TRACEBACK = "Traceback (most recent call last):"
_FRAME_RE = re.compile(r'^\s*File "([^"]+)", line (\d+)')
MAX_ERRORS, MAX_WARNINGS = 10, 5


def _indent(text: str) -> int:
    return len(text) - len(text.lstrip())


def _traceback(index: LineIndex, first: int) -> tuple[dict[str, Any], int]:
    """The error entry of a traceback starting at line ``first`` and the traceback's last line."""
    base = _indent(index.line_text(first))
    frame: tuple[str, int] | None = None
    line = first + 1
    while line <= index.line_count:
        text = index.line_text(line)
        match = _FRAME_RE.match(text)
        if match:
            frame = (match.group(1), int(match.group(2)))
        elif text.strip() and _indent(text) <= base:
            break
        line += 1
    last = min(line, index.line_count)
    entry: dict[str, Any] = {"line": last, "text": clip(index.line_text(last).strip()), "kind": "exception"}
    if frame:
        entry["file"], entry["file_line"] = frame
    return entry, last


def scan(index: LineIndex) -> tuple[list[tuple[dict[str, Any], int]], list[dict[str, Any]]]:
    """Errors (each with the first line of its block) and warnings of a text, in line order."""
    errors: list[tuple[dict[str, Any], int]] = []
    warnings: list[dict[str, Any]] = []
    line = 1
    while line <= index.line_count:
        text = index.line_text(line)
        if _TRACEBACK in text:
            entry, last = _traceback(index, line)
            errors.append((entry, line))
            line = last + 1
            continue
        if is_error_line(text):
            errors.append(({"line": line, "text": clip(text.strip()), "kind": "error"}, line))
        elif is_warning_line(text):
            warnings.append({"line": line, "text": clip(text.strip())})
        line += 1
    return errors, warnings


def _kept(errors: list[Any]) -> list[Any]:
    return errors if len(errors) <= MAX_ERRORS else errors[: MAX_ERRORS - 2] + errors[-2:]


def _summary(name: str, status: int | None, errors: list[dict[str, Any]], count: int, warnings: int) -> str:
    head = f"{name} exited with status {status}" if status is not None else f"{name} output"
    if count:
        listed = "; ".join(f"line {e['line']}: {clip(e['text'], 160)}" for e in errors[:3])
        head += f"; {count} error line{'s' if count != 1 else ''}: {listed}"
    else:
        head += "; no error lines"
    if warnings:
        head += f"; {warnings} warning{'s' if warnings != 1 else ''}"
    return clip(head, 700)


def extract_logs(source: Source) -> Extraction | None:
    """Extract errors, warnings and exit status from text output; ``None`` for empty output."""
    if not source.text.strip():
        return None
    errors, warnings = scan(source.index)
    kept = _kept(errors)
    status = exit_status(source.text)
    fields: dict[str, Any] = {
        "exit_status": status,
        "tool_status": str(source.artifact.status),
        "line_count": source.index.line_count,
        "error_count": len(errors),
        "warning_count": len(warnings),
        "errors": [entry for entry, _ in kept],
        "warnings": warnings[:MAX_WARNINGS],
    }
    locators = [source.whole()]
    locators += [source.locate_lines(first, entry["line"]) for entry, first in kept]
    locators += [source.locate_lines(w["line"]) for w in warnings[:MAX_WARNINGS]]
    name = source.artifact.name or "tool"
    return Extraction(
        kind="logs",
        summary=_summary(name, status, fields["errors"], len(errors), len(warnings)),
        fields=fields,
        confidence=0.8,
        freshness=Freshness.SESSION,
        locators=tuple(locators),
    )
