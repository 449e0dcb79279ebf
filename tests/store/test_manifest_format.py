"""The stored form of a manifest: columnar, exact, and readable beside manifests stored entry by entry.

The store writes each manifest's long lists column by column (:mod:`ctxledger.manifest_codec`). Reading it
back must give exactly the record the assembly built: the same included items, decisions, marks and turn
refs, the same ``explain`` answers; a manifest stored entry by entry (format 1, as older stores hold them)
must read as before.
"""

from __future__ import annotations

import json
import re
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sqlalchemy import text as sql
from typer.testing import CliRunner

from ctxledger import manifest_codec
from ctxledger.cli import app
from ctxledger.errors import StoreError
from ctxledger.hashing import canonical_json
from ctxledger.ledger import Ledger
from ctxledger.manifest import explain
from ctxledger.scenarios._graph import GraphBuilder
from ctxledger.store.codec import assembly_from_row, assembly_row
from ctxledger.testing import MemoryStore


def _json(value: Any) -> Any:
    """``value`` as the store's JSON reads it back."""
    return json.loads(canonical_json(value))


def _stored(manifest: dict[str, Any]) -> dict[str, Any]:
    """What a store reads back after writing ``manifest`` (the row's text, parsed and decoded)."""
    row = assembly_row(manifest)
    return assembly_from_row(row | {"usage_input_tokens": None})


# -- the codec on any rows ------------------------------------------------------------------------------

_ids = st.builds(
    lambda prefix, n, zeros: f"{prefix}{'0' * zeros}{n}",
    st.sampled_from(["c/", "conv-7/", "x", "", "a1b", "٣", "c/main#"]),
    st.integers(0, 10**6),
    st.integers(0, 2),
)
_scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(2**70), 2**70),
    st.integers(-3, 3),
    st.floats(allow_nan=False, allow_infinity=False),
    st.sampled_from([0.0, -0.0, 1.0, 0.5]),
    st.text(max_size=6),
    st.sampled_from(["selection", "fixed", "verbatim", "٣", "12", "012", "0", "1.0", "true"]),
    _ids,
)
_values = st.recursive(
    _scalars,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.sampled_from(["a", "b", "ref"]), inner, max_size=3),
    max_leaves=6,
)
_keys = st.sampled_from(["ref", "unit", "seq", "stage", "tokens", "utility", "locators", "promotion", "note", "kind"])
_locator = st.fixed_dictionaries(
    {"artifact_id": _ids, "byte_start": st.integers(0, 99), "sha256": st.sampled_from(["ab12", "cd34"])},
    optional={"fetch": st.text(max_size=4), "ref": _ids, "nested": st.lists(st.fixed_dictionaries({"a": _ids}))},
)
_row_values = {
    "ref": _ids,
    "unit": _ids,
    "seq": st.integers(0, 5000),
    "stage": st.sampled_from(["fixed", "selection", "protection"]),
    "tokens": st.integers(0, 300),
    "locators": st.lists(_locator, max_size=3),
    "promotion": st.one_of(_locator, st.fixed_dictionaries({}), st.none()),
}


@st.composite
def _rows(draw: Any) -> list[dict[str, Any]]:
    """Rows that share most keys and values (as manifest entries do), with every kind of exception."""
    keys = draw(st.lists(_keys, min_size=0, max_size=6, unique=True))
    n = draw(st.integers(1, 40))
    columns: dict[str, list[Any]] = {}
    for k in keys:
        style = draw(st.sampled_from(["typed", "typed", "typed", "any", "constant", "few"]))
        strategy = _row_values.get(k, _values) if style != "any" else _values
        if style == "constant":
            columns[k] = [draw(strategy)] * n
        elif style == "few":
            choices = draw(st.lists(strategy, min_size=1, max_size=4))
            columns[k] = [choices[draw(st.integers(0, len(choices) - 1))] for _ in range(n)]
        else:
            columns[k] = [draw(strategy) for _ in range(n)]
    if "ref" in columns and draw(st.booleans()):  # units and seqs that follow the ref, as in manifests
        for i, ref in enumerate(columns["ref"]):
            if "unit" in columns and draw(st.integers(0, 4)):
                columns["unit"][i] = ref
            if "seq" in columns and isinstance(ref, str):
                columns["seq"][i] = int(re.search(r"[0-9]*$", ref).group() or 0) + 5  # type: ignore[union-attr]
    rows = [{k: columns[k][i] for k in keys} for i in range(n)]
    if draw(st.integers(0, 3)) == 0:  # a key some rows lack
        for row in rows:
            for k in keys:
                if draw(st.integers(0, 9)) == 0:
                    del row[k]
    return rows


@settings(max_examples=200, deadline=None)
@given(rows=_rows())
def test_a_table_reads_back_exactly_the_rows_it_was_made_of(rows: list[dict[str, Any]]) -> None:
    table = _json(manifest_codec.encode_table(rows))
    back = manifest_codec.decode_table(table)
    assert canonical_json(back) == canonical_json(rows)
    if len({tuple(r) for r in rows}) == 1:  # rows built alike keep their key order
        assert [list(r) for r in back] == [list(r) for r in rows]


@settings(max_examples=100, deadline=None)
@given(rows=_rows(), data=st.data())
def test_a_table_lists_its_keys_in_order_of_first_use(rows: list[dict[str, Any]], data: st.DataObject) -> None:
    shuffled = [dict(data.draw(st.permutations(list(r.items())))) for r in rows]  # rows built in other key orders
    table = manifest_codec.encode_table(shuffled)
    assert table["keys"] == list(dict.fromkeys(k for r in shuffled for k in r))
    assert canonical_json(manifest_codec.decode_table(_json(table))) == canonical_json(shuffled)


@settings(max_examples=60, deadline=None)
@given(rows=_rows(), refs=st.lists(_ids, max_size=40), other=st.lists(_values, max_size=3))
def test_a_manifest_reads_back_as_it_was_written(rows: list[dict[str, Any]], refs: list[str], other: Any) -> None:
    manifest = {
        "id": "asm-1",
        "tenant_id": "t",
        "conversation_id": "c",
        "included": rows,
        "decisions": rows[:3],
        "turn_refs": refs,
        "candidates": [*refs, 7] if other else refs,
        "warnings": other,
        "omitted": [],
    }
    stored = manifest_codec.encode(manifest)
    assert manifest_codec.is_stored_form(stored)
    assert manifest_codec.encode(stored) == stored  # already stored: left as it is
    assert canonical_json(manifest_codec.decode(_json(stored))) == canonical_json(manifest)


@settings(max_examples=100, deadline=None)
@given(rows=_rows(), before=st.lists(_rows(), max_size=3))
def test_a_table_is_written_alike_whatever_was_written_before(
    rows: list[dict[str, Any]], before: list[list[dict[str, Any]]]
) -> None:
    """The codec keeps what it learnt about ids between manifests; the form of a table never depends on it."""
    manifest_codec._SPLITS.clear()
    cold = manifest_codec.encode_table(rows)
    for other in before:
        manifest_codec.encode_table(other)
    assert manifest_codec.encode_table(rows) == cold
    manifest_codec._SPLITS.clear()
    assert manifest_codec.encode_table(rows) == cold


@settings(max_examples=100, deadline=None)
@given(rows=_rows(), key=st.sampled_from(["locators", "sources", "stage"]))
def test_a_column_of_empty_lists_is_one_constant(rows: list[dict[str, Any]], key: str) -> None:
    """Every row holding ``[]`` under a key (no locators, no sources) writes it once, as a constant."""
    rows = [{**r, key: []} for r in rows]
    table = manifest_codec.encode_table(rows)
    assert table["const"][key] == []
    assert all(key not in table.get(form, {}) for form in ("lists", "dicts", "sparse", "values", "ints", "ids"))
    assert key not in table.get("profile", {}).get("keys", [])
    back = manifest_codec.decode_table(_json(table))
    assert canonical_json(back) == canonical_json(rows)
    back[0][key].append(1)  # each row reads back its own list
    assert all(r[key] == [] for r in back[1:])


def test_rows_a_reader_edits_do_not_change_each_other() -> None:
    rows = [{"ref": f"c/{i}", "locators": [], "sources": ["c/a"], "stage": "selection"} for i in range(10)]
    back = manifest_codec.decode_table(_json(manifest_codec.encode_table(rows)))
    back[0]["locators"].append({"x": 1})
    back[0]["sources"].append("c/b")
    assert all(r["locators"] == [] and r["sources"] == ["c/a"] for r in back[1:])


def test_a_format_this_version_does_not_know_is_refused_by_name() -> None:
    stored = manifest_codec.encode({"id": "asm-9", "tenant_id": "t", "conversation_id": "c", "included": [{}]})
    stored[manifest_codec.FORMAT_KEY] = 99
    with pytest.raises(StoreError, match="format 99"):
        manifest_codec.decode(stored)


# -- assemblies of generated graphs ---------------------------------------------------------------------

WORDS = ["refund", "seat", "timeout", "error", "booking", "ünïcode", "42", "the", "line"]


@st.composite
def _graphs(draw: Any) -> tuple[Ledger, GraphBuilder]:
    """A conversation of turns, tool exchanges (some large, shown as excerpts), memories and a fork."""
    ledger = Ledger(MemoryStore())
    b = GraphBuilder(ledger, "g")
    b.system("sys", "You help with bookings.")
    artifacts: list[str] = []
    said = "sys"
    steps = draw(st.integers(2, 24))
    fork_at = draw(st.integers(1, steps))
    for i in range(steps):
        words = " ".join(draw(st.lists(st.sampled_from(WORDS), min_size=1, max_size=12)))
        kind = draw(st.sampled_from(["user", "assistant", "tool", "big", "memory"]))
        if kind == "user":
            said = f"u{i}"
            b.user(said, f"Question {i}: {words}?")
        elif kind == "assistant":
            said = f"a{i}"
            b.assistant(said, f"Answer {i}: {words}.")
        elif kind in ("tool", "big"):
            lines = 400 if kind == "big" else 2
            out = "\n".join(f"line {j}: {words} {j}" for j in range(lines))
            b.tool(f"t{i}", "search", {"q": words}, out, media_type="text/plain")
            artifacts.append(f"art-t{i}")
        elif artifacts:
            b.memory(f"m{i}", f"Fact {i}: {words}.", sources=[artifacts[-1]])
        if i == fork_at and draw(st.booleans()):
            b.branch("alt", fork_after=said)  # the records written on main after this are off the lineage
    b.user("last", "What is the refund status?")
    return ledger, b


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(graph=_graphs(), window=st.integers(600, 6000), trace=st.sampled_from(["summary", "full"]))
def test_a_stored_assembly_reads_back_as_the_assembly_built_it(graph: Any, window: int, trace: str) -> None:
    ledger, b = graph
    try:
        asm = ledger.assemble(
            b.conversation_id,
            window_tokens=window,
            output_tokens=200,
            margin_tokens=50,
            now=b.now,
            trace=trace,
            branch_id=b.branch_id,
        )
    except Exception as exc:  # a budget the required blocks do not fit: nothing was stored
        assert type(exc).__name__ == "RequiredBlocksDoNotFit"
        return
    stored = ledger.get_assembly(asm.id)
    memory = _json(asm.persisted())
    assert stored == memory
    compared = ["included", "turn_refs", "notable_omissions", "warnings"]  # a summary keeps some decisions only
    for key in compared + (["decisions", "marks", "omitted", "candidates"] if trace == "full" else []):
        assert stored[key] == _json(asm.manifest[key]), key
    refs = [e["ref"] for e in asm.manifest["included"]]
    if trace == "full":
        refs += list(asm.manifest["candidates"])
    for ref in refs:
        assert ledger.explain(asm.id, ref) == _json(explain(asm.manifest, ref)), ref


# -- stores written before the columnar form ------------------------------------------------------------


def _history(ledger: Ledger) -> tuple[GraphBuilder, Any]:
    """Sixty questions, tool calls and answers; a budget that leaves most of them out."""
    b = GraphBuilder(ledger, "old")
    b.system("sys", "You answer questions about releases.")
    for i in range(60):
        b.user(f"q{i}", f"Question {i}: what changed in release {i}?")
        b.tool(f"t{i}", "changelog", {"release": i}, "\n".join(f"change {i}.{j}" for j in range(30)))
        b.assistant(f"a{i}", f"Release {i} changed the retry policy of worker {i}.")
    asm = ledger.assemble(b.conversation_id, window_tokens=8_000, output_tokens=500, margin_tokens=100, now=b.now)
    return b, asm


def test_a_store_written_entry_by_entry_still_reads_shows_and_explains(tmp_path: Any) -> None:
    url = f"sqlite:///{tmp_path}/old.db"
    ledger = Ledger.open(url)  # the blobs where the CLI looks for them
    store = ledger.store
    b, asm = _history(ledger)
    included = [e["ref"] for e in asm.manifest["included"]][:12]
    left_out = [e["ref"] for e in asm.manifest["omitted"]][:3]
    assert left_out, "the history must leave something out"

    def read() -> tuple[Any, ...]:
        manifest = ledger.get_assembly(asm.id)
        answers = [ledger.explain(asm.id, ref) for ref in included + left_out]  # the omitted ones by replay
        cli = [CliRunner().invoke(app, ["--db", url, "explain", asm.id, *ref]) for ref in ([], [included[-1]])]
        assert all(r.exit_code == 0 for r in cli), [r.output for r in cli]
        return manifest, answers, [r.stdout for r in cli], store.list_assemblies("default", b.conversation_id)

    columnar = read()
    format1 = canonical_json(_json(asm.persisted()))  # what stores wrote before the columnar form
    with store.engine.begin() as conn:  # type: ignore[attr-defined]
        before = conn.execute(sql("SELECT manifest FROM assemblies WHERE id = :i"), {"i": asm.id}).scalar_one()
        conn.execute(sql("UPDATE assemblies SET manifest = :m WHERE id = :i"), {"m": format1, "i": asm.id})
    assert manifest_codec.FORMAT_KEY in json.loads(before) and manifest_codec.FORMAT_KEY not in format1
    assert read() == columnar
    assert columnar[1][-1]["status"] == "omitted"


def test_the_stored_form_is_a_fraction_of_the_entries_written_out() -> None:
    ledger = Ledger(MemoryStore())
    b = GraphBuilder(ledger, "long")
    b.system("sys", "You answer questions about the deployment.")
    for i in range(400):
        b.user(f"q{i}", f"Question {i}: what changed in release {i}?")
        b.assistant(f"a{i}", f"Release {i} changed the retry policy of worker {i}.")
    asm = ledger.assemble(b.conversation_id, window_tokens=128_000, output_tokens=4_096, margin_tokens=512, now=b.now)
    included = len(asm.manifest["included"])
    assert included > 500
    format1 = len(canonical_json(asm.persisted()).encode())
    stored = len(assembly_row(asm.persisted())["manifest"].encode())
    assert stored * 5 < format1
    assert stored < 8_000 + 40 * included  # a few tens of bytes per included item, all in
    assert _stored(asm.persisted()) == _json(asm.persisted())
