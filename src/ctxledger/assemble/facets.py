"""Who said each unit and on which day: kept with a snapshot, in step with its units, for relevance.

Relevance lifts the units of the speaker a question names (:func:`~ctxledger.assemble.speakers.with_speaker`),
of the dates it names (:func:`~ctxledger.assemble.dates.with_dates`) and of the session of a strong hit
(:func:`~ctxledger.assemble.dates.with_session`). Each needs one fact per unit; :class:`UnitFacets` reads them
from the records when a snapshot is built or extended (the append-only history is read once) and hands them to
each call as arrays, so no call walks the history.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ctxledger.assemble.dates import unit_day
from ctxledger.assemble.speakers import speaker_names, unit_speaker
from ctxledger.records import Participant, Record
from ctxledger.units import Unit


class UnitFacets:
    """One speaker and one day per unit of a snapshot, aligned with its units (module docstring).

    ``speakers`` codes index :attr:`names` (``-1``: no speaker); ``days`` are day ordinals
    (:func:`~ctxledger.assemble.dates.unit_day`); ``sessions`` number the distinct days densely (a session is
    the units written on one calendar day).
    """

    __slots__ = ("_columns", "_keys", "_n", "_names", "_people", "_session_of")

    def __init__(self) -> None:
        self._columns = np.zeros((3, 0), dtype=np.int64)  # speakers, days, sessions; grown by doubling
        self._n = 0
        self._keys: dict[tuple[str, str], int] = {}
        self._session_of: dict[int, int] = {}
        self._people: dict[str, str] = {}
        self._names: list[str] | None = None

    def __len__(self) -> int:
        """How many units the facets cover."""
        return self._n

    def extend(self, units: Sequence[Unit], records: Sequence[Record] = ()) -> None:
        """Append the facts of ``units`` (the snapshot's next units); ``records`` give participants' names.

        Costs the new units only: the columns grow by doubling, so an append never copies the history's facets.
        """
        for rec in records:
            if isinstance(rec, Participant) and rec.name:
                self._people[rec.id] = rec.name
                self._names = None
        if self._n + len(units) > self._columns.shape[1]:
            grown = np.zeros((3, max(2 * self._columns.shape[1], self._n + len(units), 64)), dtype=np.int64)
            grown[:, : self._n] = self._columns[:, : self._n]
            self._columns = grown
        session_of = self._session_of
        for k, unit in enumerate(units, start=self._n):
            key = unit_speaker(unit)
            if key is not None and key not in self._keys:
                self._keys[key] = len(self._keys)
                self._names = None
            day = unit_day(unit)
            self._columns[:, k] = (
                self._keys[key] if key is not None else -1,
                day,
                session_of.setdefault(day, len(session_of)),
            )
        self._n += len(units)

    def truncate(self, n: int) -> None:
        """Keep the facts of the first ``n`` units (a refresh rebuilds the rest; session numbers stay as given)."""
        self._n = min(self._n, n)

    @property
    def names(self) -> list[str]:
        """The speaker name of each code (a participant's name as its newest record gives it)."""
        if self._names is None:
            self._names = speaker_names(list(self._keys), self._people)
        return self._names

    def arrays(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``(speakers, days, sessions)`` as int64 arrays, one entry per unit (read-only views; nothing copied)."""
        speakers, days, sessions = self._columns[:, : self._n]
        for column in (speakers, days, sessions):
            column.flags.writeable = False
        return speakers, days, sessions

    def signals(self, speaker_boost: float, date_boost: float, session_boost: float) -> tuple[str, ...]:
        """The relevance signals that can act on these units with the given boosts, as a manifest names them.

        ``speaker`` when the units have two or more speaker names, ``date`` and ``session`` when they were
        written on two or more days (with one name or one day every unit would be scaled alike); each only when
        its boost is above 0.
        """
        out: list[str] = []
        if speaker_boost > 0 and len(set(self.names)) >= 2:
            out.append("speaker")
        sessions = self.arrays()[2]
        several_days = bool(len(sessions)) and int(sessions.min()) != int(sessions.max())
        if date_boost > 0 and several_days:
            out.append("date")
        if session_boost > 0 and several_days:
            out.append("session")
        return tuple(out)
