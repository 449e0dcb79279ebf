"""Protection by wording: instructions and stated wishes are constraints; reports of fact are not."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ctxledger.policy.stages.protection import PROHIBITION, _may_prohibit, _prohibits, wording_reason


@pytest.mark.parametrize(
    "text",
    [
        "Do not push anything to the remote.",
        "Thanks. Don't touch the prod database.",
        "Never use sudo on this machine.",
        "Please avoid the main branch.",
        "You must not delete the backups.",
        "I don't want travel insurance.",
        "We do not need extra baggage.",
        "I'd rather not be transferred.",
    ],
)
def test_instructions_and_wishes_are_constraints(text: str) -> None:
    """Imperative prohibitions, modal prohibitions and negated wishes protect the turn as a user constraint."""
    assert wording_reason(text) == "user_constraint"


@pytest.mark.parametrize(
    "text",
    [
        "I don't remember the reservation ID, sorry.",
        "I never knew turtles could be so interesting!",
        "Sometimes it's hard when things don't go my way.",
        "Don't worry, I won't let anything get me down.",
        "Don’t get me wrong: I love discussing data structures.",
        "Animals bring a lot of joy, don't they?",
        "The hats don't bother them at all.",
    ],
)
def test_reports_of_fact_are_not_constraints(text: str) -> None:
    """A negative word in a statement of fact, reassurance or tag question is not a constraint."""
    assert wording_reason(text) is None


def test_corrections_open_the_message() -> None:
    """'No, …' and 'Actually …' at the start are corrections; the same words later are not."""
    assert wording_reason("No, I meant the docs folder only.") == "user_correction"
    assert wording_reason("Actually, book the later flight.") == "user_correction"
    assert wording_reason("I said no, twice.") is None


def test_real_tau_bench_constraints_are_kept_and_missing_ids_are_not(data_dir) -> None:
    """On the real airline trajectories the time constraint is protected, 'I don't have my reservation ID' is not."""
    runs = json.loads((data_dir / "tau-bench" / "gpt-4o-airline_tasks0-39.json").read_text(encoding="utf-8"))
    texts = {m["content"] for run in runs for m in run["traj"] if m["role"] == "user" and m.get("content")}
    wanted = (
        "Neither of those options works for me as I don't want to fly before 11 AM EST. Do you have any later flights?"
    )
    assert wanted in texts and wording_reason(wanted) == "user_constraint"
    missing_id = [t for t in texts if "don't have my reservation ID" in t]
    assert missing_id and all(wording_reason(t) is None for t in missing_id)
    protected = [t for t in texts if wording_reason(t) == "user_constraint"]
    assert 10 <= len(protected) <= 30


_PHRASES = (
    "do not",
    "don't",
    "dont",
    "don’t",
    "never",
    "avoid",
    "must not",
    "mustn't",
    "may not",
    "not allowed",
    "under no circumstances",
    "under no circumſtances",
    "I would not want",
    "we won't need",
    "I'd rather not",
    "we would rather not",
    "please",
    "and ",
    "but ",
    "so ",
    "no worries",
    "nothing",
    "note",
    "knot",
    "ı",
    "İ",
)


@given(
    pieces=st.lists(
        st.one_of(st.sampled_from(_PHRASES), st.text(max_size=12), st.sampled_from([".", "!", "?", ";", ":", "\n"])),
        max_size=10,
    ),
    upper=st.lists(st.booleans(), max_size=10),
)
@settings(max_examples=400, deadline=None)
def test_the_word_prefilter_never_hides_a_prohibition(pieces: list[str], upper: list[bool]) -> None:
    """Whenever the prohibition regex matches, the substring prefilter lets the text through to it."""
    cased = [p.upper() if up else p for p, up in zip(pieces, upper + [False] * len(pieces), strict=False)]
    text = " ".join(cased)
    if PROHIBITION.search(text):
        assert _may_prohibit(text)


@given(
    pieces=st.lists(
        st.one_of(
            st.sampled_from(_PHRASES),
            st.text(max_size=12),
            st.sampled_from([".", "!", "?", ";", ":", "\n", "\t", "  ", "I", "we", "i'd", "rather", "want", "x"]),
        ),
        max_size=12,
    ),
    upper=st.lists(st.booleans(), max_size=12),
    glue=st.sampled_from([" ", "", "\n", ". "]),
)
@settings(max_examples=600, deadline=None)
def test_the_anchored_search_finds_what_the_regex_finds(pieces: list[str], upper: list[bool], glue: str) -> None:
    """Looking only where a prohibition's words are gives the regex's answer, on any text."""
    cased = [p.upper() if up else p for p, up in zip(pieces, upper + [False] * len(pieces), strict=False)]
    text = glue.join(cased)
    assert _prohibits(text) == (PROHIBITION.search(text) is not None)


def test_the_anchored_search_agrees_with_the_regex_on_real_turns(data_dir) -> None:
    """Every user turn of the real airline trajectories gets the regex's answer (some of them are constraints)."""
    runs = json.loads((data_dir / "tau-bench" / "gpt-4o-airline_tasks0-39.json").read_text(encoding="utf-8"))
    texts = sorted({m["content"] for run in runs for m in run["traj"] if m["role"] == "user" and m.get("content")})
    assert any(PROHIBITION.search(t) for t in texts)
    assert [_prohibits(t) for t in texts] == [PROHIBITION.search(t) is not None for t in texts]
