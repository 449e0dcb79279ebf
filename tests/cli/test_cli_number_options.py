"""Every number option of the CLI refuses a value that is no such number naming the option and what it takes."""

from __future__ import annotations

import math
from collections.abc import Iterator
from typing import Any, get_args

import pytest
import typer
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from typer.main import get_command
from typer.testing import CliRunner

from ctxledger.cli import app
from ctxledger.cli._numbers import number_parser


def _kind(param: Any) -> type | None:
    """``int`` or ``float`` for a number option (also ``list[int]``), else ``None``."""
    annotation = param.type_descriptor.annotation
    for candidate in (annotation, *get_args(annotation)):
        if candidate in (int, float):
            return candidate
    return None


def _number_options(command: Any, path: tuple[str, ...] = ()) -> Iterator[tuple[tuple[str, ...], str, type]]:
    """``(command path, option name, int or float)`` of every number option below ``command``."""
    for param in command.params:
        kind = _kind(param) if getattr(param, "param_type_name", None) == "option" else None
        if kind is not None:
            yield path, max(param.opts, key=len), kind
    for name, sub in getattr(command, "commands", {}).items():
        yield from _number_options(sub, (*path, name))


NUMBER_OPTIONS = list(_number_options(get_command(app)))


def _is_number(text: str, kind: type) -> bool:
    try:
        return math.isfinite(kind(text.strip()))
    except ValueError:
        return False


def test_the_cli_has_the_number_options_this_test_walks() -> None:
    found = {(" ".join(path), name) for path, name, _ in NUMBER_OPTIONS}
    wanted = {("assemble", "--window"), ("serve", "--port"), ("serve", "--session-hours"), ("eval run", "--budget")}
    assert wanted <= found


_NOT_NUMBERS = st.one_of(
    st.sampled_from(["abc", "1.5", "8k", "", " ", "nan", "inf", "1e3", "0x10", "--", "twelve"]),
    st.text(min_size=1, max_size=12),
)


@settings(max_examples=6, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(value=_NOT_NUMBERS)
def test_a_value_that_is_no_number_names_the_option_and_what_it_takes(runner: CliRunner, value: str) -> None:
    for path, option, kind in NUMBER_OPTIONS:
        if _is_number(value, kind) or "\x00" in value:
            continue
        result = runner.invoke(app, [*path, f"{option}={value}"])
        flat = " ".join(result.output.split())
        assert result.exit_code == 2, (path, option, result.output)
        assert f"Invalid value for '{option}'" in flat, (path, option, flat)
        expected = "expected a whole number" if kind is int else "expected a number"
        assert expected in flat and "Input should" not in flat and "Traceback" not in flat, (path, option, flat)


@given(
    number=st.integers(-(10**6), 10**6),
    bounds=st.tuples(st.none() | st.integers(-100, 100), st.none() | st.integers(-100, 100)),
    pad=st.sampled_from(["", " ", "\t"]),
)
def test_a_whole_number_is_read_exactly_and_bounded(
    number: int, bounds: tuple[int | None, int | None], pad: str
) -> None:
    low, high = bounds
    parse = number_parser(int, unit="tokens", minimum=low, maximum=high)
    inside = (low is None or number >= low) and (high is None or number <= high)
    if inside:
        assert parse(f"{pad}{number}{pad}") == number and parse(number) == number
        return
    with pytest.raises(typer.BadParameter) as refused:
        parse(str(number))
    assert "expected a whole number of tokens" in str(refused.value) and repr(str(number)) in str(refused.value)


@given(number=st.floats(allow_nan=True, allow_infinity=True))
def test_a_decimal_option_takes_finite_numbers_within_its_bounds(number: float) -> None:
    parse = number_parser(float, unit="hours", minimum=0.01)
    if math.isfinite(number) and number >= 0.01:
        assert parse(repr(number)) == number
    else:
        with pytest.raises(typer.BadParameter) as refused:
            parse(repr(number))
        assert "expected a number of hours >= 0.01" in str(refused.value)
