"""Tool results read on first use: a snapshot reads a result's bytes only when something asks for its content.

The reference is the same history read eagerly (a blob store that cannot say which blobs are stored, so every
result is read while its unit is built): payloads and manifests must not differ, whatever blobs are gone or
damaged, and the bytes of results an assembly never looks at must not be read. Histories are generated; stores
are real (a blob folder with its pack).
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ctxledger.errors import IntegrityError
from ctxledger.ledger import Ledger
from ctxledger.records import ToolArtifact
from ctxledger.scenarios._graph import GraphBuilder
from ctxledger.serialize.base import Turn
from ctxledger.store import open_store
from ctxledger.units import DeferredToolTurn, build_units, unavailable_text

WINDOW = 6_000


class CountingBlobs:
    """A blob store that counts the reads of each name; ``listing`` false hides ``deferrable`` (eager reads)."""

    def __init__(self, blobs: Any, *, listing: bool = True) -> None:
        self._blobs = blobs
        self.reads: dict[str, int] = {}
        if listing:
            self.deferrable = blobs.deferrable

    def get(self, sha256: str) -> bytes:
        self.reads[sha256] = self.reads.get(sha256, 0) + 1
        return self._blobs.get(sha256)  # type: ignore[no-any-return]

    def get_many(self, names: list[str]) -> dict[str, bytes]:
        for sha in names:
            self.reads[sha] = self.reads.get(sha, 0) + 1
        return self._blobs.get_many(names)  # type: ignore[no-any-return]

    def __getattr__(self, name: str) -> Any:
        if name == "deferrable":  # not listing: the snapshot reads every result while building its units
            raise AttributeError(name)
        return getattr(self._blobs, name)


def _history(folder: Path, outputs: list[int]) -> tuple[GraphBuilder, list[ToolArtifact]]:
    """A conversation of tool exchanges whose outputs have ``outputs[i]`` log rows, written to ``folder``."""
    store = open_store(f"sqlite:///{folder}/h.db", blobs_dir=folder / "blobs")
    ledger = Ledger(store)
    g = GraphBuilder(ledger, "deferred")
    g.system("sys", "You are a careful build engineer.")
    g.user("u0", "The nightly build fails; find out why.")
    for i, rows in enumerate(outputs):
        g.tool(f"t{i}", "read_log", {"part": i}, json.dumps([f"step {i} log line {k} ok" for k in range(rows)]))
    g.user("ulast", "What is the cause of the failure?")
    arts = [r for r in store.records("default", g.conversation_id) if isinstance(r, ToolArtifact)]
    for art in arts:  # as an import writes them: into the pack (a blob put alone is a file, read at once)
        data = store.blobs.get(art.sha256)
        store.blobs.path(art.sha256).unlink()
        store.blobs.put_many([(data, art.media_type)])
    return g, arts


def _fresh(g: GraphBuilder, *, listing: bool) -> tuple[Ledger, CountingBlobs]:
    """A new ledger over the history's records and blob folder (a new process's first call, in effect)."""
    old = g.ledger.store
    store = open_store(old.engine.url.render_as_string(hide_password=False), blobs_dir=old.blobs.root)
    counting = CountingBlobs(store.blobs, listing=listing)
    store.blobs = counting
    return Ledger(store), counting


def _assembled(ledger: Ledger, g: GraphBuilder) -> tuple[Any, dict[str, Any]]:
    asm = ledger.assemble(
        g.conversation_id, window_tokens=WINDOW, output_tokens=500, margin_tokens=100, branch_id=g.branch_id, now=g.now
    )
    manifest = {k: v for k, v in asm.manifest.items() if k not in ("id", "created_at", "timings", "graph_ms")}
    return asm.payload, json.loads(json.dumps(manifest, default=str))


def _damage(g: GraphBuilder, arts: list[ToolArtifact], fates: list[str]) -> None:
    blobs = g.ledger.store.blobs
    for art, fate in zip(arts, fates, strict=False):
        if fate == "deleted":
            blobs.delete(art.sha256)
        elif fate == "changed":  # a file in the blob's place is read before the pack
            path = blobs.path(art.sha256)
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(b'{"balance": 1000000}')


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    outputs=st.lists(st.integers(1, 120), min_size=2, max_size=14),
    fates=st.lists(st.sampled_from(["kept", "kept", "deleted", "changed"]), max_size=14),
)
def test_deferred_reads_give_the_payload_and_manifest_of_eager_reads(
    tmp_path_factory: pytest.TempPathFactory, outputs: list[int], fates: list[str]
) -> None:
    g, arts = _history(tmp_path_factory.mktemp("h"), outputs)
    _damage(g, arts, fates)
    eager, _ = _fresh(g, listing=False)
    deferred, _ = _fresh(g, listing=True)
    assert _assembled(deferred, g) == _assembled(eager, g)
    # the next call of the same ledger (its snapshot cached, some results read by now) too
    assert _assembled(deferred, g) == _assembled(eager, g)


def test_results_an_assembly_never_looks_at_are_never_read(tmp_path: Path) -> None:
    g, arts = _history(tmp_path, [400] * 30)
    _assembled(g.ledger, g)  # an earlier process's call: the outputs' token counts are stored
    ledger, counting = _fresh(g, listing=True)
    asm = ledger.assemble(
        g.conversation_id, window_tokens=WINDOW, output_tokens=500, margin_tokens=100, branch_id=g.branch_id, now=g.now
    )
    shown = {a.sha256 for a in arts if a.id in asm.turn_refs}
    assert shown and len(shown) < len(arts)  # the window holds a few of the outputs, not all
    read = set(counting.reads)
    assert shown <= read
    # read: those shown and those the filter's stages rendered (delimited as data) on the way
    assert len(read) < len(arts), f"{len(read)} of {len(arts)} outputs read for {len(shown)} shown"
    assert all(n == 1 for n in counting.reads.values())  # what is read is read once
    eager, everything = _fresh(g, listing=False)
    eager.assemble(
        g.conversation_id, window_tokens=WINDOW, output_tokens=500, margin_tokens=100, branch_id=g.branch_id, now=g.now
    )
    assert set(everything.reads) == {a.sha256 for a in arts}  # the reference reads every output


def _unit_turn(tmp_path: Path, read: Any) -> tuple[DeferredToolTurn, dict[str, str], ToolArtifact]:
    g, arts = _history(tmp_path, [3])
    records = g.ledger.store.records("default", g.conversation_id)
    units, _ = build_units(records, read, deferred={arts[0].sha256})
    unit = next(u for u in units if arts[0].id in u.record_ids)
    turn = unit.turns[-1]
    assert isinstance(turn, DeferredToolTurn) and not turn.loaded
    return turn, unit.transforms, arts[0]


def test_bytes_damaged_after_the_snapshot_show_the_mismatch_reference(tmp_path: Path) -> None:
    def damaged(sha: str) -> bytes:
        raise IntegrityError(f"blob {sha} does not hash to its name")

    turn, transforms, art = _unit_turn(tmp_path, damaged)
    assert transforms == {}
    assert turn.content == unavailable_text(art, "blob_mismatch")
    assert transforms == {art.id: "blob_mismatch"}


def test_a_deferred_turn_is_the_turn_it_stands_for(tmp_path: Path) -> None:
    reads: list[str] = []
    g_blobs: list[Any] = []

    def read(sha: str) -> bytes:
        reads.append(sha)
        return g_blobs[0].get(sha)  # type: ignore[no-any-return]

    g, _ = _history(tmp_path / "h", [3])
    g_blobs.append(g.ledger.store.blobs)
    turn, _, art = _unit_turn(tmp_path / "u", read)
    text = g.ledger.store.blobs.get(art.sha256).decode()
    plain = Turn(
        ref=art.id, role="tool", content=text, tool_call_id=turn.tool_call_id, tool_name=turn.tool_name, is_error=False
    )
    assert turn.role == "tool" and reads == []  # its other fields are there without a read
    assert turn == plain and plain == turn and hash(turn) == hash(plain)
    assert reads == [art.sha256] and turn.loaded
    assert turn.content is turn.content and reads == [art.sha256]  # read once, kept
    changed = dataclasses.replace(turn, content="excerpt")
    assert changed.content == "excerpt" and changed.tool_call_id == turn.tool_call_id and changed != turn
