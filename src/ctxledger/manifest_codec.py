"""The stored form of a manifest: the same record, its long lists written column by column.

A manifest's lists of entries (``included``, ``decisions``, ``marks``, ``notable_omissions``, ``warnings``,
and with a full trace ``omitted``) repeat the same keys and mostly the same values on every entry: the stage,
the reason, the representation, the kind, the branch and the owner take a handful of values, and the record ids
share the conversation's prefix. Written entry by entry, an included item costs some 400 bytes of JSON; the
stored form writes each list as a table of columns and costs a few tens. :func:`encode` and :func:`decode`
are exact inverses: ``decode(encode(m)) == m`` for every JSON-able manifest ``m`` (nothing is rounded or
dropped), so every reader sees the record described in :mod:`ctxledger.manifest`.

The stored form is the record with ``manifest_format`` set to :data:`FORMAT` and the encoded lists moved
under ``columns`` (``{name: table}`` for the lists of entries, ``{name: ids}`` for ``turn_refs`` and
``candidates``); every other key is stored as it is. A stored manifest without ``manifest_format`` was
written entry by entry (format 1) and is read as it is.

A *table* is ``{"n": rows, "keys": [key, …], …}`` in which each key is written one way:

* ``const`` ``{key: value}``: a key every row holds with the same value;
* ``profile`` ``{"keys": [...], "values": [{key: value}, …], "index": "…"}``: the keys whose combinations
  of values are few (at most :data:`PROFILES`), each row naming its combination by one character of
  :data:`ALPHABET` in ``index`` (a key a row lacks is missing from its combination);
* ``ints`` ``{key: seq}``: integers, as an *int sequence* (below), ``rel`` listing the keys written relative
  to the anchor's number;
* ``ids`` ``{key: {"prefixes": [...], "prefix": seq, "number": seq}}``: strings that end in a decimal number,
  as the index of their prefix and the number (``prefix`` is left out when there is one prefix);
* ``sparse`` ``{key: {"default": value, "rows": [[row, value], …]}}``: the rows holding another value
  than ``default`` (no ``default``: the rows that hold the key at all);
* ``values`` ``{key: [value, …]}``: every row's value.

The anchor is the table's ``ref`` column when it is written as ids: an ``ints`` or ``ids`` column listed in
``rel`` holds each row's difference to the anchor's number (``seq`` is ``ref``'s number plus a constant, and
``unit`` mostly equals ``ref``). An *int sequence* is a list of integers, or ``{"delta": […]}`` (differences to
the previous value, the first to 0), or ``{"runs": [value, count, …]}`` / ``{"delta_runs": […]}`` (run-length
coded values or differences): whichever is shortest.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Mapping, Sequence
from itertools import chain, repeat
from typing import Any

import numpy as np

from ctxledger.errors import StoreError
from ctxledger.hashing import canonical_json

FORMAT = 2
"""The stored form this module writes (format 1: every entry written out, as :mod:`ctxledger.manifest` shows)."""

FORMAT_KEY = "manifest_format"
COLUMNS_KEY = "columns"

TABLES = ("included", "decisions", "marks", "notable_omissions", "warnings", "omitted")
"""Lists of entries written as tables (when every item is a mapping)."""

ID_LISTS = ("turn_refs", "candidates")
"""Lists of record ids written as ids (when every item is a string ending in a number)."""

ALPHABET = "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
PROFILES = len(ALPHABET)
ALPHABET_ARRAY = np.frombuffer(ALPHABET.encode("ascii"), np.uint8)
"""Combinations a profile holds at most (one character of :data:`ALPHABET` per row)."""

ANCHOR = "ref"

NO_NUMBER = -1
"""The number of an id that does not end in a digit (the prefix is the whole string)."""


class _Missing:
    """The value of a key a row does not hold."""


_MISSING = _Missing()
_DIGITS = "0123456789"
_STRINGS = {str}


def encode(manifest: Mapping[str, Any]) -> dict[str, Any]:
    """The stored form of ``manifest`` (a manifest already in the stored form is returned as it is)."""
    out = dict(manifest)
    if FORMAT_KEY in out:
        return out
    columns: dict[str, Any] = {}
    for name in TABLES:
        rows = out.get(name)
        if isinstance(rows, list) and rows and all(type(r) is dict for r in rows):
            columns[name] = encode_table(rows)
            del out[name]
    for name in ID_LISTS:
        ids = out.get(name)
        if isinstance(ids, list) and ids:
            found = _ids(ids)
            if found is not None:
                columns[name] = found[0]
                del out[name]
    out[FORMAT_KEY] = FORMAT
    out[COLUMNS_KEY] = columns
    return out


def decode(stored: Mapping[str, Any]) -> dict[str, Any]:
    """The manifest a stored form holds (format 1 is returned as it is).

    Raises:
        StoreError: a format this version does not know, or columns that do not decode.
    """
    out = dict(stored)
    version = out.pop(FORMAT_KEY, None)
    if version is None:
        return out
    if version != FORMAT:
        raise StoreError(f"manifest {out.get('id')!r} is stored in format {version!r}; this version reads {FORMAT}")
    try:
        for name, value in (out.pop(COLUMNS_KEY, None) or {}).items():
            out[name] = _decode_ids(value) if name in ID_LISTS else decode_table(value)
    except (KeyError, TypeError, ValueError, IndexError) as exc:
        raise StoreError(f"manifest {out.get('id')!r} does not decode: {exc!r}") from exc
    return out


def is_stored_form(manifest: Mapping[str, Any]) -> bool:
    """Whether ``manifest`` is in the stored (columnar) form."""
    return FORMAT_KEY in manifest


# -- tables ---------------------------------------------------------------------------------------


def encode_table(rows: Sequence[Mapping[str, Any]], parent: Sequence[int] | None = None) -> dict[str, Any]:
    """``rows`` (mappings with string keys) as a table (see the module docstring).

    ``parent``: for a nested table, the anchor number of the row each of ``rows`` belongs to (the table's
    own ``ref``, when it has one, is written relative to it).
    """
    n = len(rows)
    orders = list(map(tuple, rows))
    order = orders[0]
    if all(map(order.__eq__, orders)):  # the usual case: every entry built with the same keys
        columns = dict(zip(order, map(list, zip(*map(dict.values, rows), strict=True)), strict=True))
        keys = dict.fromkeys(order)
    else:
        # every key, in order of first use: a row whose keys come in an order seen before adds no new key
        keys = dict.fromkeys(chain.from_iterable(dict.fromkeys(orders)))
        columns = {k: list(map(dict.get, rows, repeat(k), repeat(_MISSING))) for k in keys}
    table: dict[str, Any] = {"n": n, "keys": list(keys)}
    rel: list[str] = []
    anchor: Sequence[int] | None = parent
    if ANCHOR in columns:
        ids = _ids(columns[ANCHOR], parent)
        if ids is not None:
            table.setdefault("ids", {})[ANCHOR] = ids[0]
            anchor = ids[1]
            if ids[2]:
                rel.append(ANCHOR)
    anchored = "ids" in table
    pending: dict[str, tuple[list[Any], list[Any], int]] = {}
    for key, values in columns.items():
        if key == ANCHOR and anchored:
            continue
        kinds = set(map(type, values))
        if kinds == _LIST and not any(values):  # every row an empty list (locators, sources): what _key finds
            table.setdefault("const", {})[key] = values[0]
            continue
        if kinds <= _LISTS and any(values) and all(type(i) is dict for v in values if v is not _MISSING for i in v):
            table.setdefault("lists", {})[key] = _nested_lists(values, anchor)
            continue
        if kinds <= _DICTS and sum(v is not _MISSING for v in values) > 1:
            table.setdefault("dicts", {})[key] = _nested_dicts(values, anchor)
            continue
        keyed = _keys(values, kinds)
        count = len(set(keyed))
        if values[0] is not _MISSING and count == 1:
            table.setdefault("const", {})[key] = values[0]
        elif kinds == {int}:
            table.setdefault("ints", {})[key] = _best_ints(key, values, anchor, rel)
        elif (2 * count > n or count > PROFILES) and (found := _ids(values, anchor)) is not None:
            table.setdefault("ids", {})[key] = found[0]
            if found[2]:
                rel.append(key)
        else:
            pending[key] = (values, keyed, count)
    if rel:
        table["rel"] = rel
    _place_rest(table, pending, n)
    return table


def _nested_lists(values: Sequence[Any], anchor: Sequence[int] | None) -> dict[str, Any]:
    """Lists of mappings, one per row: their lengths (``-1``: the row lacks the key) and their items as a table."""
    counts = [len(v) if v is not _MISSING else -1 for v in values]
    items = [item for v in values if v is not _MISSING for item in v]
    out: dict[str, Any] = {"counts": _ints(counts)[0]}
    if items:
        owners = [a for a, c in zip(anchor, counts, strict=True) for _ in range(c)] if anchor is not None else None
        out["table"] = encode_table(items, owners)
    return out


def _nested_dicts(values: Sequence[Any], anchor: Sequence[int] | None) -> dict[str, Any]:
    """Mappings, one per row that holds the key: the rows holding it and the mappings as a table."""
    present = [i for i, v in enumerate(values) if v is not _MISSING]
    owners = [anchor[i] for i in present] if anchor is not None else None
    return {"rows": _ints(present)[0], "table": encode_table([values[i] for i in present], owners)}


def decode_table(table: Mapping[str, Any], parent: Sequence[int] | None = None) -> list[dict[str, Any]]:
    """The rows of a table made by :func:`encode_table` (``parent`` as it was given to it)."""
    n = table["n"]
    rel = set(table.get("rel", ()))
    values: dict[str, list[Any]] = {}
    ids = table.get("ids", {})
    anchor: Sequence[int] | None = parent
    if ANCHOR in ids:
        values[ANCHOR], anchor = _decode_ids(ids[ANCHOR], parent if ANCHOR in rel else None, with_numbers=True)
    for key, spec in ids.items():
        if key != ANCHOR:
            values[key] = _decode_ids(spec, _need(anchor) if key in rel else None)
    for key, spec in table.get("ints", {}).items():
        seq = _decode_ints(spec, n)
        values[key] = [a + b for a, b in zip(seq, _need(anchor), strict=True)] if key in rel else seq
    for key, spec in table.get("lists", {}).items():
        counts = _decode_ints(spec["counts"], n)
        owners = [a for a, c in zip(anchor, counts, strict=True) for _ in range(c)] if anchor is not None else None
        items = decode_table(spec["table"], owners) if "table" in spec else []
        column: list[Any] = []
        at = 0
        for c in counts:
            column.append(items[at : at + c] if c >= 0 else _MISSING)
            at += max(c, 0)
        if at != len(items):
            raise ValueError("nested lists of another length than their items")
        values[key] = column
    for key, spec in table.get("dicts", {}).items():
        present = _decode_ints(spec["rows"], None)
        owners = [anchor[i] for i in present] if anchor is not None else None
        column = [_MISSING] * n
        for i, item in zip(present, decode_table(spec["table"], owners), strict=True):
            column[i] = item
        values[key] = column
    shared: list[str] = []  # columns whose rows share one value object
    for key, value in table.get("const", {}).items():
        values[key] = [value] * n
        shared.append(key)
    for key, spec in table.get("sparse", {}).items():
        column = [spec["default"]] * n if "default" in spec else [_MISSING] * n
        for row, value in spec["rows"]:
            column[row] = value
        values[key] = column
        shared.append(key)
    for key, column in table.get("values", {}).items():
        values[key] = list(column)
    profile = table.get("profile")
    if profile is not None:
        choices = profile["values"]
        index = profile.get("index")
        picks = (
            [choices[0]] * n
            if index is None
            else list(map(dict(zip(ALPHABET, choices, strict=False)).__getitem__, index))
        )
        for key in profile["keys"]:
            values[key] = [p.get(key, _MISSING) for p in picks]
            shared.append(key)
    for key in shared:
        column = values[key]
        if not _CONTAINERS.isdisjoint(map(type, column)):
            values[key] = [_fresh(v) for v in column]
    keys = table["keys"]
    if not keys:
        return [{} for _ in range(n)]
    columns = [values[k] for k in keys]
    if len(columns) != len(keys) or any(len(c) != n for c in columns):
        raise ValueError("a column of another length than the table")
    if any(_MISSING in c for c in columns):
        return [
            {k: v for k, v in zip(keys, row, strict=True) if v is not _MISSING} for row in zip(*columns, strict=True)
        ]
    return [dict(zip(keys, row, strict=True)) for row in zip(*columns, strict=True)]


def _need(anchor: list[int] | None) -> list[int]:
    if anchor is None:
        raise ValueError("a column relative to the anchor, without an anchor")
    return anchor


def _fresh(value: Any) -> Any:
    """A value no other row shares (rows are edited by readers; a shared list would change them all)."""
    if isinstance(value, list | dict):
        return json.loads(json.dumps(value)) if value else type(value)()
    return value


def _place_rest(table: dict[str, Any], pending: Mapping[str, tuple[list[Any], list[Any], int]], n: int) -> None:
    """Write the remaining columns: those of few values into the profile, the others sparse or whole.

    ``pending`` maps each key to its values, their :func:`_key` s and how many distinct keys they hold.
    """
    keyed = {k: ks for k, (_, ks, _) in pending.items()}
    columns = {k: vs for k, (vs, _, _) in pending.items()}
    distinct = {k: count for k, (_, _, count) in pending.items()}
    codes: dict[str, np.ndarray] = {}
    for k, ks in keyed.items():
        if distinct[k] <= PROFILES and 2 * distinct[k] <= n:  # a key of more values, or of values that
            # mostly do not repeat, gains nothing from the profile
            numbering = {x: i for i, x in enumerate(dict.fromkeys(ks))}
            codes[k] = np.fromiter(map(numbering.__getitem__, ks), np.int64, n)
    order = sorted(codes, key=distinct.__getitem__)
    chosen: list[str] = []
    combos = np.zeros(n, np.int64)  # each row's combination of the chosen keys' values
    for key in order:
        pairs = combos * distinct[key] + codes[key]  # below PROFILES² : a lookup table numbers them
        seen = np.bincount(pairs) > 0
        if int(seen.sum()) <= PROFILES:
            chosen.append(key)
            combos = (np.cumsum(seen) - 1)[pairs]
    if chosen:
        firsts = np.full(PROFILES, n, np.int64)
        np.minimum.at(firsts, combos, np.arange(n))
        used = np.flatnonzero(firsts < n)
        by_first = used[np.argsort(firsts[used])]  # combinations numbered in order of first use
        rank = np.zeros(PROFILES, np.int64)
        rank[by_first] = np.arange(len(by_first))
        values = [
            {k: columns[k][i] for k in chosen if columns[k][i] is not _MISSING} for i in firsts[by_first].tolist()
        ]
        index = ALPHABET_ARRAY[rank[combos]].tobytes().decode("ascii")
        profile: dict[str, Any] = {"keys": chosen, "values": values}
        if len(values) > 1:
            profile["index"] = index
        table["profile"] = profile
    for key in pending:
        if key in chosen:
            continue
        column = columns[key]
        counts = Counter(keyed[key])
        common = max(counts, key=counts.__getitem__)
        default = column[keyed[key].index(common)]
        missing = any(v is _MISSING for v in column)
        if missing or counts[common] * 2 > n:
            base = _MISSING if missing else default
            rows = [[i, v] for i, (v, k) in enumerate(zip(column, keyed[key], strict=True)) if k != common or missing]
            rows = [r for r in rows if r[1] is not _MISSING]
            spec: dict[str, Any] = {"rows": rows}
            if base is not _MISSING:
                spec["default"] = base
            table.setdefault("sparse", {})[key] = spec
        else:
            table.setdefault("values", {})[key] = column


def _keys(values: list[Any], kinds: set[type]) -> list[Any]:
    """:func:`_key` of each value (the values themselves where that is the same test, as for strings)."""
    numeric = kinds - _TEXT
    if not numeric or (numeric == _INT) or (numeric == _FLOAT and 0.0 not in values):
        return values  # no two of these are equal in Python unless their JSON is the same
    return list(map(_key, values))


_TEXT = frozenset({str, type(None)})
_CONTAINERS = frozenset({list, dict})
_LIST = frozenset({list})
_LISTS = frozenset({list, _Missing})
_DICTS = frozenset({dict, _Missing})
_INT = frozenset({int})
_FLOAT = frozenset({float})

_NONE, _TRUE, _FALSE, _EMPTY_LIST, _EMPTY_DICT = ((name,) for name in ("null", "true", "false", "[]", "{}"))


def _key(value: Any) -> Any:
    """A hashable key equal for two values exactly when their JSON is the same (a string is its own key)."""
    kind = type(value)
    if kind is str:
        return value
    if value is None:
        return _NONE
    if kind is bool:
        return _TRUE if value else _FALSE
    if kind is int:
        return (int, value)
    if kind is float:
        return (float, repr(value))
    if value is _MISSING:
        return _MISSING
    if not value and kind is list:
        return _EMPTY_LIST
    if not value and kind is dict:
        return _EMPTY_DICT
    return (list, canonical_json(value))


# -- ids and int sequences --------------------------------------------------------------------------


def _split(value: str) -> tuple[str, int]:
    """``(prefix, number)`` of a string ending in a decimal number (leading zeros stay in the prefix).

    A string that does not end in a digit is its own prefix, with the number :data:`NO_NUMBER`.
    """
    head = value.rstrip(_DIGITS)
    if len(head) == len(value):
        return value, NO_NUMBER
    digits = value[len(head) :]
    if len(digits) > 1 and digits[0] == "0":
        stripped = digits.lstrip("0") or "0"
        head, digits = head + digits[: len(digits) - len(stripped)], stripped
    return head, int(digits)


class _SplitCache(dict[str, tuple[str, int]]):
    """:func:`_split` of each string asked, computed on first use (ids repeat from one manifest to the next)."""

    def __missing__(self, value: str) -> tuple[str, int]:
        found = self[value] = _split(value)
        return found


_SPLITS = _SplitCache()
_SPLITS_KEPT = 1 << 16
"""Strings :data:`_SPLITS` holds at most before it is emptied (a bound on its memory, not on correctness)."""


def _ids(values: Sequence[Any], anchor: Sequence[int] | None = None) -> tuple[dict[str, Any], list[int], bool] | None:
    """``(spec, numbers, relative)`` of strings ending in a number, or ``None`` when one does not."""
    if set(map(type, values)) != _STRINGS:
        return None
    if len(_SPLITS) > _SPLITS_KEPT:
        _SPLITS.clear()
    heads, found = zip(*map(_SPLITS.__getitem__, values), strict=True)
    numbers = list(found)
    which: list[int] = []
    if numbers[0] != NO_NUMBER and NO_NUMBER not in numbers and heads.count(heads[0]) == len(heads):
        prefixes = {heads[0]: 0}  # one prefix, each number written without leading zeros (see :func:`_split`)
    else:
        prefixes = {head: i for i, head in enumerate(dict.fromkeys(heads))}
        if 2 * len(prefixes) > len(values):  # mostly distinct strings: nothing to gain
            return None
        which = list(map(prefixes.__getitem__, heads))
    spec: dict[str, Any] = {"prefixes": list(prefixes)}
    if len(prefixes) > PROFILES:
        spec["prefix"] = _ints(which)[0]
    elif len(prefixes) > 1:
        spec["prefix"] = ALPHABET_ARRAY[np.asarray(which, np.int64)].tobytes().decode("ascii")
    spec["number"], relative = _best(numbers, anchor)
    return spec, numbers, relative


def _decode_ids(spec: Mapping[str, Any], anchor: Sequence[int] | None = None, *, with_numbers: bool = False) -> Any:
    prefixes = spec["prefixes"]
    numbers = _decode_ints(spec["number"], None)
    if anchor is not None:
        numbers = [a + b for a, b in zip(numbers, anchor, strict=True)]
    which = [0] * len(numbers)
    if isinstance(spec.get("prefix"), str):
        which = list(map(ALPHABET.index, spec["prefix"]))
    elif "prefix" in spec:
        which = _decode_ints(spec["prefix"], len(numbers))
    if len(which) != len(numbers):
        raise ValueError("ids of another length than their prefixes")
    strings = [prefixes[p] + str(x) if x != NO_NUMBER else prefixes[p] for p, x in zip(which, numbers, strict=True)]
    return (strings, numbers) if with_numbers else strings


def _best_ints(key: str, values: list[int], anchor: Sequence[int] | None, rel: list[str]) -> Any:
    form, relative = _best(values, anchor)
    if relative:
        rel.append(key)
    return form


def _best(values: Sequence[int], anchor: Sequence[int] | None) -> tuple[Any, bool]:
    """The shortest int sequence of ``values``, or of their differences to ``anchor`` (then ``True``)."""
    if anchor is not None:
        plain = _array(values)
        base = _array(anchor)
        if plain is not None and base is not None:
            offsets = plain - base
            if len(offsets) > 1 and not (offsets != offsets[0]).any():  # seq after ref, unit = ref: one run
                return {"runs": [int(offsets[0]), len(offsets)]}, True
            form, size = _ints(plain)
            offset_form, offsets_size = _ints(offsets)
            return (offset_form, True) if offsets_size < size else (form, False)
    return _ints(values)[0], False


_LIMIT = 2**52  # int64 arithmetic on differences of values this small cannot overflow


def _array(values: Sequence[int] | np.ndarray) -> np.ndarray | None:
    if isinstance(values, np.ndarray):
        return values
    if not values or max(values) >= _LIMIT or min(values) <= -_LIMIT:
        return None
    return np.asarray(values, dtype=np.int64)


def _ints(values: Sequence[int] | np.ndarray) -> tuple[Any, int]:
    """The shortest int sequence form of ``values`` (see the module docstring) and its JSON length."""
    plain = _array(values)
    if plain is None:
        listed = list(values)
        return listed, _size(listed)
    deltas = plain.copy()  # np.diff(plain, prepend=0), without its argument handling
    deltas[1:] -= plain[:-1]
    forms: list[tuple[int, str, np.ndarray, bool]] = [(_length(plain), "", plain, False)]
    forms.append((_length(deltas) + len('{"delta":}'), "delta", deltas, False))
    for name, seq in (("runs", plain), ("delta_runs", deltas)):
        runs = _runs(seq)
        if runs is not None:
            forms.append((_length(runs) + len(name) + 5, name, runs, True))
    size, name, chosen, _ = min(forms, key=lambda f: f[0])
    return (chosen.tolist() if not name else {name: chosen.tolist()}), size


_SUM = np.add.reduce
"""``ndarray.sum`` of a one-dimensional array (the same pairwise sum), without the method's Python wrapper."""


def _length(seq: np.ndarray) -> int:
    """About the length of ``seq`` written as a JSON list of integers (it only chooses between forms)."""
    if not len(seq):
        return 2
    work = np.abs(seq).astype(np.float64)
    floors = np.floor(np.log10(np.maximum(work, 1.0, out=work), out=work), out=work)  # digits - 1, per value
    return int(_SUM(floors)) + int(np.count_nonzero(seq < 0)) + 2 * len(seq) + 1


def _runs(seq: np.ndarray) -> np.ndarray | None:
    """``[value, count, …]`` of the runs of equal values in ``seq``, or ``None`` when that is not shorter."""
    change = seq[1:] != seq[:-1]
    if 2 * (int(np.count_nonzero(change)) + 1) >= len(seq):  # a run starts at 0 and at every change
        return None
    starts = np.flatnonzero(np.concatenate(([True], change)))
    counts = np.diff(np.append(starts, len(seq)))
    return np.column_stack((seq[starts], counts)).ravel()


def _decode_ints(spec: Any, n: int | None) -> list[int]:
    if isinstance(spec, list):
        out = list(spec)
    elif "delta" in spec or "delta_runs" in spec:
        deltas = spec["delta"] if "delta" in spec else _unrun(spec["delta_runs"])
        out, total = [], 0
        for d in deltas:
            total += d
            out.append(total)
    else:
        out = _unrun(spec["runs"])
    if n is not None and len(out) != n:
        raise ValueError(f"an int sequence of {len(out)} values where the table has {n} rows")
    return out


def _unrun(runs: Sequence[int]) -> list[int]:
    out: list[int] = []
    for i in range(0, len(runs), 2):
        out += [runs[i]] * runs[i + 1]
    return out


def _size(value: Any) -> int:
    return len(json.dumps(value, separators=(",", ":")))
