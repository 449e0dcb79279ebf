"""Validation of policy settings: the shared checks stage constructors and settings dataclasses run.

Every built-in stage validates its constructor arguments with these helpers, and so do
:class:`~ctxledger.policy.base.SelectionParams`, :class:`~ctxledger.policy.base.RehydrationParams` and
:class:`~ctxledger.policy.contracts.WorkingSetContract`, so a bad value fails when the policy is built —
never as a raw ``AttributeError`` mid-assembly, and never by quietly meaning something else (a string
where a list was meant, an unknown enum value treated like a default). Each check raises
:class:`~ctxledger.errors.InvalidSetting` naming the owner (``"privacy"``, ``"selection"`` …) and the
setting (``"allow"``, ``"class_caps.nonsense"``); the policy loader adds the file and the table.
"""

from __future__ import annotations

import math
from collections.abc import Collection, Iterable, Mapping
from typing import Any

from ctxledger.errors import InvalidSetting


def strings(value: Any, owner: str, setting: str, *, known: Collection[str] | None = None) -> tuple[str, ...]:
    """A list of non-empty strings as a tuple (a lone string is refused: ``"app"`` is not ``["app"]``).

    Args:
        value: the setting's value.
        owner: what the setting belongs to (named in the error).
        setting: the setting's key (named in the error).
        known: when given, every item must be one of these.

    Raises:
        InvalidSetting: not a list (or tuple) of non-empty strings, or an item outside ``known``.
    """
    if isinstance(value, str) or not isinstance(value, Iterable) or isinstance(value, Mapping):
        raise InvalidSetting(owner, setting, f"must be a list of strings, got {value!r}")
    out = tuple(value)
    for item in out:
        if not isinstance(item, str) or not item:
            raise InvalidSetting(owner, setting, f"must be a list of non-empty strings; {item!r} is not one")
        if known is not None and item not in known:
            raise InvalidSetting(owner, setting, f"unknown value {item!r}; known: {', '.join(sorted(known))}")
    return out


def string_lists(
    value: Any, owner: str, setting: str, *, known: Collection[str] | None = None
) -> dict[str, tuple[str, ...]]:
    """A table of key → list of strings (``{"*": ["public"], "google": […]}``).

    Raises:
        InvalidSetting: not a table, a key that is not a string, or a value that is not a list of strings
            (or holds an item outside ``known``); the setting is named ``<setting>.<key>``.
    """
    table = mapping(value, owner, setting)
    return {key: strings(items, owner, f"{setting}.{key}", known=known) for key, items in table.items()}


def mapping(value: Any, owner: str, setting: str) -> dict[str, Any]:
    """A table (mapping) whose keys are non-empty strings, as a dict.

    Raises:
        InvalidSetting: not a table, or a key that is not a non-empty string.
    """
    if not isinstance(value, Mapping):
        raise InvalidSetting(owner, setting, f"must be a table, got {value!r}")
    for key in value:
        if not isinstance(key, str) or not key:
            raise InvalidSetting(owner, setting, f"keys must be non-empty strings; {key!r} is not one")
    return dict(value)


def choice(value: Any, owner: str, setting: str, allowed: Collection[str]) -> str:
    """One of ``allowed`` (an enum-like string setting).

    Raises:
        InvalidSetting: any other value, listing the allowed ones.
    """
    if not isinstance(value, str) or value not in allowed:
        raise InvalidSetting(owner, setting, f"must be one of {', '.join(map(repr, allowed))}, got {value!r}")
    return value


def flag(value: Any, owner: str, setting: str) -> bool:
    """A boolean (``"no"`` or ``0`` are refused: they would read as true or false by accident).

    Raises:
        InvalidSetting: not ``True`` or ``False``.
    """
    if not isinstance(value, bool):
        raise InvalidSetting(owner, setting, f"must be true or false, got {value!r}")
    return value


def number(
    value: Any,
    owner: str,
    setting: str,
    *,
    low: float = -math.inf,
    high: float = math.inf,
    low_open: bool = False,
    integer: bool = False,
) -> float:
    """A finite number within ``[low, high]`` (``(low, high]`` when ``low_open``).

    Args:
        value: the setting's value.
        owner: what the setting belongs to (named in the error).
        setting: the setting's key (named in the error).
        low: the lower bound (inclusive unless ``low_open``).
        high: the upper bound (inclusive).
        low_open: exclude ``low`` itself (``> 0`` rather than ``>= 0``).
        integer: require an integer.

    Raises:
        InvalidSetting: not a number (booleans are not numbers), not an integer when one is required,
            not finite, or out of range.
    """
    kind = "an integer" if integer else "a number"
    if isinstance(value, bool) or not isinstance(value, int | float) or (integer and not isinstance(value, int)):
        raise InvalidSetting(owner, setting, f"must be {kind}, got {value!r}")
    if not math.isfinite(value) or value < low or (low_open and value == low) or value > high:
        lower = f"> {low:g}" if low_open else f">= {low:g}"
        bounds = [lower] if math.isfinite(low) else []
        if math.isfinite(high):
            bounds.append(f"<= {high:g}")
        raise InvalidSetting(owner, setting, f"must be {kind} {' and '.join(bounds)}, got {value!r}")
    return value


def fractions(value: Any, owner: str, setting: str, known: Collection[str]) -> dict[str, float]:
    """A table of known key → fraction in (0, 1] (class caps: context class → share of ``B_dynamic``).

    Raises:
        InvalidSetting: not a table, an unknown key (named as ``<setting>.<key>``), or a value outside (0, 1].
    """
    table = mapping(value, owner, setting)
    out: dict[str, float] = {}
    for key, share in table.items():
        if key not in known:
            raise InvalidSetting(owner, f"{setting}.{key}", f"unknown key {key!r}; known: {', '.join(known)}")
        out[key] = number(share, owner, f"{setting}.{key}", low=0.0, high=1.0, low_open=True)
    return out
