"""Small graphs for the policy tests: a ledger with a system prompt, and the fate of each record."""

from __future__ import annotations

from typing import Any

from ctxledger.ledger import Ledger
from ctxledger.scenarios._graph import GraphBuilder
from ctxledger.testing import MemoryStore


def graph(
    policy: Any = None, *, system_visibility: str = "branch", **ledger_kwargs: Any
) -> tuple[Ledger, GraphBuilder]:
    """An in-memory ledger (under ``policy``) and a builder for conversation ``t`` holding one system prompt."""
    ledger = Ledger(MemoryStore(), policy=policy, **ledger_kwargs)
    g = GraphBuilder(ledger, "t")
    g.system("sys", "Be brief.", visibility=system_visibility)
    return ledger, g


def fates(asm: Any, g: GraphBuilder) -> tuple[set[str], dict[str, str]]:
    """``(included short names, {omitted short name: reason})`` of an assembly over ``g``'s records."""
    ext = {r.id: r.external_id for r in g.records.values()}
    inc = {ext[e["ref"]] for e in asm.manifest["included"] if e["ref"] in ext}
    out = {ext[e["ref"]]: e["reason"] for e in asm.manifest["omitted"] if e["ref"] in ext}
    return inc, out
