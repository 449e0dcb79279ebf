"""Compaction coverage: history an included compaction (or restoring checkpoint) replaces is left out.

A compaction is a derived record with lineage: ``through_seq``, ``source_ids``); seed 002
"Compaction es una transformación, no memoria perfecta"; seed 004 §4.13 (a parent resume restores from
its checkpoint instead of re-reading history); case B09.

For every live compaction unit, the units it covers are omitted with ``summarized`` unless they are
protected: user constraints and corrections, approvals, unresolved calls and the rest of
:mod:`~ctxledger.policy.stages.protection` stay verbatim even inside a covered range (B09: the
"do not push" message survives its summary). Coverage is the compaction's ``source_ids``; without them,
every message and tool exchange with ``seq <= through_seq``; a unit that gained a record after the
compaction was written (the result of a deferred call arriving later) is not covered: the call goes
with its result, as it would have without the compaction; an earlier compaction a later one lists
among its sources (``compact()`` again after more turns) is covered by it too; for a summary message imported as such,
the ids in its ``meta["covers"]`` (source ids or external ids). A compaction that replaced something is
required (``active_compaction``), so the history it stands for cannot silently vanish with it.

A live checkpoint with ``through_seq`` restores its owner's tool work up to that ``seq``: the owner's tool
exchanges it covers are omitted (``summarized``), the checkpoint itself being protected.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any, ClassVar

from ctxledger.policy.checks import flag
from ctxledger.policy.decisions import PolicyDecision, ReasonCode, StageContext
from ctxledger.policy.stages._common import live_units, omit_unit, require
from ctxledger.records import Checkpoint, Compaction, Message
from ctxledger.units import Unit, UnitKind

_COVERABLE = (UnitKind.MESSAGE, UnitKind.TOOL_EXCHANGE)
_COVERS = (UnitKind.COMPACTION, UnitKind.CHECKPOINT)
"""Kinds of unit that can cover others (see ``CompactionStage._covered``)."""


class CompactionStage:
    """Omit what live compactions and restoring checkpoints cover; require the compactions that did so.

    Args:
        checkpoints_restore: let checkpoints with ``through_seq`` stand for their owner's earlier tool work.

    Raises:
        InvalidSetting: ``checkpoints_restore`` is not a boolean.
    """

    name: ClassVar[str] = "compaction"
    version: ClassVar[str] = "2"

    def __init__(self, checkpoints_restore: bool = True) -> None:
        self.checkpoints_restore = flag(checkpoints_restore, self.name, "checkpoints_restore")

    def config(self) -> Mapping[str, Any]:
        """Whether checkpoints restore history."""
        return {"checkpoints_restore": self.checkpoints_restore}

    def __call__(self, ctx: StageContext) -> Iterable[PolicyDecision]:
        """Omit covered units (``summarized``); require each compaction that covered something."""
        covers = ctx.scan((self.name, "covers"), ctx.units, lambda u: u.kind in _COVERS)
        if not any(not any(r in ctx.omitted for r in u.record_ids) for u, _ in covers):
            return  # no live compaction or checkpoint: nothing is covered
        units = live_units(ctx)
        by_ext = {r.external_id: r.id for r in ctx.records if r.external_id}
        taken: set[str] = set()
        for cover in reversed(units):  # the newest compaction claims its range first
            covered = self._covered(cover, units, by_ext)
            hits = [u for u in covered if u.id not in taken and u.id not in ctx.required and u.id != cover.id]
            for unit in hits:
                taken.add(unit.id)
                yield from omit_unit(self.name, unit, ReasonCode.SUMMARIZED, f"covered by {cover.id}")
            if hits and cover.kind is UnitKind.COMPACTION:
                yield require(self.name, cover.id, "active_compaction")

    def _covered(self, cover: Unit, units: Sequence[Unit], by_ext: Mapping[str, str]) -> list[Unit]:
        rec = cover.records[0]
        if cover.kind is UnitKind.COMPACTION:
            ids = _cover_ids(rec, by_ext)
            if ids:  # an earlier compaction among the sources is summarized by this one as well
                kinds = (*_COVERABLE, UnitKind.COMPACTION)
                return [u for u in units if u.kind in kinds and ids & set(u.record_ids) and not _grew(u, rec)]
            through = getattr(rec, "through_seq", 0)
            return [u for u in units if u.kind in _COVERABLE and 0 < u.last_seq <= through]
        if cover.kind is UnitKind.CHECKPOINT and self.checkpoints_restore and isinstance(rec, Checkpoint):
            return [
                u
                for u in units
                if u.kind is UnitKind.TOOL_EXCHANGE
                and u.last_seq <= rec.through_seq
                and u.records[0].owner_participant_id == rec.owner_participant_id
            ]
        return []


def _grew(unit: Unit, cover: Any) -> bool:
    """Whether a unit holds a record written after the Compaction ``cover`` (a summary message: never)."""
    return isinstance(cover, Compaction) and cover.seq > 0 and any(r.seq > cover.seq for r in unit.records)


def _cover_ids(rec: Any, by_ext: Mapping[str, str]) -> set[str]:
    if isinstance(rec, Compaction):
        return set(rec.source_ids)
    if isinstance(rec, Message):
        listed = rec.meta.get("covers") or ()
        return {by_ext.get(str(i), str(i)) for i in listed}
    return set()
