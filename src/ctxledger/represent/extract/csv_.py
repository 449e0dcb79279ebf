"""CSV (and TSV, ``;``/``|``-separated) tool outputs: schema, row count, and the rows asked about.

Undeclared text is sniffed cheaply and deterministically: each of ``,`` tab ``;`` ``|`` splits the first
20 rows (quotes honoured); a delimiter qualifies when the first row has two or more fields and 80 % of
the rows have as many, and the one giving the most fields wins. The parsed rows must then
have at least two columns, a header line and one data row, and 90 % of them must
have the header's width (so prose with commas is not taken for CSV). A declared ``text/csv`` is parsed
with ``,`` (tab for ``text/tab-separated-values``) unless sniffing finds another delimiter.

The first row is a header when its cells are non-empty, distinct and none is a number or a date.

``fields`` of the memory::

    {"delimiter": ",", "has_header": true, "row_count": n,
     "columns": [{"name": "temp_air", "type": "integer" | "number" | "boolean" | "date" | "string",
                  "empty": k}],
     "matches": [{"row": 12, "line": 13, "hits": k, "values": {...}}]}   # rows asked about, ≤ 5

Row numbers are 1-based data rows; ``line`` is the row's first physical line. Each match has a locator
with its exact bytes (a quoted field may span lines).
"""

from __future__ import annotations

import csv
import io
import itertools
import re
from typing import Any

from ctxledger.records import Freshness
from ctxledger.represent.extract._base import Extraction, Source, clip, term_hits

MAX_MATCHES = 5
CSV_MEDIA_TYPES = ("text/csv", "text/tab-separated-values", "application/csv")
_SAMPLE_LINES = 20
_DELIMITERS = (",", "\t", ";", "|")
_TYPE_RES = (
    ("integer", re.compile(r"^[+-]?\d+$")),
    ("number", re.compile(r"^[+-]?(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?$")),
    ("boolean", re.compile(r"^(?:true|false|yes|no)$", re.IGNORECASE)),
    (
        "date",
        re.compile(r"^\d{4}-\d{2}-\d{2}(?:[T ]\d{2}:\d{2}(?::\d{2}(?:\.\d+)?)?(?:Z|[+-]\d{2}:?\d{2})?)?$"),
    ),
)


def _cell_type(value: str) -> str:
    return next((name for name, pattern in _TYPE_RES if pattern.match(value)), "string")


def _column_type(values: list[str]) -> str:
    kinds = {_cell_type(v) for v in values if v != ""}
    if kinds <= {"integer"} and kinds:
        return "integer"
    if kinds <= {"integer", "number"} and kinds:
        return "number"
    return kinds.pop() if len(kinds) == 1 else "string"


def _widths(sample: str, delimiter: str) -> list[int]:
    try:
        rows = csv.reader(io.StringIO(sample, newline="\n"), delimiter=delimiter)
        return [len(row) for row in itertools.islice(filter(None, rows), _SAMPLE_LINES)]
    except csv.Error:
        return []


def sniff_delimiter(text: str) -> str | None:
    """The delimiter the first lines of ``text`` use consistently (see module docstring), or ``None``."""
    sample = text[:65536]
    if sample.lstrip()[:1] in ("{", "["):
        return None
    if "\n" in sample.rstrip("\n"):
        sample = sample[: sample.rstrip("\n").rfind("\n")]  # drop a possibly cut last line
    best: tuple[int, str] | None = None
    for delimiter in _DELIMITERS:
        widths = _widths(sample, delimiter)
        if len(widths) < 2 or widths[0] < 2 or widths.count(widths[0]) < 0.8 * len(widths):
            continue
        if best is None or widths[0] > best[0]:
            best = (widths[0], delimiter)
    return best[1] if best else None


def _delimiter(source: Source, declared: bool) -> str | None:
    found = sniff_delimiter(source.text)
    if found or not declared:
        return found
    return "\t" if "tab-separated" in source.artifact.media_type else ","


def _rows(source: Source, delimiter: str) -> list[tuple[list[str], int, int]]:
    """Each row with its first and last physical line (1-based)."""
    reader = csv.reader(io.StringIO(source.text, newline="\n"), delimiter=delimiter)
    rows, last = [], 0
    for row in reader:
        rows.append((row, last + 1, reader.line_num))
        last = reader.line_num
    return [r for r in rows if r[0]]


def _consistent(rows: list[tuple[list[str], int, int]]) -> bool:
    width = len(rows[0][0])
    same = sum(1 for row, _, _ in rows if len(row) == width)
    return width >= 2 and len(rows) >= 2 and same >= 0.9 * len(rows)


def _has_header(first: list[str]) -> bool:
    return len(set(first)) == len(first) and all(c.strip() and _cell_type(c.strip()) == "string" for c in first)


def extract_csv(source: Source) -> Extraction | None:
    """Extract a CSV artifact (see the module docstring); ``None`` when the bytes are not CSV."""
    declared = source.artifact.media_type.split(";")[0].strip() in CSV_MEDIA_TYPES
    delimiter = _delimiter(source, declared) if source.text.strip() else None
    if delimiter is None:
        return None
    try:
        rows = _rows(source, delimiter)
    except csv.Error:
        return None
    if not rows or (not declared and not _consistent(rows)):
        return None
    header = _has_header(rows[0][0])
    names = rows[0][0] if header else [f"column_{i + 1}" for i in range(len(rows[0][0]))]
    body = rows[1:] if header else rows
    columns = []
    for i, name in enumerate(names):
        values = [row[i] if i < len(row) else "" for row, _, _ in body]
        columns.append({"name": name, "type": _column_type(values), "empty": values.count("")})
    found = _matches(source, body, names)
    fields: dict[str, Any] = {
        "delimiter": delimiter,
        "has_header": header,
        "row_count": len(body),
        "columns": columns,
        "matches": [{k: v for k, v in m.items() if k != "_last"} for m in found],
    }
    schema = ", ".join(f"{c['name']} ({c['type']})" for c in columns[:12])
    summary = f"{source.artifact.name or 'tool'} returned CSV, {len(body)} rows x {len(names)} columns: {schema}"
    if found:
        summary += "; rows matching the query: " + ", ".join(str(m["row"]) for m in found)
    locators = [
        source.whole(),
        *(source.locate_lines(m["line"], m["_last"], csv_row=m["row"]) for m in found),
    ]
    return Extraction(
        kind="csv",
        summary=clip(summary, 600),
        fields=fields,
        confidence=1.0 if declared else 0.8,
        freshness=Freshness.BOUNDED,
        locators=tuple(locators),
    )


def _matches(source: Source, body: list[tuple[list[str], int, int]], names: list[str]) -> list[dict[str, Any]]:
    if not source.terms:
        return []
    scored = []
    for number, (row, first, last) in enumerate(body, start=1):
        hits = term_hits(" ".join(row), source.terms)
        if hits:
            scored.append((-hits, number, row, first, last))
    scored.sort(key=lambda s: s[:2])
    return [
        {
            "row": number,
            "line": first,
            "_last": last,
            "hits": -neg,
            "values": {name: clip(value) for name, value in zip(names, row, strict=False)},
        }
        for neg, number, row, first, last in scored[:MAX_MATCHES]
    ]
