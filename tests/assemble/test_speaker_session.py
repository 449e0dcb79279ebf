"""Relevance signals from who said a unit and on which day: the named speaker and the session of a strong hit."""

from __future__ import annotations

import dataclasses
from datetime import UTC, datetime, timedelta

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from ctxledger.assemble.dates import with_session
from ctxledger.assemble.facets import UnitFacets
from ctxledger.assemble.query import unit_relevance
from ctxledger.assemble.snapshot import SnapshotLoader
from ctxledger.assemble.speakers import named_speaker, with_speaker, without_speaker
from ctxledger.errors import InvalidSetting
from ctxledger.ledger import Ledger
from ctxledger.policy.base import SelectionParams
from ctxledger.policy.default import default_policy
from ctxledger.records import Message, Participant, Role
from ctxledger.scenarios import GraphBuilder
from ctxledger.testing import MemoryStore
from ctxledger.units import build_units

scores_st = st.lists(st.floats(0, 10, allow_nan=False), min_size=1, max_size=12)


def test_a_query_names_one_speaker_as_a_whole_word_in_its_case() -> None:
    names = ["Caroline", "Melanie", "Mel"]
    assert named_speaker("What did Melanie paint?", names) == "Melanie"
    assert named_speaker("What did Caroline and Melanie do?", names) is None  # several: about both
    assert named_speaker("What did melanie paint?", names) is None
    assert named_speaker("What did she paint?", names) is None
    assert named_speaker("Where is Mel's studio?", names) == "Mel"


@settings(max_examples=60, deadline=None)
@given(scores_st, st.data(), st.floats(0, 3, allow_nan=False))
def test_with_speaker_scales_only_the_named_speakers_units(scores: list[float], data, boost: float) -> None:
    base = np.array(scores)
    codes = np.array(data.draw(st.lists(st.integers(-1, 2), min_size=len(base), max_size=len(base))))
    names = ["Ann", "Bob", "Ann"]  # two keys with one name (a message's name and a participant's)
    out = with_speaker(base, named_speaker("What did Ann cook?", names), codes, names, boost)
    ann = np.isin(codes, [0, 2])
    assert np.allclose(out[ann], base[ann] * (1 + boost))
    assert np.array_equal(out[~ann], base[~ann])
    assert np.array_equal(with_speaker(base, named_speaker("Did Ann and Bob cook?", names), codes, names, boost), base)
    assert np.array_equal(with_speaker(base, "Ann", codes, names, 0.0), base)


def test_the_topic_part_of_a_query_leaves_out_the_named_speaker() -> None:
    destress = without_speaker("What does Melanie do to destress?", "Melanie")
    assert destress.split() == ["What", "does", "do", "to", "destress?"]
    assert without_speaker("What is Caroline's identity?", "Caroline").split() == ["What", "is", "identity?"]
    assert without_speaker("What did Melanie paint?", None) == "What did Melanie paint?"
    assert without_speaker("Is Melanies dog big?", "Melanie") == "Is Melanies dog big?"  # another word


@settings(max_examples=60, deadline=None)
@given(scores_st, st.data(), st.floats(0, 3, allow_nan=False))
def test_with_session_lifts_each_unit_by_its_sessions_best_share(scores: list[float], data, boost: float) -> None:
    base = np.array(scores)
    sessions = np.array(data.draw(st.lists(st.integers(0, 3), min_size=len(base), max_size=len(base))))
    out = with_session(base, sessions, boost)
    top = base.max()
    for i, s in enumerate(sessions):
        best = base[sessions == s].max() / top if top > 0 else 0.0
        assert np.isclose(out[i], base[i] * (1 + boost * best))
    one_day = with_session(base, np.zeros(len(base), dtype=np.int64), boost)
    assert np.allclose(one_day, base * (1 + boost) if top > 0 else base)  # one session: the ranking is kept


def _message(i: int, day: int, name: str | None = None, owner: str | None = None) -> Message:
    return Message(
        id=f"m{i}",
        role=Role.USER,
        content=f"turn {i}",
        name=name,
        owner_participant_id=owner,
        tenant_id="t",
        conversation_id="c",
        branch_id="b",
        created_at=datetime(2024, 1, 1, 12, tzinfo=UTC) + timedelta(days=day),
    )


@settings(max_examples=40, deadline=None)
@given(
    st.lists(st.tuples(st.integers(0, 3), st.sampled_from([None, "Ann", "Bob"]), st.booleans()), max_size=14),
    st.integers(0, 14),
)
def test_facets_extended_in_pieces_equal_facets_built_at_once(turns, cut: int) -> None:
    """A snapshot's facets grow with its units; truncating and extending gives what a fresh build gives."""
    records = [Participant(id="p", name="Pat", tenant_id="t", conversation_id="c", branch_id="b")]
    records += [_message(i, d, n, "p" if owned else None) for i, (d, n, owned) in enumerate(turns)]
    units, _ = build_units(records, bytes)
    whole = UnitFacets()
    whole.extend(units, records)
    parts = UnitFacets()
    cut = min(cut, len(units))
    parts.extend(units, records)
    parts.truncate(cut)
    parts.extend(units[cut:], records)
    speakers, days, sessions = whole.arrays()
    assert len(whole) == len(units)
    assert [whole.names[c] if c >= 0 else None for c in speakers] == [
        n or ("Pat" if owned else None) for _, n, owned in turns
    ]
    assert list(days) == [u.records[0].created_at.date().toordinal() for u in units]
    for a, b in zip(parts.arrays(), whole.arrays(), strict=True):
        assert np.array_equal(a, b)
    assert all((sessions == sessions[i]).tolist() == (days == days[i]).tolist() for i in range(len(units)))


def _two_speakers(g: GraphBuilder) -> None:
    """Two people on two days; each says one thing about painting, Melanie's on the first day."""
    g.user("mel-paint", "I finished a painting of the lake at sunset.", speaker="Melanie")
    g.assistant("car-ok", "That sounds peaceful.", speaker="Caroline")
    for i in range(6):
        g.user(f"m{i}", f"Errand number {i}: groceries and the post office.", speaker="Melanie")
        g.assistant(f"c{i}", f"Reply {i}: good luck with those.", speaker="Caroline")
    g.tick(60 * 24)
    g.assistant("car-paint", "I started a painting class at the community centre.", speaker="Caroline")
    g.user("mel-ok", "Fun, tell me more next time.", speaker="Melanie")


def test_the_named_speakers_turn_ranks_above_the_other_speakers_and_the_manifest_says_so() -> None:
    ledger = Ledger(MemoryStore())
    g = GraphBuilder(ledger, "pair")
    _two_speakers(g)
    ask = {"now": g.now, "window_tokens": 60, "output_tokens": 0, "margin_tokens": 0}
    on = ledger.assemble(g.conversation_id, query="What did Melanie paint?", persist=False, **ask)
    included = {e["external_id"] for e in on.manifest["included"]}
    assert "mel-paint" in included
    assert on.manifest["policy"]["relevance"].endswith("+speaker+date+session")
    off = dataclasses.replace(default_policy(), selection=SelectionParams(speaker_boost=0.0, session_boost=0.0))
    ledger.policy = off
    plain = ledger.assemble(g.conversation_id, query="What did Melanie paint?", persist=False, **ask)
    assert "+speaker" not in plain.manifest["policy"]["relevance"]
    assert "+session" not in plain.manifest["policy"]["relevance"]
    assert plain.manifest["policy"]["hash"] != on.manifest["policy"]["hash"]


def test_one_speaker_on_one_day_names_no_signal() -> None:
    ledger = Ledger(MemoryStore())
    g = GraphBuilder(ledger, "solo")
    g.user("u", "Remind me to water the plants.")
    g.assistant("a", "Noted.")
    asm = ledger.assemble(g.conversation_id, now=g.now, window_tokens=400, output_tokens=0, margin_tokens=0)
    assert asm.manifest["policy"]["relevance"].split("+")[0] == "bm25"
    assert not {"speaker", "date", "session"} & set(asm.manifest["policy"]["relevance"].split("+"))


def test_a_refreshed_snapshot_keeps_facets_aligned_with_its_units() -> None:
    ledger = Ledger(MemoryStore())
    g = GraphBuilder(ledger, "grow")
    loader = SnapshotLoader(ledger.store)
    g.user("first", "Hello there.", speaker="Ann")
    snap = loader.load("default", g.conversation_id, g.branch_id)
    assert len(snap.facets) == len(snap.units)
    g.tick(60 * 30)
    g.assistant("second", "Hi Ann.", speaker="Bob")
    g.tool("t", "lookup", {"q": "x"}, '{"ok": true}')
    snap = loader.load("default", g.conversation_id, g.branch_id)
    fresh = SnapshotLoader(ledger.store).load("default", g.conversation_id, g.branch_id)
    assert len(snap.facets) == len(snap.units) == len(fresh.units)
    for a, b in zip(snap.facets.arrays(), fresh.facets.arrays(), strict=True):
        assert np.array_equal(a, b)
    assert snap.facets.names == fresh.facets.names


def test_negative_boosts_are_refused() -> None:
    for key in ("speaker_boost", "session_boost"):
        try:
            SelectionParams(**{key: -0.1})
        except InvalidSetting as exc:
            assert key in str(exc)
        else:
            raise AssertionError(f"{key} = -0.1 was accepted")


_PAIR = Ledger(MemoryStore())
_PAIR_GRAPH = GraphBuilder(_PAIR, "pair-order")
_two_speakers(_PAIR_GRAPH)


@settings(max_examples=25, deadline=None)
@given(st.floats(0.1, 3.0, allow_nan=False), st.sampled_from(["What did Melanie paint?", "Where did Melanie post?"]))
def test_the_speaker_boost_weighs_a_unit_itself_not_the_turns_around_it(boost: float, query: str) -> None:
    """The named speaker's units count ``1 + boost`` times after the neighbour spread: the other speaker's turn
    next to a hit of hers gains nothing from her boost (the spread carries the topic, the boost the speaker)."""
    snap = SnapshotLoader(_PAIR.store).load("default", _PAIR_GRAPH.conversation_id, _PAIR_GRAPH.branch_id)
    speakers, _, _ = snap.facets.arrays()
    names = snap.facets.names
    mel = np.isin(speakers, [i for i, n in enumerate(names) if n == "Melanie"])
    plain = SelectionParams(speaker_boost=0.0, session_boost=0.0, date_boost=0.0, semantic_weight=0.0)
    boosted = dataclasses.replace(plain, speaker_boost=boost)
    off = unit_relevance(query, snap.index, snap.vectors, snap.facets, len(snap.units), plain)
    on = unit_relevance(query, snap.index, snap.vectors, snap.facets, len(snap.units), boosted)
    assert off.max() > 0
    expected = off * (1 + boost * mel)
    np.testing.assert_allclose(on, expected / expected.max())
