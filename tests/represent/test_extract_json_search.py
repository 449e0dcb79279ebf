"""JSON and search-result extractors on real tau-bench and ToolBench tool results."""

from __future__ import annotations

import json
from datetime import timedelta
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st
from represent_helpers import OBSERVED, artifact_for, shared_dir, tau_tool_outputs, toolbench_outputs

from ctxledger.records import Freshness, ToolMemory
from ctxledger.represent import extract, rehydrate
from ctxledger.represent.extract._truncated import close_truncated
from ctxledger.testing import MemoryBlobStore


def _extract(content: str, name: str, query: str = "", blobs: MemoryBlobStore | None = None) -> ToolMemory:
    data = content.encode("utf-8")
    if blobs is not None:
        blobs.put(data)
    memory = extract(artifact_for(data, name=name), data, query=query, memory_id="mem", observed_at=OBSERVED)
    assert memory is not None
    return memory


def _toolbench(name: str, *, contains: str = "") -> tuple[str, str]:
    """(query, response) of the first ToolBench result of tool ``name`` containing ``contains``."""
    return next((q, c) for q, n, c in toolbench_outputs(shared_dir() / "data") if n == name and contains in c)


def test_reservation_keys_counts_and_the_record_asked_about(data_dir: Path, blobs: MemoryBlobStore):
    """A real reservation: keys, list sizes, top-level facts, and the flight asked about located exactly."""
    content = tau_tool_outputs(data_dir, "get_reservation_details")[0]
    value = json.loads(content)
    flight = value["flights"][1]["flight_number"]
    memory = _extract(content, "get_reservation_details", f"what about flight {flight}?", blobs)
    fields = memory.fields
    assert fields["extractor"] == "json" and fields["type"] == "object"
    assert fields["keys"] == list(value)
    assert fields["counts"]["flights"] == len(value["flights"])
    assert fields["scalars"]["reservation_id"] == value["reservation_id"]
    assert fields["matches"][0]["json_pointer"] == "/flights/1"
    assert memory.confidence == 1.0 and memory.freshness == Freshness.BOUNDED
    located = memory.locators[1]
    assert located["json_pointer"] == "/flights/1"
    assert json.loads(rehydrate(blobs, located)) == value["flights"][1]


def test_nested_records_by_pointer(data_dir: Path, blobs: MemoryBlobStore):
    """Records inside an object of objects (payment methods) are found and located by pointer."""
    content = tau_tool_outputs(data_dir, "get_user_details")[0]
    value = json.loads(content)
    memory = _extract(content, "get_user_details", "pay with a certificate", blobs)
    certificates = {k for k, v in value["payment_methods"].items() if v["source"] == "certificate"}
    matched = {m["json_pointer"].rsplit("/", 1)[1] for m in memory.fields["matches"]}
    assert certificates and certificates <= matched
    for locator in memory.locators[1:]:
        key = locator["json_pointer"].rsplit("/", 1)[1]
        if key in value["payment_methods"]:
            assert json.loads(rehydrate(blobs, locator)) == value["payment_methods"][key]


def test_toolbench_envelope_is_unwrapped():
    """A ToolBench ``{"error", "response"}`` envelope holding a Python-literal dict is unwrapped."""
    _, content = _toolbench("transitaire_for_transitaires", contains="codePostal")
    memory = _extract(content, "transitaire_for_transitaires")
    assert memory.fields["envelope"] == "toolbench" and memory.confidence == 0.9
    assert memory.fields["scalars"]["codePostal"] == "98800"
    assert memory.fields["scalars"]["email"] == "sales@act.nc"


def test_toolbench_envelope_error_is_reported():
    """The envelope's error (a real RapidAPI timeout) is kept in the fields and the summary."""
    _, content = _toolbench("retorna_dados_do_endere_o_atrav_s_do_cep_for_cep_brazil")
    memory = _extract(content, "cep_brazil")
    assert memory.fields["envelope_error"].startswith("Timeout error")
    assert "error: Timeout error" in memory.summary


def test_toolbench_truncated_list_keeps_its_complete_records():
    """A response ToolBench cut at ~1,000 characters keeps the records before the cut, flagged truncated."""
    query, content = _toolbench("transitaires_for_transitaires")
    assert content.endswith("...")
    memory = _extract(content, "transitaires_for_transitaires", query)
    assert memory.fields["truncated"] is True and memory.confidence == 0.7
    assert memory.fields["type"] == "array" and memory.fields["length"] >= 5
    assert {"id", "name", "phone"} <= set(memory.fields["item_keys"])
    assert "cut short" in memory.summary


def test_direct_flight_search_results(data_dir: Path, blobs: MemoryBlobStore):
    """A real flight search: ranks, flight-number ids, the queried flight, exact locators, volatile freshness."""
    content = tau_tool_outputs(data_dir, "search_direct_flight")[0]
    flights = json.loads(content)
    memory = _extract(content, "search_direct_flight", f"book {flights[1]['flight_number']}", blobs)
    fields = memory.fields
    assert fields["extractor"] == "search"
    assert [(r["rank"], r["id"]) for r in fields["results"]] == [
        (i + 1, f["flight_number"]) for i, f in enumerate(flights)
    ]
    assert fields["query_matches"] == [2]
    assert fields["observed_at"] == OBSERVED.isoformat()
    assert memory.freshness == Freshness.VOLATILE
    assert memory.stale_after == OBSERVED + timedelta(minutes=15)
    assert memory.revalidation_tool == "search_direct_flight"
    second = next(loc for loc in memory.locators if loc.get("json_pointer") == "/1")
    assert json.loads(rehydrate(blobs, second)) == flights[1]


def test_onestop_itineraries_join_their_legs(data_dir: Path):
    """One-stop results are lists of legs; their id joins the legs' flight numbers."""
    content = max(tau_tool_outputs(data_dir, "search_onestop_flight"), key=len)
    itineraries = json.loads(content)
    memory = _extract(content, "search_onestop_flight")
    first = memory.fields["results"][0]
    assert first["id"] == "+".join(leg["flight_number"] for leg in itineraries[0])
    assert memory.fields["result_count"] == len(itineraries)


def test_empty_search_is_a_search_with_no_results(data_dir: Path):
    """A search that found nothing is recorded as zero results, not as an empty JSON array."""
    memory = _extract(
        next(c for c in tau_tool_outputs(data_dir, "search_direct_flight") if c == "[]"),
        "search_direct_flight",
    )
    assert memory.fields["extractor"] == "search" and memory.fields["result_count"] == 0
    assert memory.summary == "search_direct_flight returned 0 results"


def test_toolbench_product_search_cut_short():
    """A real product search cut by ToolBench still yields ranked ASINs and titles, flagged truncated."""
    query, content = _toolbench("products_for_seo_api")
    memory = _extract(content, "products_for_seo_api", query)
    results = memory.fields["results"]
    assert memory.fields["results_key"] == "products" and memory.fields["truncated"] is True
    assert results[0]["id"] == "B0BW8Z3N7R" and results[0]["title"].startswith("LEOMAKRON for iPhone 14")
    assert results[0]["url"].startswith("https://www.amazon.com/")


_RECORDS = st.lists(
    st.dictionaries(st.text(max_size=6), st.one_of(st.integers(), st.text(max_size=12), st.none()), max_size=4),
    min_size=1,
    max_size=8,
)


@settings(max_examples=100, deadline=None)
@given(items=_RECORDS, data=st.data())
def test_property_cut_json_keeps_a_prefix_of_its_records(items: list[dict], data: st.DataObject):
    """Cut anywhere, recovered JSON parses and holds only complete leading records (the last may be partial)."""
    text = json.dumps(items, ensure_ascii=False)
    cut = data.draw(st.integers(min_value=0, max_value=len(text)))
    closed = close_truncated(text[:cut])
    if closed is None:
        return
    value = json.loads(closed)
    assert value[:-1] == items[: len(value) - 1]
    last = list(value[-1].items()) if value else []
    assert last == list(items[len(value) - 1].items())[: len(last)]
