"""The CSV extractor: schema, row count and the rows asked about, on a table of real tau-bench flights."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

import pytest
from represent_helpers import OBSERVED, artifact_for, tau_tool_outputs

from ctxledger.records import ToolMemory
from ctxledger.represent import extract, rehydrate
from ctxledger.testing import MemoryBlobStore

COLUMNS = ["flight_number", "route", "departure", "status", "economy_price", "business_seats"]


def _flights(data_dir: Path) -> list[dict]:
    """Every distinct flight of the real tau-bench direct-flight searches, in first-seen order."""
    seen: dict[str, dict] = {}
    for content in tau_tool_outputs(data_dir, "search_direct_flight"):
        for flight in json.loads(content):
            seen.setdefault(flight["flight_number"] + flight["origin"], flight)
    return list(seen.values())


def _table(flights: list[dict], delimiter: str = ",") -> bytes:
    """The flights as a CSV export: a quoted route with a comma, one remark spanning two lines."""
    out = io.StringIO()
    writer = csv.writer(out, delimiter=delimiter, lineterminator="\n")
    writer.writerow(COLUMNS)
    for i, f in enumerate(flights):
        route = f"{f['origin']}, {f['destination']}" if i != 3 else f"{f['origin']},\n{f['destination']}"
        writer.writerow(
            [
                f["flight_number"],
                route,
                f["scheduled_departure_time_est"],
                f["status"],
                f["prices"]["economy"],
                f["available_seats"]["business"],
            ]
        )
    return out.getvalue().encode()


def _extract(data: bytes, media_type: str, query: str = "", blobs: MemoryBlobStore | None = None) -> ToolMemory:
    if blobs is not None:
        blobs.put(data)
    artifact = artifact_for(data, name="export_flights", media_type=media_type)
    memory = extract(artifact, data, query=query, memory_id="mem", observed_at=OBSERVED)
    assert memory is not None and memory.fields["extractor"] == "csv"
    return memory


def test_schema_and_row_count(data_dir: Path):
    """Declared CSV: every column with its inferred type, the exact row count, full confidence."""
    flights = _flights(data_dir)
    memory = _extract(_table(flights), "text/csv")
    fields = memory.fields
    assert fields["row_count"] == len(flights) > 20
    assert fields["has_header"] is True and fields["delimiter"] == ","
    types = {c["name"]: c["type"] for c in fields["columns"]}
    assert types == {
        "flight_number": "string",
        "route": "string",
        "departure": "string",
        "status": "string",
        "economy_price": "integer",
        "business_seats": "integer",
    }
    assert memory.confidence == 1.0
    assert f"{len(flights)} rows x 6 columns" in memory.summary


def test_rows_asked_about_are_located_exactly(data_dir: Path, blobs: MemoryBlobStore):
    """The queried flight's row is matched and its locator rehydrates to exactly that CSV row."""
    flights = _flights(data_dir)
    wanted = flights[7]["flight_number"]
    data = _table(flights)
    memory = _extract(data, "text/csv", f"is {wanted} still available?", blobs)
    match = next(m for m in memory.fields["matches"] if m["values"]["flight_number"] == wanted)
    locator = next(loc for loc in memory.locators if loc.get("csv_row") == match["row"])
    (row,) = list(csv.reader(io.StringIO(rehydrate(blobs, locator).decode())))
    assert row[0] == wanted and row[4] == str(flights[7]["prices"]["economy"])


def test_quoted_multiline_row_spans_two_lines(data_dir: Path, blobs: MemoryBlobStore):
    """A quoted cell with a line break makes its row's locator span two physical lines."""
    flights = _flights(data_dir)
    data = _table(flights)
    memory = _extract(data, "text/csv", flights[3]["flight_number"], blobs)
    match = next(m for m in memory.fields["matches"] if m["row"] == 4)
    locator = next(loc for loc in memory.locators if loc.get("csv_row") == 4)
    assert locator["line_end"] == locator["line_start"] + 1 == match["line"] + 1
    assert rehydrate(blobs, locator).decode().count("\n") == 2


@pytest.mark.parametrize(
    ("delimiter", "media_type"),
    [(",", "text/plain"), ("\t", "text/plain"), (";", "application/octet-stream")],
)
def test_undeclared_tables_are_sniffed(data_dir: Path, delimiter: str, media_type: str):
    """Undeclared comma, tab and semicolon tables are recognised, at lower confidence."""
    memory = _extract(_table(_flights(data_dir), delimiter), media_type)
    assert memory.fields["delimiter"] == delimiter and memory.confidence == 0.8


def test_prose_with_commas_is_not_csv(data_dir: Path):
    """A real tau-bench error sentence with commas is read as a log line, not as a one-row table."""
    content = next(c for c in tau_tool_outputs(data_dir, "book_reservation") if c.startswith("Error:"))
    data = content.encode()
    memory = extract(artifact_for(data), data, memory_id="m", observed_at=OBSERVED)
    assert memory is not None and memory.fields["extractor"] == "logs"
