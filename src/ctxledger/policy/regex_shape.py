"""The outer structure of a regular expression: its top-level alternatives and where a group closes.

The detectors derive cheaper searches from their own patterns (:mod:`ctxledger.policy.secrets`: a
case-sensitive form of a ``(?i:…)`` alternative for case-folded text; :mod:`ctxledger.policy.injection`: the
literal every match starts with), and both need to know which ``|`` and ``)`` belong to which level. In Python
``re`` syntax a character after a backslash, or inside a character class, is never structure. A class's
leading ``]`` (``[]a]``) is not recognised: the detectors' patterns escape it.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator


def structure(pattern: str, start: int = 0) -> Iterator[tuple[int, str, int]]:
    """Each ``(``, ``)`` and ``|`` of ``pattern`` from index ``start`` that is syntax, as ``(index, char, depth)``.

    ``depth`` is the number of groups open around the character (counted from ``start``): for ``(`` before it
    opens, for ``)`` after it closes, so a group and its closing parenthesis have the same depth.
    """
    depth, i, in_class = 0, start, False
    while i < len(pattern):
        c = pattern[i]
        if c == "\\":
            i += 2
            continue
        if in_class:
            in_class = c != "]"
        elif c == "[":
            in_class = True
        elif c == "(":
            yield i, c, depth
            depth += 1
        elif c == ")":
            depth -= 1
            yield i, c, depth
        elif c == "|":
            yield i, c, depth
        i += 1


def alternatives(pattern: str) -> list[str]:
    """The top-level alternatives of ``pattern``, split at each ``|`` outside groups and classes (one or more)."""
    cuts = [i for i, c, depth in structure(pattern) if c == "|" and depth == 0]
    bounds = [-1, *cuts, len(pattern)]
    return [pattern[a + 1 : b] for a, b in itertools.pairwise(bounds)]


def group_end(pattern: str, start: int) -> int:
    """The index of the ``)`` closing the group opened at ``pattern[start]``; ``-1`` when it is not closed."""
    return next((i for i, c, depth in structure(pattern, start) if c == ")" and depth == 0), -1)
