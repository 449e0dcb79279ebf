"""Where a value sits in an input, and typed field access that says so when it is wrong.

Every importer error must name the file, the 0-based index of the offending record and the dotted
path of the field (``ctxledger.errors.InputError``). A :class:`Loc` carries the first two and a path
prefix; the getters here add the field name and a JSON type name ("expected a string, got number").
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ctxledger.errors import InputError

_JSON_NAMES: tuple[tuple[type, str], ...] = (
    (bool, "boolean"),
    (int, "number"),
    (float, "number"),
    (str, "string"),
    (list, "array"),
    (dict, "object"),
)


def json_type(value: Any) -> str:
    """Return the JSON name of ``value``'s type (``null``, ``boolean``, ``number``, ``string`` …)."""
    if value is None:
        return "null"
    for python_type, name in _JSON_NAMES:
        if isinstance(value, python_type):
            return name
    return type(value).__name__


@dataclass(frozen=True, slots=True)
class Loc:
    """A position in an input: ``source`` (file name or ``"<api>"``), record ``index``, path ``prefix``.

    ``prefix`` is a dotted path ending in ``.`` (e.g. ``"traj[5]."``) or empty.
    """

    source: str
    index: int | None = None
    prefix: str = ""

    def child(self, path: str) -> Loc:
        """Return the location of ``path`` below this one (``path`` without a trailing dot)."""
        return Loc(self.source, self.index, f"{self.prefix}{path}.")

    def path(self, field: str | None = None) -> str | None:
        """The dotted path of ``field`` below this location (or of this location itself)."""
        if field is not None:
            return f"{self.prefix}{field}"
        return self.prefix.rstrip(".") or None

    def error(self, problem: str, field: str | None = None) -> InputError:
        """Return (not raise) an :class:`InputError` naming source, index and ``field``'s path."""
        return InputError(problem, source=self.source, index=self.index, field=self.path(field))


def require(obj: Mapping[str, Any], key: str, kind: type | tuple[type, ...], loc: Loc, what: str) -> Any:
    """Return ``obj[key]``, checking that it is present and an instance of ``kind``.

    ``what`` names the expected type in the error ("a string"). Booleans never pass for numbers.

    Raises:
        InputError: the field is missing or of the wrong type (names ``loc`` and ``key``).
    """
    if key not in obj:
        raise loc.error(f"missing required field {key!r}", key)
    return _checked(obj[key], key, kind, loc, what)


def optional(
    obj: Mapping[str, Any], key: str, kind: type | tuple[type, ...], loc: Loc, what: str, default: Any = None
) -> Any:
    """Return ``obj[key]`` checked like :func:`require`, or ``default`` when absent or null.

    Raises:
        InputError: the field is present, not null, and of the wrong type.
    """
    value = obj.get(key)
    if value is None:
        return default
    return _checked(value, key, kind, loc, what)


def as_object(value: Any, loc: Loc, what: str = "an object") -> Mapping[str, Any]:
    """Return ``value`` if it is a JSON object, else raise an error naming ``loc`` itself.

    Raises:
        InputError: ``value`` is not an object.
    """
    if not isinstance(value, dict):
        raise loc.error(f"expected {what}, got {json_type(value)}")
    return value


def _checked(value: Any, key: str, kind: type | tuple[type, ...], loc: Loc, what: str) -> Any:
    if isinstance(value, bool) and bool not in _as_tuple(kind):
        raise loc.error(f"expected {what}, got boolean", key)
    if not isinstance(value, kind):
        raise loc.error(f"expected {what}, got {json_type(value)}", key)
    return value


def _as_tuple(kind: type | tuple[type, ...]) -> tuple[type, ...]:
    return kind if isinstance(kind, tuple) else (kind,)
