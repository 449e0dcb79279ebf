"""Dates a query names, matched against the dates units were written.

A question such as "When did Melanie go camping in June?" or "What did she paint on October 13, 2023?" names
a time; the turn that answers it seldom repeats the date (it says "yesterday"), but it was written then. So
:func:`query_dates` reads the calendar dates a query names (a day, a month of a year, a month of any year, a
year), and :func:`date_match` marks the units whose first record's ``created_at`` falls inside one of them.
Relative expressions ("last week") are not read: they need the question's own date, which a query does not
carry.

Units written on the same calendar day form a session; :func:`with_session` lifts each unit by its session's
best score. The day of every unit (:func:`unit_day`) is read once into the snapshot
(:mod:`ctxledger.assemble.facets`), so neither signal reads the units per call.

Recognised forms (English month names and three-letter abbreviations, case-insensitive): ``13 October 2023``,
``October 13, 2023``, ``13 Oct, 2023``, ``October 2023``, ``October`` (any year), ``2023`` (a year from 1900 to
2099, as a word of its own), ISO ``2023-10-13``.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import date

import numpy as np

from ctxledger.units import Unit

_MONTHS = {
    name: number
    for number, names in enumerate(
        (
            ("january", "jan"),
            ("february", "feb"),
            ("march", "mar"),
            ("april", "apr"),
            ("may",),
            ("june", "jun"),
            ("july", "jul"),
            ("august", "aug"),
            ("september", "sep", "sept"),
            ("october", "oct"),
            ("november", "nov"),
            ("december", "dec"),
        ),
        start=1,
    )
    for name in names
}
_MONTH = r"(?P<month>" + "|".join(sorted(_MONTHS, key=len, reverse=True)) + r")\.?"
_YEAR = r"(?P<year>(?:19|20)\d\d)"
_DAY = r"(?P<day>[0-3]?\d)(?:st|nd|rd|th)?"
_FORMS = [
    re.compile(rf"\b{_DAY}\s+(?:of\s+)?{_MONTH},?\s+{_YEAR}\b", re.IGNORECASE),
    re.compile(rf"\b{_MONTH}\s+{_DAY},?\s+{_YEAR}\b", re.IGNORECASE),
    re.compile(r"\b(?P<year>(?:19|20)\d\d)-(?P<mnum>[01]\d)-(?P<day>[0-3]\d)\b"),
    re.compile(rf"\b{_MONTH},?\s+{_YEAR}\b", re.IGNORECASE),
    re.compile(rf"\b{_MONTH}\b", re.IGNORECASE),
    re.compile(rf"\b{_YEAR}\b"),
]
_MAY_AS_VERB = re.compile(r"\bmay\s+(?:i|we|you|he|she|they|it|be|have|not)\b", re.IGNORECASE)


@dataclass(frozen=True, slots=True)
class DateSpan:
    """A calendar span a query names: ``year``/``month``/``day`` are ``None`` where the query leaves them open."""

    year: int | None
    month: int | None
    day: int | None

    def contains(self, years: np.ndarray, months: np.ndarray, days: np.ndarray) -> np.ndarray:
        """Which of the given dates (parallel arrays) fall inside the span."""
        hit = np.ones(len(years), dtype=bool)
        for wanted, values in ((self.year, years), (self.month, months), (self.day, days)):
            if wanted is not None:
                hit &= values == wanted
        return hit


def query_dates(query: str) -> tuple[DateSpan, ...]:
    """The calendar spans ``query`` names (module docstring), most specific first, each text span read once."""
    spans: list[DateSpan] = []
    taken: list[tuple[int, int]] = []
    for form in _FORMS:
        for match in form.finditer(query):
            start, end = match.span()
            if any(start < e and s < end for s, e in taken):
                continue
            span = _span(match, query)
            if span is not None:
                spans.append(span)
                taken.append((start, end))
    return tuple(dict.fromkeys(spans))


def _span(match: re.Match[str], query: str) -> DateSpan | None:
    groups = match.groupdict()
    year = int(groups["year"]) if groups.get("year") else None
    if groups.get("mnum"):
        month: int | None = int(groups["mnum"])
    elif groups.get("month"):
        month = _MONTHS[groups["month"].lower().rstrip(".")]
        if groups["month"].lower() == "may" and year is None and _MAY_AS_VERB.match(query, match.start()):
            return None  # "may I", "may be": the verb, not the month
    else:
        month = None
    day = int(groups["day"]) if groups.get("day") else None
    if day is not None and month is not None and year is not None:
        try:
            date(year, month, day)
        except ValueError:
            return None
    return DateSpan(year, month, day)


def date_match(spans: Sequence[DateSpan], dates: Sequence[date]) -> np.ndarray:
    """1.0 for each date inside any of ``spans``, else 0.0 (all 0 when there are no spans)."""
    ordinals = np.fromiter((d.toordinal() for d in dates), dtype=np.int64, count=len(dates))
    return days_match(spans, ordinals)


_EPOCH = date(1970, 1, 1).toordinal()


def days_match(spans: Sequence[DateSpan], days: np.ndarray) -> np.ndarray:
    """:func:`date_match` on day ordinals (:meth:`date.toordinal`; 0 = no date, never inside a span)."""
    out = np.zeros(len(days), dtype=np.float64)
    if not spans or not len(days):
        return out
    stamps = (np.asarray(days, dtype=np.int64) - _EPOCH).astype("datetime64[D]")
    month_start = stamps.astype("datetime64[M]")
    years = stamps.astype("datetime64[Y]").astype(np.int64) + 1970
    months = month_start.astype(np.int64) % 12 + 1
    mdays = (stamps - month_start).astype(np.int64) + 1
    hit = np.zeros(len(days), dtype=bool)
    for span in spans:
        hit |= span.contains(years, months, mdays)
    out[hit & (np.asarray(days) > 0)] = 1.0
    return out


def unit_day(unit: Unit) -> int:
    """The day ``unit`` was written: its first record's ``created_at`` date as an ordinal (0 when it has none)."""
    return unit.records[0].created_at.date().toordinal() if unit.records else 0


def with_dates(scores: np.ndarray, query: str, days: np.ndarray, boost: float) -> np.ndarray:
    """``scores · (1 + boost·match)``: units written on a date the query names count ``1 + boost`` times.

    Multiplicative, so a date alone never makes an unrelated unit relevant; it ranks the relevant units of the
    named time above the same kind of unit from another time. Returns ``scores`` unchanged when ``boost`` is 0
    or the query names no date. ``days`` are the units' :func:`unit_day` ordinals, aligned with ``scores``
    (kept with the snapshot, so no unit is read per call).
    """
    if boost <= 0 or not query or len(days) != len(scores):
        return scores
    spans = query_dates(query)
    if not spans:
        return scores
    return scores * (1.0 + boost * days_match(spans, days))


def with_session(scores: np.ndarray, sessions: np.ndarray, boost: float) -> np.ndarray:
    """``scores · (1 + boost·best)``: each unit lifted by the best score of its session (the units of its day).

    ``best`` is the highest score, over the maximum, of the units that share the unit's session number
    (``sessions``: one small integer per unit, aligned with ``scores``; units written on the same calendar day
    share one). A conversation that resumes on another day talks about that day's events, so the turns around
    a strong hit (the question's answer is often a few turns before or after the turn that repeats its words)
    rise together, and a session with no good hit does not. Every unit of a one-day history gets the same
    factor, which leaves the ranking unchanged. Returns ``scores`` unchanged when ``boost`` is 0 or nothing
    scores above 0.
    """
    if boost <= 0 or not len(scores) or len(sessions) != len(scores):
        return scores
    top = float(scores.max())
    if top <= 0:
        return scores
    return scores * (1.0 + boost * session_best(sessions, scores / top)[sessions])


def session_best(sessions: np.ndarray, values: np.ndarray) -> np.ndarray:
    """``best[s]`` = the largest of ``values`` at the positions of session ``s``, and 0 when that is below 0 or none.

    ``sessions``: non-negative integers aligned with ``values`` (float64). When the sessions never decrease (units in
    ``seq`` order, days in order) each session is one run, reduced in one pass; otherwise by ``np.maximum.at``.
    """
    best = np.zeros(int(sessions.max()) + 1 if len(sessions) else 0, dtype=np.float64)
    if not len(sessions):
        return best
    if len(sessions) > 1 and not bool((sessions[1:] >= sessions[:-1]).all()):
        np.maximum.at(best, sessions, values)
        return best
    starts = np.flatnonzero(sessions[1:] != sessions[:-1]) + 1
    starts = np.concatenate((np.zeros(1, dtype=np.int64), starts))
    best[sessions[starts]] = np.maximum(np.maximum.reduceat(values, starts), 0.0)
    return best
