"""The record <-> row codec: exact round trips, a fixed time format, and refusals that name the field."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta, timezone

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ctxledger.errors import InputError, StoreError
from ctxledger.hashing import EncodedList, canonical_json
from ctxledger.records import RECORD_TYPES, Message, Role, ToolArtifact, ToolMemory
from ctxledger.store.codec import (
    ENVELOPE_COLUMNS,
    assembly_from_row,
    assembly_row,
    decode_record,
    encode_record,
    format_time,
)
from ctxledger.testing import every_record_type

ENV = {"tenant_id": "t", "conversation_id": "c", "branch_id": "c/main"}

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False) | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=12,
)


def test_times_are_fixed_width_utc_with_microseconds() -> None:
    """Aware times of any zone are stored as UTC text that sorts chronologically; naive ones are refused."""
    paris = timezone(timedelta(hours=2))
    assert format_time(datetime(2024, 5, 1, 14, 0, tzinfo=paris)) == "2024-05-01T12:00:00.000000+00:00"
    times = [datetime(2024, 5, 1, 12, 0, s, 999_999 if s % 2 else 0, tzinfo=UTC) for s in range(0, 59, 7)]
    assert sorted(format_time(t) for t in times) == [format_time(t) for t in sorted(times)]
    with pytest.raises(ValueError, match="naive"):
        format_time(datetime(2024, 5, 1, 12, 0))


def test_body_is_canonical_json_of_the_non_envelope_fields() -> None:
    """``body`` holds every field that is not a column, as canonical JSON; columns hold the envelope."""
    for record in every_record_type("t", "c"):
        row = encode_record(record)
        body = json.loads(row["body"])
        assert row["body"] == canonical_json(body)
        assert not set(body) & set(ENVELOPE_COLUMNS)
        assert row["kind"] == type(record).kind.value and row["visibility"] == "shared"
        assert decode_record(row) == record


def test_only_artifacts_fill_the_blob_reference_column() -> None:
    """``blob_sha256`` is the artifact's sha256 and empty for every other kind."""
    filled = {row["kind"] for row in map(encode_record, every_record_type("t", "c")) if row["blob_sha256"]}
    assert filled == {"tool_artifact"}


def test_bodies_of_older_and_newer_versions_still_decode() -> None:
    """A body missing a (later added) field takes its default; a field from a newer version is ignored."""
    memory = ToolMemory(id="m", summary="s", confidence=0.5, **ENV)
    row = encode_record(memory)
    body = json.loads(row["body"])
    del body["conflicts_with"], body["revalidation_tool"]
    assert decode_record({**row, "body": canonical_json(body)}) == memory
    newer = {**json.loads(row["body"]), "embedding_ref": "vec:1"}
    assert decode_record({**row, "body": canonical_json(newer)}) == memory


def test_rows_that_do_not_fit_their_class_are_store_errors() -> None:
    """An unknown kind or a wrongly typed value in a stored row raises ``StoreError``."""
    row = encode_record(Message(id="m", content="hi", **ENV))
    body = json.loads(row["body"])
    for bad in (
        {**row, "kind": "telepathy"},
        {**row, "body": canonical_json({**body, "content": 42})},
        {**row, "body": canonical_json({**body, "role": "oracle"})},
        {**row, "trust": "very"},
    ):
        with pytest.raises(StoreError, match="'m'"):
            decode_record(bad)


def test_unstorable_values_are_refused_naming_index_and_field() -> None:
    """Encoding refuses non-JSON values, wrong types and unknown enum values, naming the field."""
    cases = [
        (Message(id="m", meta={"when": datetime.now(UTC)}, **ENV), "meta"),
        (Message(id="m", content=("not a mapping",), **ENV), "content"),  # type: ignore[arg-type]
        (Message(id="m", role="oracle", **ENV), "role"),  # type: ignore[arg-type]
        (Message(id="m", visibility="everyone", **ENV), "visibility"),  # type: ignore[arg-type]
        (ToolMemory(id="m", confidence="high", **ENV), "confidence"),  # type: ignore[arg-type]
        (ToolMemory(id="m", stale_after=datetime(2030, 1, 1), **ENV), "stale_after"),
        (ToolArtifact(id="a", sha256="sha256:" + "ab" * 32, **ENV), "sha256"),
    ]
    for record, field in cases:
        with pytest.raises(InputError) as caught:
            encode_record(record, index=7)
        assert (caught.value.index, caught.value.field) == (7, field), caught.value


@settings(max_examples=80, deadline=None)
@given(
    content=st.one_of(
        st.none(), st.text(), st.lists(st.fixed_dictionaries({"type": st.just("text"), "text": st.text()}))
    ),
    meta=st.dictionaries(st.text(max_size=10), json_values, max_size=5),
    name=st.none() | st.text(max_size=20),
    created=st.datetimes(timezones=st.just(UTC), min_value=datetime(1970, 1, 2), max_value=datetime(9999, 1, 1)),
)
def test_messages_round_trip_exactly(
    content: str | list[dict[str, str]] | None, meta: dict[str, object], name: str | None, created: datetime
) -> None:
    """Any text, content parts, JSON metadata and time survive encode -> decode unchanged."""
    parts = tuple(content) if isinstance(content, list) else content
    record = Message(id="m", role=Role.ASSISTANT, content=parts, name=name, meta=meta, created_at=created, **ENV)
    assert decode_record(encode_record(record)) == record


def test_every_record_type_is_covered_by_the_codec() -> None:
    """Each kind in ``RECORD_TYPES`` encodes and decodes (a new kind cannot be forgotten)."""
    kinds = {encode_record(r)["kind"] for r in every_record_type("t", "c")}
    assert kinds == {k.value for k in RECORD_TYPES}


def test_manifests_keep_their_content_and_gain_observed_usage() -> None:
    """An assembly row keeps the manifest verbatim and adds ``observed_usage`` once usage is recorded."""
    manifest = {"id": "a", "tenant_id": "t", "conversation_id": "c", "snapshot_seq": 12, "note": "ünï"}
    row = assembly_row(manifest)
    assert row["snapshot_seq"] == 12 and assembly_from_row(row) == manifest
    used = {
        **row,
        "usage_input_tokens": 900,
        "usage_output_tokens": 30,
        "observed_at": "2024-05-01T00:00:00+00:00",
    }
    assert assembly_from_row(used)["observed_usage"]["input_tokens"] == 900
    for bad, field in (({**manifest, "snapshot_seq": "12"}, "snapshot_seq"), ({**manifest, "id": 3}, "id")):
        with pytest.raises(InputError) as caught:
            assembly_row(bad)
        assert caught.value.field == field


@settings(max_examples=60, deadline=None)
@given(
    entries=st.lists(st.dictionaries(st.text(max_size=6), json_values, max_size=4), max_size=6),
    others=st.dictionaries(st.text(max_size=6), json_values, max_size=4),
)
def test_encoded_lists_give_the_same_canonical_text(entries, others) -> None:
    """A mapping holding an EncodedList encodes to exactly the text of plain lists, and a changed list is re-encoded."""
    texts = [canonical_json(e) for e in entries]
    value = {**others, "omitted": EncodedList(entries, texts)}
    plain = json.dumps({**others, "omitted": entries}, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    assert canonical_json(value) == plain
    stale = EncodedList(entries, ["{}"] * len(entries))
    stale.append({"late": 1})
    assert canonical_json({"omitted": stale}) == canonical_json({"omitted": [*entries, {"late": 1}]})
    if entries:
        swapped = EncodedList(entries, ["{}"] * len(entries))
        swapped[0] = dict(entries[0])
        assert canonical_json({"omitted": swapped}) == canonical_json({"omitted": entries})


def test_encoded_list_needs_one_text_per_item() -> None:
    """Texts and items must line up."""
    with pytest.raises(ValueError, match="2 items but 1 texts"):
        EncodedList([{}, {}], ["{}"])
