"""Where in an uploaded file an import failed: every ``/v1/imports`` input problem names a ``field``.

Importers name the field of a bad record (``role``, with the record's ``index``). Malformed JSON names only the
line and column (and the record, for a JSON Lines file or a top-level array); here it also gets the JSON path
of the value being read where parsing stopped, in the importers' notation (``messages[3].content``; relative
to the record when ``index`` is given). A problem with no path inside the file (the content is not JSON at
its top, or is empty) names the request field that holds the file, ``body.content``.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass

from ctxledger.errors import InputError

CONTENT_FIELD = "body.content"
"""The request field holding the uploaded file."""

_TOKEN = re.compile(r'"(?:[^"\\]|\\.)*"|[{}\[\],:]')


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


def located(exc: InputError, text: str) -> InputError:
    """``exc`` (a problem with uploaded ``text``) with a ``field``: unchanged when it has one.

    Malformed JSON (``exc`` caused by :class:`json.JSONDecodeError`) gets the path where parsing stopped, relative
    to record ``exc.index`` when given; any other problem without a field, :data:`CONTENT_FIELD`.
    """
    if exc.field is not None or type(exc) is not InputError:
        return exc
    cause = exc.__cause__
    path = ""
    if isinstance(cause, json.JSONDecodeError):
        path = json_path_at(cause.doc, cause.pos)
        if exc.index is not None and cause.doc == text:  # a top-level array's element: relative to it
            path = path.removeprefix(f"[{exc.index}]").removeprefix(".")
    return InputError(exc.problem, source=exc.source, index=exc.index, field=path or CONTENT_FIELD)
