"""Redundancy: repeated calls and near-duplicate tool outputs enter the context once.

Selection subtracts redundancy from utility, and the manifest has the omission reason ``redundant``. Two
detectors, both deterministic and both keeping the *newest* copy (the latest observation is the one that
describes the current state; the older copies are omitted with a pointer to it):

* :func:`find_repeated_calls`: the same tool, the same arguments (compared as canonical JSON) and the same
  output sha256;
* :func:`find_redundant`: texts that are identical, or near-duplicates: Jaccard similarity of their word
  3-gram shingles at least ``threshold``, estimated with ``datasketch`` MinHash (128 permutations, fixed
  seed, so the same inputs always give the same answer) and found through MinHash LSH, so long histories
  are not compared pairwise, **and** the same :func:`outcome` (outcome lines and values). Two test runs that
  differ in one line, ``=== 1 failed, 400 passed ===`` against ``=== 401 passed ===``, are alike by shingles
  yet report different results; both are kept. So are two bookings whose outputs differ only in the
  reservation id (``HATHAT`` against ``HATHAU``): each created a reservation. What may differ between
  near-duplicates is wording and the parts that change between equal runs (timestamps, durations,
  addresses).

An older item is pointed only at a newer item it is itself similar to (never through a chain), and never
at another redundant item. Redundancy must not be applied to protected items (failed calls, pending
operations); that is the assembler's rule, not this module's.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Sequence
from typing import TYPE_CHECKING

from ctxledger.errors import ConfigurationError
from ctxledger.hashing import sha256_hex
from ctxledger.json_text import canonical_or_raw
from ctxledger.records import ToolArtifact, ToolCall
from ctxledger.represent._patterns import ERROR_RE, SUMMARY_RE, VOLATILE_RE, exit_status, is_outcome_line

if TYPE_CHECKING:
    from datasketch import MinHash, MinHashLSH  # type: ignore[import-untyped]

NUM_PERM = 128
SEED = 1
SHINGLE_WORDS = 3
_TOKEN_RE = re.compile(r"\w+|[^\w\s]")
_VALUE_RE = re.compile(r"(?<![\w.-])(?:[\w.-]*\d[\w.-]*|[A-Z][A-Z0-9_]+)(?![\w.-])")


def shingles(text: str) -> set[str]:
    """Word 3-grams of a text (casefolded; punctuation marks are words); the whole text if shorter."""
    words = _TOKEN_RE.findall(text.casefold())
    if len(words) <= SHINGLE_WORDS:
        return {" ".join(words)}
    return {" ".join(words[i : i + SHINGLE_WORDS]) for i in range(len(words) - SHINGLE_WORDS + 1)}


@functools.lru_cache(maxsize=16)
def _lsh_params(threshold: float) -> tuple[int, int]:
    """LSH bands and rows for a threshold (datasketch optimises them numerically; done once per value).

    Above about 0.95 datasketch finds no banding with two or more bands; 4 bands of 32 rows then still
    propose a pair of similarity 0.99 with probability > 0.99 (candidates are verified anyway).
    """
    from datasketch import MinHashLSH

    try:
        lsh = MinHashLSH(threshold=threshold, num_perm=NUM_PERM)
    except ValueError:
        return 4, NUM_PERM // 4
    return lsh.b, lsh.r


def lsh_index(threshold: float) -> MinHashLSH:
    """An empty MinHash LSH index (:data:`NUM_PERM` permutations) for pairs of similarity at least ``threshold``.

    ``datasketch`` is imported on first use, here and in :func:`_minhash`: it loads SciPy (about a second of CPU),
    which a process that never compares tool outputs (the command line's ``--help``, an import) does not pay.
    """
    from datasketch import MinHashLSH

    return MinHashLSH(num_perm=NUM_PERM, params=_lsh_params(threshold))


def _minhash(text: str) -> MinHash:
    from datasketch import MinHash

    sketch = MinHash(num_perm=NUM_PERM, seed=SEED)
    sketch.update_batch([s.encode("utf-8") for s in sorted(shingles(text))])
    return sketch


def outcome_lines(text: str) -> frozenset[str]:
    """The outcome of a tool output: its distinct error and summary lines, normalised, plus its exit status.

    Outcome lines are those :func:`~ctxledger.represent._patterns.is_outcome_line` accepts: error lines
    (``FAILED``, ``Error:``, tracebacks …) and summary lines (``=== 1 failed, 400 passed ===``, ``Ran 12
    tests``, ``OK``). Each is stripped, and the parts that change between equal runs (timestamps, clock
    times, addresses, durations, per :data:`~ctxledger.represent._patterns.VOLATILE_RE`) become ``#``. The
    exit status (:func:`~ctxledger.represent._patterns.exit_status`) is added as ``exit status N``. Only
    lines a pattern matches are examined, so a long output costs one regular-expression scan.

    Args:
        text: a tool output.

    Returns:
        The set of normalised outcome lines (empty when the output reports no outcome).
    """
    starts: set[int] = set()
    for pattern in (ERROR_RE, SUMMARY_RE):
        for match in pattern.finditer(text):
            starts.add(text.rfind("\n", 0, match.start()) + 1)
    out: set[str] = set()
    for start in starts:
        end = text.find("\n", start)
        line = text[start : end if end != -1 else len(text)]
        if is_outcome_line(line):
            out.add(VOLATILE_RE.sub("#", line.strip()))
    status = exit_status(text)
    if status is not None:
        out.add(f"exit status {status}")
    return frozenset(out)


def outcome_values(text: str) -> frozenset[str]:
    """The values a tool output reports: its distinct numbers, identifiers and codes.

    A value is a run of word characters, dots and hyphens that holds a digit (``42``, ``3.5``, ``2024-05-01``,
    ``ord_81``), or a capitalised code of two or more characters (``HATHAT``, ``LAX``, ``PASSED``). The parts
    that change between equal runs (:data:`~ctxledger.represent._patterns.VOLATILE_RE`: timestamps, clock
    times, addresses, durations) are left out first, so a rerun that took longer reports the same values.
    """
    return frozenset(_VALUE_RE.findall(VOLATILE_RE.sub(" ", text)))


def outcome(text: str) -> tuple[frozenset[str], frozenset[str]]:
    """``(outcome_lines(text), outcome_values(text))``: what two near-duplicate outputs must share.

    Outputs alike by shingles that differ here report different results (a failing and a passing run) or
    different facts (two bookings, two reservation ids), and neither stands in for the other.
    """
    return outcome_lines(text), outcome_values(text)


def find_redundant(items: Sequence[tuple[str, str]], *, threshold: float = 0.9) -> dict[str, str]:
    """Map each redundant item id to the id of the newer item kept in its place.

    Args:
        items: ``(id, text)`` pairs in history order, oldest first; ``text`` is what would enter the
            context (e.g. a tool output). Ids must be unique.
        threshold: minimum estimated Jaccard similarity (0..1] of word 3-gram shingles for two texts
            to count as near-duplicates (they must also have the same :func:`outcome`); identical
            texts are always redundant.

    Returns:
        ``{redundant id: kept id}``; ids absent from the result are kept. Every kept id is newer than
        the ids that point to it and is itself kept.

    Raises:
        ConfigurationError: ``threshold`` outside (0, 1] or duplicate ids.
    """
    if not 0 < threshold <= 1:
        raise ConfigurationError(f"threshold must be in (0, 1], got {threshold}")
    if len({item_id for item_id, _ in items}) != len(items):
        raise ConfigurationError("find_redundant: item ids must be unique")
    lsh = lsh_index(threshold)
    sketches: dict[str, MinHash] = {}
    exact: dict[str, str] = {}
    order = {item_id: i for i, (item_id, _) in enumerate(items)}
    outcomes: dict[str, tuple[frozenset[str], frozenset[str]]] = {}
    redundant: dict[str, str] = {}
    for item_id, text in reversed(items):
        digest = sha256_hex(text.encode("utf-8"))
        if digest in exact:
            redundant[item_id] = exact[digest]
            continue
        sketch = _minhash(text)
        outcomes[item_id] = outcome(text)
        similar = [
            k
            for k in lsh.query(sketch)
            if sketch.jaccard(sketches[k]) >= threshold and outcomes[k] == outcomes[item_id]
        ]
        if similar:
            redundant[item_id] = max(similar, key=order.__getitem__)
            continue
        exact[digest] = item_id
        sketches[item_id] = sketch
        lsh.insert(item_id, sketch)
    return redundant


def call_key(call: ToolCall, artifact: ToolArtifact) -> tuple[str, str, str]:
    """``(tool name, canonical arguments, output sha256)`` identifying a repeated call.

    Arguments that do not decode (malformed, or nested too deep: :mod:`ctxledger.json_text`) are compared as
    written.
    """
    return call.name, canonical_or_raw(call.arguments), artifact.sha256


def find_repeated_calls(calls: Sequence[tuple[ToolCall, ToolArtifact | None]]) -> dict[str, str]:
    """Map each repeated call's record id to the newest identical call's record id.

    Args:
        calls: ``(call, its artifact or None)`` in history order, oldest first. Calls without an
            artifact (pending, deferred) are never redundant.

    Returns:
        ``{redundant call id: kept call id}`` for calls with the same name, arguments and output hash.
    """
    newest: dict[tuple[str, str, str], str] = {}
    redundant: dict[str, str] = {}
    for call, artifact in reversed(calls):
        if artifact is None:
            continue
        key = call_key(call, artifact)
        if key in newest:
            redundant[call.id] = newest[key]
        else:
            newest[key] = call.id
    return redundant
