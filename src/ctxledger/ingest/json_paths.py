"""Where in a JSON text a parser stopped, as the JSON path of the value it was reading.

Malformed JSON is reported by :mod:`json` as a line and column; the importers name a bad record's field by
its path (``messages[3].content``). :func:`json_path_at` turns the parser's position into that path, so an
import error names the record and the field whatever surface (library, CLI, HTTP service) shows it.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass

_TOKEN = re.compile(r'"(?:[^"\\]|\\.)*"|[{}\[\],:]')
_NUMBER = re.compile(r'"(?:[^"\\]|\\.)*"|-?(\d+)(?![.\deE])|-?\d+(?:\.\d*)?(?:[eE][+-]?\d+)?')
_ELEMENT = re.compile(r"\[(\d+)\]")


@dataclass
class _Frame:
    """An array or object open at the point scanned to: the index, or the key, of the value being read in it."""

    array: bool
    index: int = 0
    key: str | None = None
    expects_key: bool = True


def json_path_at(text: str, pos: int) -> str:
    """The JSON path of the value being read at character ``pos`` of ``text`` (``""``: the top-level value).

    ``text`` need only be well-formed before ``pos`` (a parser stopped there). Keys are joined with ``.`` and
    indices written ``[i]``, as importers name fields (``messages[3].content``); inside an object between
    members (where a key is expected), the path is the object's own.
    """
    frames: list[_Frame] = []
    for match in _TOKEN.finditer(text, 0, max(0, pos)):
        token = match.group()
        if token in "{[":
            frames.append(_Frame(array=token == "["))
            continue
        if not frames:
            continue
        top = frames[-1]
        if token in "}]":
            frames.pop()
        elif token == ",":
            top.index, top.key, top.expects_key = top.index + 1, None, True
        elif token == ":":
            top.expects_key = False
        elif not top.array and top.expects_key:  # a string where the object expects a key
            top.key = _key(token)
    return _join(frames)


def error_field(exc: json.JSONDecodeError, element: int | None = None) -> str | None:
    """The field (JSON path) where parsing ``exc.doc`` stopped; ``None`` when it stopped at the top.

    With ``element`` (the top-level array's element that does not parse), the path is relative to that element,
    as a record's fields are named; ``None`` when parsing stopped outside it (between two elements).
    """
    return field_at(exc.doc, exc.pos, element)


def field_at(text: str, pos: int, element: int | None = None) -> str | None:
    """The field (JSON path) of the value being read at character ``pos`` of ``text``; ``None`` at the top.

    ``element`` makes the path relative to that element of a top-level array, as :func:`error_field` says.
    """
    path = json_path_at(text, pos)
    if element is not None:
        inside = path.removeprefix(f"[{element}]")
        if inside == path:
            return None
        path = inside.removeprefix(".")
    return path or None


def element_at(text: str, pos: int) -> int | None:
    """The index of the top-level array's element being read at character ``pos``; ``None`` outside one."""
    match = _ELEMENT.match(json_path_at(text, pos))
    return int(match.group(1)) if match else None


def nesting_past(text: str, limit: int) -> int | None:
    """The position of the first ``[`` or ``{`` opening a level deeper than ``limit``, else ``None``.

    Strings are skipped, so brackets inside them do not count; no recursion, whatever the depth.
    """
    depth = 0
    for match in _TOKEN.finditer(text):
        token = match.group()
        if token in "{[":
            depth += 1
            if depth > limit:
                return match.start()
        elif token in "}]":
            depth -= 1
    return None


def long_integer(text: str, digits: int) -> tuple[int, int] | None:
    """``(position, digit count)`` of the first integer literal of more than ``digits`` digits, else ``None``.

    Strings are skipped; a number with a fraction or an exponent is a float, never too long.
    """
    for match in _NUMBER.finditer(text):
        number = match.group(1)
        if number is not None and len(number) > digits:
            return match.start(1), len(number)
    return None


def _key(token: str) -> str:
    try:
        return str(json.loads(token))
    except ValueError:  # a bad escape: the key as written
        return token[1:-1]


def _join(frames: list[_Frame]) -> str:
    out = ""
    for frame in frames:
        if frame.array:
            out += f"[{frame.index}]"
        elif frame.key is not None:
            out += f".{frame.key}" if out else frame.key
    return out
