"""Reading a source file as JSON or JSON Lines, with errors that point at the broken record.

A file is read as **JSON Lines** when its extension is ``.jsonl``/``.ndjson``, or when it has at least
two non-empty lines and every non-empty line starts with ``{`` and ends with ``}`` (one object per
line, e.g. BFCL's ``.json`` files). Otherwise it is one JSON document. Errors:

* a JSON Lines record that does not parse → ``InputError(index=<0-based record number>)`` whose message
  gives the 1-based line and column;
* a malformed JSON document → ``InputError`` with the line and column; when the document is a
  top-level array, ``index`` is the element that does not parse.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ctxledger.errors import InputError

_SUFFIXES = (".json", ".jsonl", ".ndjson", ".traj")
_JSONL_SUFFIXES = (".jsonl", ".ndjson")


@dataclass(frozen=True, slots=True)
class Loaded:
    """A parsed source: its JSON ``value`` (for JSON Lines, the list of records) and ``jsonl``."""

    value: Any
    jsonl: bool = False


def stem_of(path: Path) -> str:
    """The file name without its ``.json``/``.jsonl``/``.ndjson``/``.traj`` suffixes."""
    name = path.name
    while True:
        for suffix in _SUFFIXES:
            if name.endswith(suffix) and len(name) > len(suffix):
                name = name[: -len(suffix)]
                break
        else:
            return name


def load_file(path: Path, source: str) -> Loaded:
    """Read and parse ``path`` (see the module docstring for the JSON / JSON Lines rule).

    Raises:
        InputError: the file is missing, not UTF-8, empty, or malformed (names ``source``).
    """
    text = _read_text(path, source)
    if path.suffix in _JSONL_SUFFIXES or _looks_like_jsonl(text):
        return Loaded(_parse_lines(text, source), jsonl=True)
    return Loaded(parse_document(text, source))


def parse_document(text: str, source: str) -> Any:
    """Parse one JSON document.

    Raises:
        InputError: malformed JSON, naming line/column and, for a top-level array, the element index.
    """
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise InputError(
            f"malformed JSON at line {exc.lineno} column {exc.colno}: {exc.msg}",
            source=source,
            index=_failing_element(text),
        ) from exc


def _read_text(path: Path, source: str) -> str:
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise InputError(f"cannot read file: {exc.strerror or exc}", source=source) from exc
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise InputError(f"not UTF-8 text (byte {exc.start})", source=source) from exc
    if not text.strip():
        raise InputError("the file is empty", source=source)
    return text


def _looks_like_jsonl(text: str) -> bool:
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    return len(lines) >= 2 and all(line.startswith("{") and line.endswith("}") for line in lines)


def _parse_lines(text: str, source: str) -> list[Any]:
    records: list[Any] = []
    for lineno, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            records.append(json.loads(line))
        except json.JSONDecodeError as exc:
            raise InputError(
                f"malformed JSON on line {lineno} column {exc.colno}: {exc.msg}",
                source=source,
                index=len(records),
            ) from exc
    return records


def _failing_element(text: str) -> int | None:
    """Index of the first element of a top-level JSON array that does not parse, else ``None``."""
    decoder = json.JSONDecoder()
    pos = _skip_ws(text, 0)
    if not text.startswith("[", pos):
        return None
    pos, index = pos + 1, 0
    while True:
        pos = _skip_ws(text, pos)
        try:
            _, pos = decoder.raw_decode(text, pos)
        except json.JSONDecodeError:
            return index
        pos = _skip_ws(text, pos)
        if not text.startswith(",", pos):
            return None if text.startswith("]", pos) else index + 1
        pos, index = pos + 1, index + 1


def _skip_ws(text: str, pos: int) -> int:
    while pos < len(text) and text[pos] in " \t\r\n":
        pos += 1
    return pos
