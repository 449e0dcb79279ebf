"""The manifest's omission groups: counts, bounds and runs of consecutive candidates, per (reason, stage)."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from ctxledger.manifest import MAX_RANGES, summarize_omissions


def _reference(omitted: list[tuple[str, str, int]], seqs: list[int]) -> list[tuple]:
    """The groups by definition: walk each group's seqs in order, extending a run while the next one is the
    candidate right after the run's last (by its last position among the candidates)."""
    rank = {s: i for i, s in enumerate(seqs)}
    by_key: dict[tuple[str, str], list[int]] = {}
    for reason, stage, seq in omitted:
        by_key.setdefault((reason, stage), []).append(seq)
    out = []
    for (reason, stage), found in sorted(by_key.items()):
        found = sorted(found)
        runs: list[list[int]] = []
        for seq in found:
            if runs and seq in rank and runs[-1][1] in rank and rank[seq] == rank[runs[-1][1]] + 1:
                runs[-1][1] = seq
            elif runs and seq == runs[-1][1]:
                continue
            else:
                runs.append([seq, seq])
        listed = tuple((a, b) for a, b in runs[:MAX_RANGES])
        out.append((reason, stage, len(found), found[0], found[-1], listed, max(0, len(runs) - MAX_RANGES)))
    return out


@st.composite
def _omissions(draw: st.DrawFn) -> tuple[list[tuple[str, str, int]], list[int]]:
    seqs = sorted(draw(st.lists(st.integers(0, 200), max_size=120)))
    pool = st.sampled_from(seqs) if seqs and draw(st.booleans()) else st.integers(0, 220)
    keys = st.tuples(st.sampled_from(["budget", "secret", "stale"]), st.sampled_from(["selection", "filter"]))
    omitted = draw(st.lists(st.tuples(keys, pool), max_size=150))
    return [(r, s, q) for (r, s), q in omitted], seqs


@given(_omissions())
def test_groups_match_their_definition(case: tuple[list[tuple[str, str, int]], list[int]]) -> None:
    omitted, seqs = case
    got = [
        (g.reason, g.stage, g.count, g.first_seq, g.last_seq, g.ranges, g.more_ranges)
        for g in summarize_omissions(omitted, seqs)
    ]
    assert got == _reference(omitted, seqs)


def test_a_run_breaks_at_a_candidate_of_another_group() -> None:
    omitted = [("budget", "selection", 1), ("secret", "secrets", 2), ("budget", "selection", 3)]
    [budget, secret] = summarize_omissions(omitted, [1, 2, 3])
    assert budget.ranges == ((1, 1), (3, 3)) and secret.ranges == ((2, 2),)
    [whole] = summarize_omissions([("budget", "selection", s) for s in (1, 2, 3)], [1, 2, 3])
    assert whole.ranges == ((1, 3),) and whole.count == 3
