"""The detectors' reading of regex structure: top-level alternatives and group ends, on generated patterns."""

from __future__ import annotations

import re

from hypothesis import given, settings
from hypothesis import strategies as st

from ctxledger.policy.regex_shape import alternatives, group_end

# atoms that hold the characters of structure where they are not structure: escaped, or inside a class
_ATOM = st.one_of(
    st.sampled_from(["a", "b", ".", "x*", "\\d+"]),
    st.sampled_from(["\\|", "\\(", "\\)", "\\[", "\\]", "\\\\"]),
    st.lists(st.sampled_from(["a", "|", "(", ")", "\\[", "\\]", "\\\\"]), min_size=1, max_size=4, unique=True).map(
        lambda members: "[" + "".join(members) + "]"
    ),
)


def _sequence(inner: st.SearchStrategy[str]) -> st.SearchStrategy[str]:
    return st.lists(st.one_of(_ATOM, inner), min_size=1, max_size=4).map("".join)


_GROUP = st.recursive(
    _ATOM.map(lambda a: f"({a})"),
    lambda inner: st.tuples(
        st.sampled_from(["(", "(?:", "(?i:", "(?P<n>"]), st.lists(_sequence(inner), min_size=1, max_size=3)
    ).map(lambda t: t[0] + "|".join(t[1]) + ")"),
    max_leaves=8,
)


@given(branches=st.lists(_sequence(_GROUP), min_size=1, max_size=4))
@settings(max_examples=300, deadline=None)
def test_alternatives_are_the_top_level_branches(branches: list[str]) -> None:
    """Joining branches with ``|`` and splitting again gives the branches, whatever they hold inside."""
    pattern = "|".join(branches)
    re.compile(pattern.replace("(?P<n>", "(?:"))  # the generated patterns are regexes
    assert alternatives(pattern) == branches


@given(group=_GROUP, tail=_sequence(_GROUP))
@settings(max_examples=300, deadline=None)
def test_a_group_ends_at_its_own_closing_parenthesis(group: str, tail: str) -> None:
    """The ``)`` that closes a leading group is found, not one inside it or after it; an open group gives -1."""
    assert group_end(group + tail, 0) == len(group) - 1
    assert group_end(group[:-1], 0) == -1
