"""Logs, shell and build output: errors, warnings and exit status.

Error and warning lines are recognised by :mod:`ctxledger.represent._patterns`. A Python traceback is
reported as one error: its exception line (``ModuleNotFoundError: No module named 'x'``) with the
innermost ``File "…", line N`` frame, and a locator spanning the whole traceback; when the exception
shares the ``Traceback`` line (``ERROR crashed: Traceback (most recent call last): DiskFull: …``) or no
exception line follows the frames, that ``Traceback`` line is the error. Every entry names the line that
holds the error and carries that line's text. :func:`primary_error` picks the one line a compaction keeps
verbatim for a failed output.

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
_EXCEPTION_RE = re.compile(
    r"^\s*[A-Za-z_][\w.]*(?::\s|:$)|^\s*[A-Za-z_][\w.]*(?:Error|Exception|Interrupt|Exit|Iteration)\s*$"
)
MAX_ERRORS, MAX_WARNINGS = 10, 5


def _indent(text: str) -> int:
    return len(text) - len(text.lstrip())


def is_exception_line(text: str) -> bool:
    """Whether a line is the exception line that ends a Python traceback.

    ``DiskFull: no space left``, ``psycopg.errors.UniqueViolation: duplicate key …``, ``KeyboardInterrupt``,
    or any error line (:func:`~ctxledger.represent._patterns.is_error_line`).
    """
    return bool(_EXCEPTION_RE.match(text)) or is_error_line(text)


def _traceback(index: LineIndex, first: int) -> tuple[dict[str, Any], int]:
    """The error entry of a traceback starting at line ``first`` and the traceback's last line.

    The entry is the exception line that follows the frames. When no such line follows (the exception
    shares the ``Traceback`` line, ``ERROR crashed: Traceback (most recent call last): DiskFull: …``, or the
    traceback was cut short), the ``Traceback`` line itself holds the error and the line after the frames
    is left to be scanned on its own.
    """
    head = index.line_text(first)
    base = _indent(head)
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
    inline = bool(head.split(_TRACEBACK, 1)[1].strip())
    closes = line <= index.line_count and is_exception_line(index.line_text(line))
    if closes and not (inline and frame is None):
        entry: dict[str, Any] = {"line": line, "text": clip(index.line_text(line).strip()), "kind": "exception"}
        last = line
    else:
        entry = {"line": first, "text": clip(head.strip()), "kind": "exception"}
        last = line - 1
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


ERROR_LINE_CHARS = 500
"""The longest error line :func:`primary_error` returns (longer lines are cut with an ellipsis)."""


def primary_error(text: str) -> dict[str, Any] | None:
    """The one line that best says why a failed tool output failed: ``{"line": n, "text": …}`` or ``None``.

    The last traceback's exception line when there is one (the exception finally raised), else the first
    error line (the first compiler or shell error; later ones often follow from it), else the last non-empty
    line of the output; ``None`` for empty output. ``text`` is the line stripped, cut to
    :data:`ERROR_LINE_CHARS`.
    """
    if not text.strip():
        return None
    index = LineIndex(text.encode("utf-8"))
    errors, _ = scan(index)
    exceptions = [e for e, _ in errors if e["kind"] == "exception"]
    chosen = exceptions[-1] if exceptions else errors[0][0] if errors else None
    if chosen is not None:
        line = int(chosen["line"])
    else:
        line = max(n for n in range(1, index.line_count + 1) if index.line_text(n).strip())
    return {"line": line, "text": clip(index.line_text(line).strip(), ERROR_LINE_CHARS)}


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
