"""JSON tool outputs: keys, counts, top-level facts, and the records the query asks about.

``fields`` of the memory::

    {"type": "object" | "array" | "string" | …,
     "keys": [...]               # objects: top-level keys (first 50)
     "length": n,                # arrays: number of items
     "item_keys": [...],         # arrays of objects: keys of the items, most frequent first
     "counts": {key: n},         # objects: sizes of container-valued keys
     "scalars": {key: value},    # objects: top-level scalar facts (strings clipped to 200 chars)
     "matches": [{"json_pointer": "/flights/1", "hits": k, "record": {...}}],  # records asked about
     "envelope": "toolbench", "envelope_error": "..."}    # only for wrapped responses

Locators point at the whole artifact and, when the JSON is the artifact's own text, at the exact bytes of
each matched record (with its RFC 6901 ``json_pointer``). ToolBench / RapidAPI responses arrive wrapped
as ``{"error": "...", "response": "<JSON or Python-literal text>"}``; the inner value is unwrapped (with
``json`` or :func:`ast.literal_eval`, which evaluates literals only) and its records are located by
pointer only, since their bytes are escaped inside a string.
"""

from __future__ import annotations

import ast
import json
import math
from collections import Counter
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from ctxledger.records import Freshness
from ctxledger.represent.extract._base import Extraction, Source, clip, term_hits
from ctxledger.represent.extract._truncated import close_truncated, envelope_response

MAX_MATCHES = 5
_WHITESPACE = " \t\n\r"
_DECODER = json.JSONDecoder()


@dataclass(frozen=True, slots=True)
class Parsed:
    """A parsed JSON output.

    Attributes:
        value: the (unwrapped) value.
        exact: ``value`` is the artifact's own, complete text, so byte spans can be computed.
        envelope: ``"toolbench"`` when unwrapped from an ``{"error", "response"}`` envelope.
        envelope_error: the envelope's non-empty ``error`` text.
        truncated: the output was cut short; ``value`` holds only its complete elements.
    """

    value: Any
    exact: bool
    envelope: str | None = None
    envelope_error: str | None = None
    truncated: bool = False


def _loads(text: str) -> Any:
    """``json.loads`` that keeps ``NaN``/``Infinity`` (emitted by Python tools) as strings."""
    return json.loads(text, parse_constant=str)


def _literal(text: str) -> Any:
    try:
        return _loads(text)
    except ValueError:
        pass
    try:
        return ast.literal_eval(text)
    except (ValueError, SyntaxError, TypeError, RecursionError, MemoryError):
        return text


def _inner(response: str) -> tuple[Any, bool]:
    """The value of an envelope's response text, and whether it had to be recovered from a cut."""
    if not response.strip():
        return None, False
    value = _literal(response)
    if value is not response or response.lstrip()[:1] not in ("{", "["):
        return value, False
    closed = close_truncated(response)
    recovered = _literal(closed) if closed else closed
    return (recovered, True) if recovered is not closed else (response, False)


def _envelope(error: str, response: str, *, cut: bool) -> Parsed:
    value, recovered = _inner(response)
    return Parsed(value, exact=False, envelope="toolbench", envelope_error=error or None, truncated=cut or recovered)


def _parse_cut(text: str) -> Parsed | None:
    """Parse JSON text that was cut short (see :mod:`._truncated`)."""
    if text.lstrip()[:1] not in ("{", "["):
        return None
    envelope = envelope_response(text)
    if envelope is not None:
        return _envelope(*envelope, cut=True)
    closed = close_truncated(text)
    try:
        return Parsed(_loads(closed), exact=False, truncated=True) if closed else None
    except ValueError:
        return None


def parse_json(data: bytes) -> Parsed | None:
    """Parse an artifact as JSON (strict UTF-8); ``None`` if it is not JSON.

    A ToolBench ``{"error", "response"}`` envelope is unwrapped, and output cut short by a harness
    keeps its complete elements (``truncated=True``).
    """
    try:
        text = data.decode("utf-8")
        value = _loads(text)
    except (UnicodeDecodeError, RecursionError):
        return None
    except ValueError:
        return _parse_cut(text)
    if isinstance(value, dict) and set(value) == {"error", "response"} and isinstance(value["response"], str):
        return _envelope(str(value["error"]), value["response"], cut=False)
    return Parsed(value, exact=True)


def _skip(text: str, i: int) -> int:
    """Index of the first non-whitespace character at or after ``i``."""
    while i < len(text) and text[i] in _WHITESPACE:
        i += 1
    return i


def _children(text: str, start: int) -> Iterator[tuple[str | int, int, int]]:
    """(key or index, char start, char end) of each child of the container starting at ``text[start]``."""
    is_object = text[start] == "{"
    i = _skip(text, start + 1)
    position = 0
    while text[i] not in "]}":
        key: str | int = position
        if is_object:
            key, i = _DECODER.raw_decode(text, i)
            i = _skip(text, _skip(text, i) + 1)  # past the ':'
        _, end = _DECODER.raw_decode(text, i)
        yield key, i, end
        i = _skip(text, end)
        if text[i] == ",":
            i = _skip(text, i + 1)
        position += 1


def byte_span(data: bytes, path: Sequence[str | int]) -> tuple[int, int] | None:
    """Byte range ``[start, end)`` of the value at ``path`` in a JSON document, or ``None``."""
    text = data.decode("utf-8")
    start = _skip(text, 0)
    _, end = _DECODER.raw_decode(text, start)
    for step in path:
        if text[start] not in "[{":
            return None
        found = next(((a, b) for key, a, b in _children(text, start) if key == step), None)
        if found is None:
            return None
        start, end = found
    return len(text[:start].encode("utf-8")), len(text[:end].encode("utf-8"))


def pointer(path: Sequence[str | int]) -> str:
    """RFC 6901 JSON pointer of a path."""
    return "".join("/" + str(p).replace("~", "~0").replace("/", "~1") for p in path)


def is_scalar(value: Any) -> bool:
    """Whether a JSON value is a string, number, boolean or null."""
    return value is None or isinstance(value, str | int | float | bool)


def compact(value: Any) -> Any:
    """A small view of a record: scalars clipped, nested containers replaced by their size."""
    if isinstance(value, dict):
        return {str(k): compact_leaf(v) for k, v in value.items()}
    if isinstance(value, list):
        return [compact_leaf(v) for v in value[:10]]
    return compact_leaf(value)


def compact_leaf(value: Any) -> Any:
    """One value of :func:`compact`: clipped scalar, or ``"<list of n>"`` / ``"<object of n keys>"``."""
    if isinstance(value, str):
        return clip(value)
    if isinstance(value, list):
        return f"<list of {len(value)}>"
    if isinstance(value, dict):
        return f"<object of {len(value)} keys>"
    if value is None or isinstance(value, bool | int) or (isinstance(value, float) and math.isfinite(value)):
        return value
    return clip(str(value))  # tuples, sets, bytes from Python literals; NaN and infinities


Path = tuple[str | int, ...]
"""Keys and indexes from the root to a value."""


def records(value: Any, path: Path = (), depth: int = 0) -> Iterator[tuple[Path, dict[str, Any]]]:
    """Every object below the root (depth ≤ 4) with its path, in document order."""
    if depth > 4:
        return
    if isinstance(value, dict):
        if path:
            yield path, value
        children: Iterator[tuple[Any, Any]] = iter(value.items())
    elif isinstance(value, list):
        children = enumerate(value)
    else:
        return
    for key, child in children:
        if isinstance(child, dict | list):
            yield from records(child, (*path, key), depth + 1)


def record_text(record: dict[str, Any]) -> str:
    """The scalar values of a record as one searchable string."""
    return " ".join(str(v) for v in record.values() if is_scalar(v))


def matches(parsed: Parsed, source: Source) -> list[dict[str, Any]]:
    """The records the query asks about, best first: (hits desc, document order), at most 5."""
    if not source.terms:
        return []
    scored = []
    for order, (path, record) in enumerate(records(parsed.value)):
        hits = term_hits(record_text(record), source.terms)
        if hits:
            scored.append((-hits, order, path, record))
    scored.sort(key=lambda item: item[:2])
    return [
        {"json_pointer": pointer(path), "hits": -neg, "record": compact(record), "_path": path}
        for neg, _, path, record in scored[:MAX_MATCHES]
    ]


def match_locators(parsed: Parsed, source: Source, found: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """Locators of matched records: exact bytes when possible, else the whole artifact plus a pointer."""
    out = []
    for match in found:
        span = byte_span(source.data, match["_path"]) if parsed.exact else None
        if span is None:
            out.append({**source.whole(), "json_pointer": match["json_pointer"]})
        else:
            out.append(source.locate(*span, json_pointer=match["json_pointer"]))
    return out


def confidence(parsed: Parsed) -> float:
    """1.0 for the artifact's own complete JSON, 0.9 when unwrapped, 0.7 when recovered from a cut."""
    if parsed.truncated:
        return 0.7
    return 1.0 if parsed.exact else 0.9


def _type_name(value: Any) -> str:
    if isinstance(value, dict):
        return "object"
    if isinstance(value, list):
        return "array"
    return {str: "string", bool: "boolean", int: "number", float: "number"}.get(type(value), "null")


def _shape(value: Any) -> dict[str, Any]:
    fields: dict[str, Any] = {"type": _type_name(value)}
    if isinstance(value, dict):
        fields["keys"] = [str(k) for k in list(value)[:50]]
        fields["counts"] = {str(k): len(v) for k, v in value.items() if isinstance(v, dict | list)}
        fields["scalars"] = {str(k): compact_leaf(v) for k, v in list(value.items())[:50] if is_scalar(v)}
    elif isinstance(value, list):
        fields["length"] = len(value)
        keys = Counter(k for item in value if isinstance(item, dict) for k in item)
        fields["item_keys"] = [str(k) for k, _ in keys.most_common(30)]
    else:
        fields["value"] = compact_leaf(value)
    return fields


def _summary(fields: dict[str, Any], found: Sequence[dict[str, Any]], name: str) -> str:
    head = f"{name} returned JSON {fields['type']}"
    if fields["type"] == "object":
        facts = ", ".join(f"{k}={v}" for k, v in list(fields["scalars"].items())[:8])
        sizes = ", ".join(f"{k}: {n} items" for k, n in list(fields["counts"].items())[:8])
        head += f" with {len(fields['keys'])} keys" + (f"; {facts}" if facts else "") + (f"; {sizes}" if sizes else "")
    elif fields["type"] == "array":
        head += f" of {fields['length']} items" + (
            f" (keys: {', '.join(fields['item_keys'][:8])})" if fields["item_keys"] else ""
        )
    else:
        head += f": {fields['value']}"
    if fields.get("truncated"):
        head += " (output was cut short; complete elements only)"
    if fields.get("envelope_error"):
        head += f"; error: {clip(str(fields['envelope_error']), 160)}"
    if found:
        head += "; matching records: " + ", ".join(m["json_pointer"] for m in found)
    return clip(head, 600)


def extract_json(source: Source, parsed: Parsed | None = None) -> Extraction | None:
    """Extract a JSON artifact (see the module docstring); ``None`` when the bytes are not JSON."""
    parsed = parsed or parse_json(source.data)
    if parsed is None:
        return None
    fields = _shape(parsed.value)
    if parsed.envelope:
        fields["envelope"] = parsed.envelope
        fields["envelope_error"] = parsed.envelope_error
    fields["truncated"] = parsed.truncated
    found = matches(parsed, source)
    locators = [source.whole(), *match_locators(parsed, source, found)]
    fields["matches"] = [{k: v for k, v in m.items() if k != "_path"} for m in found]
    return Extraction(
        kind="json",
        summary=_summary(fields, found, source.artifact.name or "tool"),
        fields=fields,
        confidence=confidence(parsed),
        freshness=Freshness.BOUNDED,
        locators=tuple(locators),
    )
