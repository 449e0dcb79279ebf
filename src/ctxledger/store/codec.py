"""Record <-> row codec shared by every backend.

A record is stored as the envelope columns of the ``records`` table plus ``body``, the canonical JSON
(``ctxledger.hashing.canonical_json``) of its remaining dataclass fields. The codec is generic: it walks
``dataclasses.fields`` of each class in :data:`ctxledger.records.RECORD_TYPES` once, at import, and
derives one encoder per field from its type hint:

* datetimes -> ISO-8601 UTC strings with microseconds (naive datetimes are refused);
* enums -> their values (restored to members);
* tuples -> JSON arrays (restored as tuples; Mapping elements as dicts);
* Mappings -> JSON objects (restored as dicts).

Decoding is ``msgspec``: the body is parsed, the envelope columns are added, and ``msgspec.convert``
builds the frozen dataclass in C, checking every field against its type hint. That keeps reads fast
(``tests/store/bench_store_read.py`` measures them on real records). The same check
runs on encode, so a record that could not be read back is refused on append with an
:class:`~ctxledger.errors.InputError` naming the field, instead of failing later on read.

The round trip is exact (``decode(encode(r)) == r``) as long as values *inside* Mappings are plain JSON
values (str, int, float, bool, None, lists, dicts): a tuple nested inside a Mapping comes back as a list.
A field missing from a stored body takes its class default, so adding a field with a default is a
compatible change; a field the running version does not know (written by a newer one) is ignored on
read, and never lost, because rows are never rewritten. A value of the wrong type is a
:class:`~ctxledger.errors.StoreError`.

Assembly manifests are stored as canonical JSON too (:func:`assembly_row`, :func:`assembly_from_row`).
"""

from __future__ import annotations

import dataclasses
import json
import re
import types
import typing
from collections.abc import Callable, Mapping, Sequence
from datetime import UTC, datetime
from enum import Enum
from typing import Any

import msgspec

from ctxledger.errors import InputError, StoreError
from ctxledger.hashing import canonical_json
from ctxledger.manifest_codec import decode as decode_manifest
from ctxledger.manifest_codec import encode as encode_manifest
from ctxledger.records import RECORD_TYPES, Record, Trust, Visibility

SOURCE = "<append>"
"""``InputError.source`` for records passed to ``GraphStore.append``."""

ENVELOPE_COLUMNS = (
    "id",
    "tenant_id",
    "conversation_id",
    "branch_id",
    "seq",
    "created_at",
    "owner_participant_id",
    "owner_model_run_id",
    "visibility",
    "privacy_class",
    "trust",
    "external_id",
)
"""Record fields stored as their own columns of ``records`` (everything else goes into ``body``)."""

READ_COLUMNS = ("kind", "body", *ENVELOPE_COLUMNS)
"""The column order :func:`decode_row` expects."""

Converter = Callable[[Any], Any]


def format_time(value: datetime) -> str:
    """Return an aware datetime as ``YYYY-MM-DDTHH:MM:SS.ffffff+00:00`` (UTC, sortable as text).

    Raises:
        ValueError: ``value`` is naive.
    """
    if value.tzinfo is None or value.utcoffset() is None:
        raise ValueError("naive datetime; an aware UTC datetime is required")
    return value.astimezone(UTC).isoformat(timespec="microseconds")


def parse_time(text: str) -> datetime:
    """Inverse of :func:`format_time` (returns an aware UTC datetime)."""
    return datetime.fromisoformat(text)


def _encode_enum(value: Any) -> Any:
    return value.value if isinstance(value, Enum) else value


def _encode_tuple(value: Any) -> Any:
    if isinstance(value, tuple | list):
        return [dict(v) if isinstance(v, Mapping) else v for v in value]
    return value


def _encode_mapping(value: Any) -> Any:
    return dict(value) if isinstance(value, Mapping) else value


def _encode_time(value: Any) -> Any:
    return format_time(value) if isinstance(value, datetime) else value


def _encoder(hint: Any) -> Converter | None:
    """The encoder for one field's type hint; ``None`` where the value is already a JSON value."""
    is_union = typing.get_origin(hint) in (typing.Union, types.UnionType)
    members = [m for m in (typing.get_args(hint) if is_union else (hint,)) if m is not type(None)]
    for member in members:
        origin = typing.get_origin(member) or member
        if member is datetime:
            return _encode_time
        if isinstance(member, type) and issubclass(member, Enum):
            return _encode_enum
        if origin is tuple:
            return _encode_tuple
        if isinstance(origin, type) and issubclass(origin, Mapping):
            return _encode_mapping
    return None


@dataclasses.dataclass(frozen=True, slots=True)
class _KindCodec:
    """Per-class body fields and their encoders, computed once."""

    cls: type[Record]
    encoders: tuple[tuple[str, Converter | None], ...]


def _kind_codec(cls: type[Record]) -> _KindCodec:
    hints = typing.get_type_hints(cls)
    names = [f.name for f in dataclasses.fields(cls) if f.name not in ENVELOPE_COLUMNS]
    return _KindCodec(cls=cls, encoders=tuple((name, _encoder(hints[name])) for name in names))


_CODECS: dict[str, _KindCodec] = {kind.value: _kind_codec(cls) for kind, cls in RECORD_TYPES.items()}
_JSON = msgspec.json.Decoder()
_AT_FIELD = re.compile(r"at `\$\.([A-Za-z_][A-Za-z_0-9]*)")
_BARE_SHA256 = re.compile(r"[0-9a-f]{64}")


def _codec_for(record: Record, index: int) -> _KindCodec:
    kind = getattr(type(record), "kind", None)
    codec = _CODECS.get(getattr(kind, "value", ""))
    if codec is None or codec.cls is not type(record):
        raise InputError(
            f"{type(record).__name__} is not a record type of ctxledger.records", source=SOURCE, index=index
        )
    return codec


def _field_error(record: Record, index: int, name: str, exc: Exception) -> InputError:
    return InputError(
        f"record {record.id!r}: value is not storable as JSON ({exc})", source=SOURCE, index=index, field=name
    )


def _body(record: Record, codec: _KindCodec, index: int) -> dict[str, Any]:
    body: dict[str, Any] = {}
    for name, encode in codec.encoders:
        value = getattr(record, name)
        try:
            body[name] = encode(value) if encode is not None else value
        except (TypeError, ValueError) as exc:
            raise _field_error(record, index, name, exc) from exc
    return body


def _body_text(record: Record, body: dict[str, Any], index: int) -> str:
    try:
        return canonical_json(body)
    except (TypeError, ValueError) as exc:
        for name, value in body.items():
            try:
                canonical_json(value)
            except (TypeError, ValueError) as field_exc:
                raise _field_error(record, index, name, field_exc) from exc
        raise


def _enum_value(enum_type: type[Enum], record: Record, index: int, name: str) -> str:
    try:
        return str(enum_type(getattr(record, name)).value)
    except ValueError as exc:
        allowed = ", ".join(str(m.value) for m in enum_type)
        raise InputError(
            f"record {record.id!r}: {getattr(record, name)!r} is not one of {allowed}",
            source=SOURCE,
            index=index,
            field=name,
        ) from exc


def _created_at(record: Record, index: int) -> str:
    try:
        return format_time(record.created_at)
    except (AttributeError, ValueError) as exc:
        raise InputError(
            f"record {record.id!r}: created_at must be an aware UTC datetime",
            source=SOURCE,
            index=index,
            field="created_at",
        ) from exc


def _blob_ref(record: Record, index: int) -> str | None:
    sha = getattr(record, "sha256", None)
    if sha and not (isinstance(sha, str) and _BARE_SHA256.fullmatch(sha)):
        raise InputError(
            f"record {record.id!r}: {sha!r} is not a bare sha256 (64 lowercase hex characters)",
            source=SOURCE,
            index=index,
            field="sha256",
        )
    return sha or None


def encode_record(record: Record, index: int = 0) -> dict[str, Any]:
    """Return the ``records`` row (column name -> value) of ``record``.

    Args:
        record: any record of ``ctxledger.records``.
        index: its position in the caller's input, used in error messages.

    Raises:
        InputError: not a record type, a naive ``created_at``, a field that JSON cannot hold, a
            value that does not fit its field's type, or a blob reference (``sha256``) that is not
            bare lowercase hex (names the record index and field).
    """
    codec = _codec_for(record, index)
    body = _body(record, codec, index)
    row = {
        "kind": type(record).kind.value,
        "body": _body_text(record, body, index),
        "id": record.id,
        "tenant_id": record.tenant_id,
        "conversation_id": record.conversation_id,
        "branch_id": record.branch_id,
        "seq": record.seq,
        "created_at": _created_at(record, index),
        "owner_participant_id": record.owner_participant_id,
        "owner_model_run_id": record.owner_model_run_id,
        "visibility": _enum_value(Visibility, record, index, "visibility"),
        "privacy_class": record.privacy_class,
        "trust": _enum_value(Trust, record, index, "trust"),
        "external_id": record.external_id,
        "blob_sha256": _blob_ref(record, index),
    }
    _check_decodable(record, codec, body, row, index)
    return row


def _check_decodable(record: Record, codec: _KindCodec, body: dict[str, Any], row: dict[str, Any], index: int) -> None:
    """Refuse on write what :func:`decode_row` would refuse on read (a value of the wrong type)."""
    try:
        msgspec.convert({**body, **{name: row[name] for name in ENVELOPE_COLUMNS}}, codec.cls)
    except msgspec.ValidationError as exc:
        match = _AT_FIELD.search(str(exc))
        raise InputError(
            f"record {record.id!r}: {exc}",
            source=SOURCE,
            index=index,
            field=match.group(1) if match else None,
        ) from exc


def decode_row(row: Sequence[Any]) -> Record:
    """Rebuild a record from a row whose values are in :data:`READ_COLUMNS` order.

    Raises:
        StoreError: the row's kind is unknown or its body does not fit the record class.
    """
    codec = _CODECS.get(row[0])
    if codec is None:
        raise StoreError(f"record {row[2]!r} has unknown kind {row[0]!r}")
    values = _JSON.decode(row[1])
    values.update(zip(ENVELOPE_COLUMNS, row[2:], strict=True))
    try:
        return msgspec.convert(values, codec.cls)
    except msgspec.ValidationError as exc:
        raise StoreError(f"record {row[2]!r} ({row[0]}) does not decode: {exc}") from exc


def decode_record(row: Mapping[str, Any]) -> Record:
    """Rebuild a record from a row mapping as returned by :func:`encode_record`."""
    return decode_row([row[name] for name in READ_COLUMNS])


_ASSEMBLY_REQUIRED = ("id", "tenant_id", "conversation_id")


def _manifest_time(manifest: Mapping[str, Any]) -> str:
    value = manifest.get("created_at")
    if value is None:
        return format_time(datetime.now(UTC))
    try:
        return format_time(value if isinstance(value, datetime) else parse_time(str(value)))
    except ValueError as exc:
        raise InputError(f"not an aware ISO-8601 time: {value!r}", source="<assembly>", field="created_at") from exc


def _optional_int(manifest: Mapping[str, Any], key: str) -> int | None:
    value = manifest.get(key)
    if value is None or (isinstance(value, int) and not isinstance(value, bool)):
        return value
    raise InputError(f"expected an integer, got {value!r}", source="<assembly>", field=key)


def assembly_row(manifest: Mapping[str, Any]) -> dict[str, Any]:
    """Return the ``assemblies`` row of a manifest (a JSON-able mapping).

    Columns taken from the manifest: ``id``, ``tenant_id``, ``conversation_id`` (required, strings),
    ``branch_id``, ``snapshot_seq``, ``created_at`` (aware datetime or ISO-8601 text; default now),
    ``payload_hash``. The whole manifest is kept as canonical JSON.

    Raises:
        InputError: a required key is missing or not a string, a typed key has the wrong type, or the
            manifest is not JSON-able (``source`` is ``"<assembly>"``).
    """
    for key in _ASSEMBLY_REQUIRED:
        if not isinstance(manifest.get(key), str) or not manifest[key]:
            raise InputError("required non-empty string", source="<assembly>", field=key)
    try:
        text = canonical_json({k: _encode_time(v) for k, v in encode_manifest(manifest).items()})
    except (TypeError, ValueError) as exc:
        raise InputError(f"manifest is not JSON-able: {exc}", source="<assembly>") from exc
    return {
        "id": manifest["id"],
        "tenant_id": manifest["tenant_id"],
        "conversation_id": manifest["conversation_id"],
        "branch_id": manifest.get("branch_id"),
        "snapshot_seq": _optional_int(manifest, "snapshot_seq"),
        "created_at": _manifest_time(manifest),
        "payload_hash": manifest.get("payload_hash"),
        "manifest": text,
        "usage_input_tokens": None,
        "usage_output_tokens": None,
        "observed_at": None,
    }


def assembly_from_row(row: Mapping[str, Any]) -> dict[str, Any]:
    """Return the stored manifest; once usage is recorded it carries ``observed_usage``.

    ``observed_usage`` is ``{"input_tokens": int, "output_tokens": int, "observed_at": ISO-8601 str}``.
    """
    manifest = decode_manifest(json.loads(row["manifest"]))
    if row["usage_input_tokens"] is not None:
        manifest["observed_usage"] = {
            "input_tokens": row["usage_input_tokens"],
            "output_tokens": row["usage_output_tokens"],
            "observed_at": row["observed_at"],
        }
    return manifest
