"""Dates a query names, matched against when units were written."""

from __future__ import annotations

import dataclasses
from dataclasses import astuple
from datetime import UTC, date, datetime

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ctxledger.assemble.dates import DateSpan, date_match, days_match, query_dates, unit_day, with_dates
from ctxledger.eval.datasets import session_time

MONTHS = ["January", "February", "March", "April", "May", "June", "July", "August", "September", "October",
          "November", "December"]  # fmt: skip


@settings(max_examples=60, deadline=None)
@given(st.dates(min_value=date(1990, 1, 1), max_value=date(2099, 12, 31)), st.sampled_from(["dmy", "mdy", "iso"]))
def test_a_full_date_is_read_back_in_each_form(day: date, form: str) -> None:
    month = MONTHS[day.month - 1]
    text = {
        "dmy": f"What happened on {day.day} {month}, {day.year}?",
        "mdy": f"What did she show on {month} {day.day}, {day.year}?",
        "iso": f"errors logged {day.isoformat()} at noon",
    }[form]
    assert query_dates(text) == (DateSpan(day.year, day.month, day.day),)


def test_months_and_years_are_open_where_the_query_leaves_them_open() -> None:
    assert query_dates("When did Melanie go camping in June?") == (DateSpan(None, 6, None),)
    assert query_dates("What did they paint in July 2023?") == (DateSpan(2023, 7, None),)
    assert query_dates("How many times has she gone to the beach in 2023?") == (DateSpan(2023, None, None),)
    assert query_dates("May I ask what you think?") == ()
    assert query_dates("What is the capital of France?") == ()
    assert query_dates("On 31 February 2023 nothing happened") != (DateSpan(2023, 2, 31),)


def test_date_match_marks_the_dates_inside_any_span() -> None:
    dates = [date(2023, 6, 3), date(2023, 7, 9), date(2022, 6, 20), date(2023, 10, 13)]
    assert list(date_match([DateSpan(None, 6, None)], dates)) == [1, 0, 1, 0]
    assert list(date_match([DateSpan(2023, 6, None)], dates)) == [1, 0, 0, 0]
    assert list(date_match([DateSpan(2023, 10, 13), DateSpan(2022, None, None)], dates)) == [0, 0, 1, 1]
    assert list(date_match([], dates)) == [0, 0, 0, 0]


def _units(days: list[date]) -> list[object]:
    from ctxledger.records import Message
    from ctxledger.units import build_units

    records = [
        Message(
            id=f"m{i}",
            content=f"turn {i}",
            tenant_id="t",
            conversation_id="c",
            branch_id="b",
            created_at=datetime(d.year, d.month, d.day, 12, tzinfo=UTC),
        )
        for i, d in enumerate(days)
    ]
    units, _ = build_units(records, bytes)
    return units


@settings(max_examples=30, deadline=None)
@given(st.lists(st.floats(0, 10, allow_nan=False), min_size=4, max_size=4), st.floats(0, 3, allow_nan=False))
def test_with_dates_only_scales_units_of_the_named_time(scores: list[float], boost: float) -> None:
    days = [date(2023, 6, 3), date(2023, 7, 9), date(2023, 6, 20), date(2023, 10, 13)]
    base = np.array(scores)
    ordinals = np.array([unit_day(u) for u in _units(days)])
    assert list(ordinals) == [d.toordinal() for d in days]
    out = with_dates(base, "What did she do in June?", ordinals, boost)
    assert np.allclose(out[[1, 3]], base[[1, 3]])  # other months untouched
    assert np.allclose(out[[0, 2]], base[[0, 2]] * (1 + boost))
    assert np.array_equal(with_dates(base, "What did she do?", ordinals, boost), base)
    assert np.array_equal(with_dates(base, "What did she do in June?", ordinals, 0.0), base)


def test_locomo_session_times_are_read_as_utc() -> None:
    assert session_time("1:56 pm on 8 May, 2023") == datetime(2023, 5, 8, 13, 56, tzinfo=UTC)
    assert session_time("12:04 am on 1 January, 2024") == datetime(2024, 1, 1, 0, 4, tzinfo=UTC)
    assert session_time("12:30 pm on 2 Feb, 2023") == datetime(2023, 2, 2, 12, 30, tzinfo=UTC)
    assert session_time("yesterday") is None
    assert session_time("1:56 pm on 31 February, 2023") is None


def test_the_date_boost_is_a_validated_policy_setting() -> None:
    from ctxledger.errors import InvalidSetting
    from ctxledger.policy.default import default_policy

    params = default_policy().selection
    assert params.as_dict()["date_boost"] == 1.0
    with pytest.raises(InvalidSetting, match="date_boost"):
        dataclasses.replace(params, date_boost=-1.0)


@settings(max_examples=80, deadline=None)
@given(
    st.lists(st.dates(min_value=date(1, 1, 1), max_value=date(9999, 12, 31)), min_size=1, max_size=20),
    st.lists(
        st.tuples(st.none() | st.integers(1900, 2099), st.none() | st.integers(1, 12), st.none() | st.integers(1, 31)),
        max_size=3,
    ),
)
def test_day_ordinals_match_the_spans_their_dates_fall_in(dates: list[date], spans: list[tuple]) -> None:
    """The day-ordinal arrays a snapshot keeps match exactly the dates each span holds."""
    wanted = [DateSpan(*s) for s in spans]
    got = days_match(wanted, np.array([d.toordinal() for d in dates]))

    def inside(s: DateSpan, d: date) -> bool:
        return all(w is None or w == v for w, v in zip(astuple(s), (d.year, d.month, d.day), strict=True))

    expected = [float(any(inside(s, d) for s in wanted)) for d in dates]
    assert list(got) == expected
    assert list(days_match(wanted, np.zeros(len(dates), dtype=np.int64))) == [0.0] * len(dates)  # no date
