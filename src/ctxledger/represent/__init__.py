"""Representations of tool output and history: excerpts, extractions, compactions, references.

Selection lets each unit enter as verbatim, excerpt, structured extraction, compact memory or
summary, reference, or not at all; seed 002 ("Qué hacer cuando una pieza útil no cabe") names the risk of
each. This package builds those representations as pure functions over bytes and records, so the
selector can cost them and choose:

* :func:`make_excerpt`: a bounded excerpt that keeps errors, focus lines, head and tail, with
  :class:`Locator` s back to the exact bytes;
* :func:`extract` / :func:`promote`: a ToolMemory with provenance locators (JSON, CSV, logs, test runs,
  search results), and the policy decision to use it;
* :func:`compact` / :func:`compact_checked` / :class:`LLMCompactor`: a compaction with lineage whose
  fidelity to the run's invariants is checked;
* :func:`find_redundant` / :func:`find_repeated_calls` / :func:`outcome_lines`: what enters once;
* :func:`rehydrate`: the exact stored bytes behind any locator or reference.

``LLMCompactor`` is imported lazily (it needs the ``llm`` extra).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ctxledger.represent._lines import LineIndex, Locator
from ctxledger.represent.compaction import (
    FidelityReport,
    Invariants,
    Item,
    check_fidelity,
    compact,
    compact_checked,
    find_invariants,
)
from ctxledger.represent.excerpt import Excerpt, Excerpter, make_excerpt
from ctxledger.represent.extract import extract
from ctxledger.represent.promote import promote
from ctxledger.represent.redundancy import find_redundant, find_repeated_calls, outcome_lines
from ctxledger.represent.rehydrate import parse_byte_range, rehydrate

if TYPE_CHECKING:
    from ctxledger.represent.llm_compactor import LLMCompactor


def __getattr__(name: str) -> Any:
    """Import :class:`LLMCompactor` on first use."""
    if name == "LLMCompactor":
        from ctxledger.represent.llm_compactor import LLMCompactor

        return LLMCompactor
    raise AttributeError(name)


__all__ = [
    "Excerpt",
    "Excerpter",
    "FidelityReport",
    "Invariants",
    "Item",
    "LLMCompactor",
    "LineIndex",
    "Locator",
    "check_fidelity",
    "compact",
    "compact_checked",
    "extract",
    "find_invariants",
    "find_redundant",
    "find_repeated_calls",
    "make_excerpt",
    "outcome_lines",
    "parse_byte_range",
    "promote",
    "rehydrate",
]
