r"""Reading a source file as JSON or JSON Lines, with errors that point at the broken record.

A file is read as **JSON Lines** when its extension is ``.jsonl``/``.ndjson``, or when it has at least
two non-empty lines and every non-empty line starts with ``{`` and ends with ``}`` (one object per
line, e.g. BFCL's ``.json`` files). Otherwise it is one JSON document. Errors:

* a JSON Lines record that does not parse → ``InputError(index=<0-based record number>)`` whose message
  gives the 1-based line and column, and whose ``field`` is the JSON path of the value being read where
  parsing stopped (:func:`~ctxledger.ingest.json_paths.error_field`; ``None`` at the record's top);
* a malformed JSON document → ``InputError`` with the line and column and that ``field``; when the document
  is a top-level array, ``index`` is the element that does not parse and ``field`` is relative to it;
* JSON that cannot be kept (:func:`check_value`): nesting deeper than :data:`MAX_DEPTH` levels, an integer
  of more than :data:`MAX_INT_DIGITS` digits, or a string holding a lone surrogate escape (``"\ud800"``,
  which no UTF-8 store can write) → ``InputError`` naming the JSON path. When the value is too deep or too
  long for the parser itself, the text is scanned for it instead, so the error still names the record (the
  JSON Lines record, or the top-level array's element), the field and the line.

Nesting counts structure only: a string (a tool's output, a call's arguments) holding deep JSON is text.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ctxledger.conversation_ids import nfc
from ctxledger.errors import InputError
from ctxledger.ingest.json_paths import element_at, error_field, field_at, long_integer, nesting_past
from ctxledger.json_text import MAX_DEPTH as JSON_MAX_DEPTH

_SUFFIXES = (".json", ".jsonl", ".ndjson", ".traj")
MAX_DEPTH = JSON_MAX_DEPTH
"""Deepest nesting of arrays and objects accepted (transcripts nest a few levels; tool output is text)."""
MAX_INT_DIGITS = 4300
"""Longest integer accepted, in decimal digits (Python's own limit for converting int and str)."""
_JSONL_SUFFIXES = (".jsonl", ".ndjson")


@dataclass(frozen=True, slots=True)
class Loaded:
    """A parsed source: its JSON ``value`` (for JSON Lines, the list of records) and ``jsonl``."""

    value: Any
    jsonl: bool = False


def stem_of(path: Path) -> str:
    """The file name without its ``.json``/``.jsonl``/``.ndjson``/``.traj`` suffixes, in Unicode NFC form.

    It is a conversation id's default, and ids are NFC (:mod:`ctxledger.conversation_ids`); a file system may
    hand back a name decomposed (NFD), as macOS's HFS+ does.
    """
    name = nfc(path.name)
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
        InputError: the file is missing, not UTF-8, empty, or malformed (names ``source``; malformed JSON also
            the record and the field where parsing stopped, as the module docstring says).
    """
    text = _read_text(path, source)
    if path.suffix in _JSONL_SUFFIXES or _looks_like_jsonl(text):
        records = _parse_lines(text, source)
        for index, record in enumerate(records):
            check_value(record, source, index=index)
        return Loaded(records, jsonl=True)
    value = parse_document(text, source)
    if isinstance(value, list):  # a top-level array's elements are its records
        for index, record in enumerate(value):
            check_value(record, source, index=index, depth=1)
    else:
        check_value(value, source)
    return Loaded(value)


def check_value(value: Any, source: str, *, index: int | None = None, depth: int = 0) -> None:
    """Refuse a JSON value the store could not keep or later code could not walk.

    ``index`` names the record ``value`` is; ``depth`` is how deep it sits (1 for an element of a top-level
    array), so nesting is counted from the document's top.

    Raises:
        InputError: nesting deeper than :data:`MAX_DEPTH`, an integer longer than :data:`MAX_INT_DIGITS`
            digits, or a string (value or key) holding a lone surrogate; names the JSON path
            (``messages[3].content``).
    """
    stack: list[tuple[Any, str, int]] = [(value, "", depth)]
    while stack:
        item, path, depth = stack.pop()
        if isinstance(item, str):
            _check_string(item, source, index, path)
        elif isinstance(item, bool | float) or item is None:
            continue
        elif isinstance(item, int):
            if item.bit_length() > MAX_INT_DIGITS * 3.33:
                raise InputError(
                    f"an integer of more than {MAX_INT_DIGITS} digits", source=source, index=index, field=path or None
                )
        elif isinstance(item, dict | list | tuple):
            if depth >= MAX_DEPTH:
                raise InputError(
                    f"nested more than {MAX_DEPTH} levels deep", source=source, index=index, field=short_path(path)
                )
            if isinstance(item, dict):
                for key, child in item.items():
                    name = f"{path}.{key}" if path else str(key)
                    if isinstance(key, str):
                        _check_string(key, source, index, name)
                    stack.append((child, name, depth + 1))
            else:
                stack.extend((child, f"{path}[{i}]", depth + 1) for i, child in enumerate(item))


_STEP = re.compile(r"\[\d+\]|\.?[^.\[]+")


def short_path(path: str, keep: int = 3) -> str | None:
    """``path`` (``a.b[0][1]…``) with its middle steps elided when it has more than ``2 * keep + 1`` steps.

    ``messages[0][0][0]…[0].x`` at depth 300 reads ``messages[0][0]…(295 more steps)…[0][0].x``; ``None`` for
    the empty path (the top-level value).
    """
    steps = _STEP.findall(path)
    if len(steps) <= 2 * keep + 1:
        return path or None
    return "".join(steps[:keep]) + f"…({len(steps) - 2 * keep} more steps)…" + "".join(steps[-keep:])


def _check_string(text: str, source: str, index: int | None, path: str) -> None:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise InputError(
            f"a lone surrogate (\\u{ord(text[exc.start]):04x} at character {exc.start}) is not text; "
            "escape a character outside the BMP as a surrogate pair",
            source=source,
            index=index,
            field=path.encode("utf-8", "backslashreplace").decode() or None,
        ) from None


def parse_document(text: str, source: str) -> Any:
    """Parse one JSON document.

    Raises:
        InputError: malformed JSON, naming line/column, the field where parsing stopped and, for a top-level
            array, the element index (the field then relative to that element).
    """
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        element = _failing_element(text)
        raise InputError(
            f"malformed JSON at line {exc.lineno} column {exc.colno}: {exc.msg}",
            source=source,
            index=element,
            field=error_field(exc, element),
        ) from exc
    except (RecursionError, ValueError):  # nesting past the interpreter's limit, an integer past Python's
        raise _unkeepable(text, source) from None


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
                field=error_field(exc),
            ) from exc
        except (RecursionError, ValueError):  # nesting past the interpreter's limit, an integer past Python's
            raise _unkeepable(line, source, index=len(records), line=lineno) from None
    return records


def _unkeepable(text: str, source: str, *, index: int | None = None, line: int | None = None) -> InputError:
    """The error for well-formed JSON the parser gave up on: too deep, or an integer too long.

    Names the record and field where the first such value starts (for a document that is a top-level array,
    ``index`` is its element), and its line.
    """
    deep = nesting_past(text, MAX_DEPTH)
    long = long_integer(text, MAX_INT_DIGITS)
    if long is not None and (deep is None or long[0] < deep):
        pos, problem = long[0], f"an integer of {long[1]} digits, more than the {MAX_INT_DIGITS} accepted"
    elif deep is not None:
        pos, problem = deep, f"nested more than {MAX_DEPTH} levels deep"
    else:
        return InputError("cannot be read as JSON", source=source, index=index)
    element = element_at(text, pos) if index is None else None
    line = text.count("\n", 0, pos) + 1 if line is None else line
    field = short_path(field_at(text, pos, element) or "")
    return InputError(f"{problem} (line {line})", source=source, index=element if index is None else index, field=field)


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
