"""Search results: ids, titles, ranks and when they were observed.

A JSON output is a result list when it is a list under a results-like key (``results``, ``items``,
``hits``, ``products`` …), or a top-level list returned by a tool whose name says it searches
(``search_direct_flight``, ``find_…``, ``query_…``, ``lookup_…``). An item may itself be a list of
objects (a one-stop itinerary of two flights): its id joins the legs' ids with ``+``.

``fields`` of the memory::

    {"result_count": n, "results_key": "products" | "",
     "results": [{"rank": 1, "id": "HAT069", "title": "...", "url": "...", "json_pointer": "/0",
                  "query_hits": k}],       # the first 20
     "query_matches": [ranks with query hits],
     "observed_at": "2024-05-15T12:00:00+00:00"}

Search rankings are ``volatile``: the memory gets a short ``stale_after`` and names the
search tool as its revalidation tool.
"""

from __future__ import annotations

import re
from typing import Any

from ctxledger.records import Freshness
from ctxledger.represent.extract._base import Extraction, Source, clip, term_hits
from ctxledger.represent.extract.json_ import Parsed, byte_span, confidence, is_scalar, parse_json, pointer

MAX_RESULTS = 20
RESULT_KEYS = (
    "results",
    "items",
    "hits",
    "products",
    "organic_results",
    "documents",
    "entries",
    "data",
    "result",
)
"""Keys under which APIs commonly return their result list, tried in this order."""

SEARCH_TOOL_RE = re.compile(r"search|find|query|lookup|retriev|recommend", re.IGNORECASE)
_ID_KEYS = ("id", "uuid", "asin", "sku", "doi", "isbn", "code", "slug", "key")
_TITLE_KEYS = ("title", "name", "headline", "label", "subject", "question", "text")
_URL_KEYS = ("url", "link", "href", "uri")


def _is_item(value: Any) -> bool:
    return isinstance(value, dict) or (
        isinstance(value, list) and all(isinstance(v, dict) for v in value) and value != []
    )


def find_results(value: Any, tool_name: str) -> tuple[str, list[Any]] | None:
    """``(key, items)`` of a result list (maybe empty) in a JSON value, or ``None`` if not search output."""
    if isinstance(value, dict):
        for key in RESULT_KEYS:
            items = value.get(key)
            if isinstance(items, list) and all(_is_item(i) for i in items):
                return key, items
        return None
    if isinstance(value, list) and SEARCH_TOOL_RE.search(tool_name) and all(_is_item(i) for i in value):
        return "", value
    return None


def _id_of(item: dict[str, Any]) -> str | None:
    for key in _ID_KEYS:
        if is_scalar(item.get(key)) and item.get(key) not in (None, ""):
            return str(item[key])
    for key, value in item.items():
        if re.search(r"(?:_id|Id|_number|_code)$", str(key)) and is_scalar(value) and value not in (None, ""):
            return str(value)
    return None


def _title_of(item: dict[str, Any], skip: str | None) -> str:
    for key in _TITLE_KEYS:
        if isinstance(item.get(key), str) and item[key].strip():
            return clip(item[key].strip(), 160)
    facts = [f"{k}={v}" for k, v in item.items() if is_scalar(v) and str(v) != skip and len(str(v)) <= 40]
    return clip(", ".join(facts[:4]), 160)


def _describe(item: Any) -> dict[str, Any]:
    legs = item if isinstance(item, list) else [item]
    ids = [_id_of(leg) for leg in legs]
    titles = [_title_of(leg, ident) for leg, ident in zip(legs, ids, strict=True)]
    out: dict[str, Any] = {
        "id": "+".join(i for i in ids if i) or None,
        "title": " → ".join(t for t in titles if t),
    }
    url = next((str(leg[k]) for leg in legs for k in _URL_KEYS if isinstance(leg.get(k), str)), None)
    if url:
        out["url"] = url
    return out


def _text_of(item: Any) -> str:
    legs = item if isinstance(item, list) else [item]
    return " ".join(str(v) for leg in legs for v in leg.values() if is_scalar(v))


def _locator(source: Source, parsed: Parsed, path: tuple[str | int, ...]) -> dict[str, Any]:
    span = byte_span(source.data, path) if parsed.exact else None
    if span is None:
        return {**source.whole(), "json_pointer": pointer(path)}
    return source.locate(*span, json_pointer=pointer(path))


def extract_search(source: Source, parsed: Parsed | None = None) -> Extraction | None:
    """Extract ranked search results (see the module docstring); ``None`` when not search output."""
    parsed = parsed or parse_json(source.data)
    if parsed is None:
        return None
    found = find_results(parsed.value, source.artifact.name)
    if found is None:
        return None
    key, items = found
    base: tuple[str | int, ...] = (key,) if key else ()
    results = []
    for rank, item in enumerate(items[:MAX_RESULTS], start=1):
        path = (*base, rank - 1)
        hits = term_hits(_text_of(item), source.terms) if source.terms else 0
        results.append({"rank": rank, **_describe(item), "json_pointer": pointer(path), "query_hits": hits})
    matched = [r["rank"] for r in results if r["query_hits"]]
    shown = [r for r in results if r["rank"] <= 5 or r["query_hits"]]
    locators = [source.whole(), *(_locator(source, parsed, (*base, r["rank"] - 1)) for r in shown)]
    listing = "; ".join(f"{r['rank']}. {r['id'] or '?'} — {r['title']}" for r in results[:5])
    summary = f"{source.artifact.name or 'search'} returned {len(items)} results"
    summary += f" (output was cut short; first {len(items)} shown)" if parsed.truncated else ""
    summary += f": {listing}" if listing else ""
    if matched:
        summary += f"; results matching the query: ranks {', '.join(map(str, matched))}"
    fields: dict[str, Any] = {
        "result_count": len(items),
        "results_key": key,
        "results": results,
        "query_matches": matched,
        "observed_at": source.observed_at.isoformat(),
    }
    if parsed.envelope:
        fields["envelope"] = parsed.envelope
    fields["truncated"] = parsed.truncated
    return Extraction(
        kind="search",
        summary=clip(summary, 800),
        fields=fields,
        confidence=confidence(parsed),
        freshness=Freshness.VOLATILE,
        locators=tuple(locators),
    )
