"""Number options: a value that is not a number of the kind asked for is refused naming what is expected.

Typer checks ``int`` and ``float`` options with pydantic, whose wording ("Input should be a valid integer,
unable to parse string as an integer") is about its own internals. Every number option of the CLI is made
with :func:`int_option` or :func:`float_option` instead: click then answers ``Invalid value for '--window':
expected a whole number of tokens, got 'abc'``, naming the option, the kind of number and its bounds.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import typer


def _expected(kind: str, unit: str | None, minimum: float | None, maximum: float | None) -> str:
    """``a whole number of tokens >= 1`` / ``a whole number from 0 to 65535``: what an option takes, in words."""
    what = f"{kind} of {unit}" if unit else kind
    if minimum is not None and maximum is not None:
        return f"{what} from {minimum} to {maximum}"
    if minimum is not None:
        return f"{what} >= {minimum}"
    if maximum is not None:
        return f"{what} <= {maximum}"
    return what


def number_parser(
    kind: type[int] | type[float],
    *,
    unit: str | None = None,
    minimum: float | None = None,
    maximum: float | None = None,
) -> Callable[[Any], Any]:
    """A typer ``parser`` turning an option's text into ``kind``, within ``[minimum, maximum]`` when given.

    ``int`` takes whole numbers only (``8000``, ``-3``; not ``1.5``), ``float`` any finite decimal number.
    A value that is already a number (an option's default) is bounds-checked as it is.

    Raises (from the returned parser):
        typer.BadParameter: not such a number, or out of bounds; click prefixes the option's name.
    """
    expected = _expected("a whole number" if kind is int else "a number", unit, minimum, maximum)

    def parse(value: Any) -> Any:
        number = value if isinstance(value, int | float) and not isinstance(value, bool) else _read(kind, value)
        if (
            number is None
            or not math.isfinite(number)
            or (minimum is not None and number < minimum)
            or (maximum is not None and number > maximum)
        ):
            raise typer.BadParameter(f"expected {expected}, got {value!r}")
        return number

    return parse


def _read(kind: type[int] | type[float], value: Any) -> int | float | None:
    """``value`` (an option's text) as ``kind``, or ``None`` when it is not one."""
    try:
        return kind(str(value).strip())
    except ValueError:
        return None


def int_option(
    *names: str, unit: str | None = None, minimum: int | None = None, maximum: int | None = None, **kwargs: Any
) -> Any:
    """``typer.Option(*names, **kwargs)`` for a whole number (bounds shown in the help as typer shows ``min``/``max``).

    The bounds are checked by :func:`number_parser` (typer does not apply ``min``/``max`` next to a parser).
    """
    parse = number_parser(int, unit=unit, minimum=minimum, maximum=maximum)
    return typer.Option(*names, parser=parse, min=minimum, max=maximum, **kwargs)


def float_option(
    *names: str, unit: str | None = None, minimum: float | None = None, maximum: float | None = None, **kwargs: Any
) -> Any:
    """``typer.Option(*names, **kwargs)`` for a finite decimal number, as :func:`int_option` for whole ones."""
    parse = number_parser(float, unit=unit, minimum=minimum, maximum=maximum)
    return typer.Option(*names, parser=parse, min=minimum, max=maximum, **kwargs)
