"""Prefix-stable selection: grow the previous call's selection instead of re-choosing it.

Providers bill a prompt prefix they saw on a recent call at a fraction of the input price (OpenAI: half,
Anthropic: a tenth on a cache read). A selection re-chosen on every call reshuffles old turns, so its payload
shares only its head with the previous one and pays full price for the rest. When the history has grown since
the previous assembly of the same branch and budget, :func:`grow` keeps every unit the previous payload carried,
in the same form, and adds every unit written since (and every unit the policy requires); if that fits
``B_dynamic`` and the class caps, it is the selection, and the new payload extends the previous one. When it
does not fit, the selection is chosen afresh — the compaction point — under :func:`target_budget`, which leaves
``stable_headroom`` of ``B_dynamic`` free so that the following calls can grow again.

Nothing the policy requires is lost: required units are in a grown selection or it is not used, and so are the
:func:`essentials`: the :data:`ESSENTIAL` highest-utility units of a fresh selection (the turn a question is
about) and the newest failure.
Otherwise a grown selection does not re-rank: an old unit of lower rank waits for the next compaction point.
A question asked of an unchanged history (no unit written since) is always chosen afresh.

The previous assembly is kept in memory with the snapshot (:attr:`~ctxledger.assemble.snapshot.Snapshot.memo`,
namespace :data:`NAMESPACE`), per requested input budget and per snapshot ``seq``: a call at ``seq`` grows from
the first assembly stored at the largest ``seq`` below it, so the same call made twice gives the same payload.
A process that assembled nothing before ``seq`` on that branch and budget rebuilds the previous assembly from the
latest stored manifest (:func:`latest_stored`, :func:`from_manifest`): a new process grows the same selection as the
process that persisted it. A replay (``explain`` of a stored assembly) does not look for the previous assembly:
it is given what the stored manifest's ``prefix`` recorded (:class:`RecordedPrefix`), so assemblies made later at
other snapshots, or a process that holds none, do not change what it grows from, and the Anthropic breakpoints
of its payload are placed where the stored call placed them.

:func:`shared_prefix_tokens` measures, for the manifest, how many tokens of leading turns the payload shares with
the previous assembly's.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from ctxledger.assemble.room import error_lines
from ctxledger.assemble.select import Option, SelectionItem, SelectionResult
from ctxledger.budget import BudgetLedger
from ctxledger.policy.base import ReasonCode
from ctxledger.units import Unit

NAMESPACE = "prefix_stability"
"""The snapshot memo namespace holding previous assemblies."""

KEEP = 4
"""Previous assemblies kept per requested budget (the newest ``seq`` values)."""


@dataclass(frozen=True, slots=True)
class PreviousAssembly:
    """What the next call needs of one assembly.

    Attributes:
        assembly_id: its id.
        seq: the snapshot ``seq`` it was assembled at.
        chosen: unit id → the option it was sent as (every dynamic unit of the payload).
        turns: the payload's parts in order (:func:`payload_parts`), instructions included.
        messages: the provider payload's messages (for the cache breakpoint on the shared part).
    """

    assembly_id: str
    seq: int
    chosen: Mapping[str, Option]
    turns: tuple[tuple[Any, int], ...]
    messages: tuple[Any, ...] = ()


def _store(memo: dict[Any, dict[Any, Any]], budget_key: Any) -> dict[int, PreviousAssembly]:
    space = memo.setdefault(NAMESPACE, {})
    found = space.get(budget_key)
    if found is None:
        found = space[budget_key] = (None, {})
    return found[1]


@dataclass(frozen=True, slots=True)
class RecordedPrefix:
    """What a stored assembly's manifest says its payload shared with the previous assembly (its ``prefix``).

    Attributes:
        previous: the previous assembly's id, or ``None`` when there was none.
        shared_tokens: tokens of the leading payload parts it shared with it.
        shared_messages: leading provider messages it shared with it (where the Anthropic breakpoint went).
        previous_manifest: the previous assembly's stored manifest, ``None`` when there was none or it is gone.
    """

    previous: str | None
    shared_tokens: int
    shared_messages: int
    previous_manifest: Mapping[str, Any] | None = None

    @classmethod
    def of(cls, prefix: Any, previous_manifest: Mapping[str, Any] | None = None) -> RecordedPrefix | None:
        """Read a manifest's ``prefix`` (``None`` for a manifest that does not record one)."""
        if not isinstance(prefix, Mapping):
            return None
        found = prefix.get("previous")
        return cls(
            found if isinstance(found, str) else None,
            int(prefix.get("shared_tokens") or 0),
            int(prefix.get("shared_messages") or 0),
            previous_manifest,
        )


def recorded_previous(
    memo: dict[Any, dict[Any, Any]], budget_key: Any, recorded: RecordedPrefix, items: Sequence[SelectionItem]
) -> PreviousAssembly | None:
    """The previous assembly a replay grows from: the one its manifest names, from the memo or its stored manifest.

    ``None`` when the manifest names none, or names one neither the memo nor the store still holds (the replay
    then differs from the stored call, and says so).
    """
    if recorded.previous is None:
        return None
    for kept in _store(memo, budget_key).values():
        if kept.assembly_id == recorded.previous:
            return kept
    return from_manifest(recorded.previous_manifest, items)


def previous(memo: dict[Any, dict[Any, Any]], budget_key: Any, seq: int) -> PreviousAssembly | None:
    """The assembly a call at ``seq`` grows from: the one stored at the largest ``seq`` below it, or ``None``."""
    stored = _store(memo, budget_key)
    earlier = [s for s in stored if s < seq]
    return stored[max(earlier)] if earlier else None


def remember(memo: dict[Any, dict[Any, Any]], budget_key: Any, assembly: PreviousAssembly) -> None:
    """Keep ``assembly`` for later calls (the first one stored at its ``seq`` stays; :data:`KEEP` per budget)."""
    stored = _store(memo, budget_key)
    stored.setdefault(assembly.seq, assembly)
    for old in sorted(stored)[:-KEEP]:
        del stored[old]


def latest_stored(manifests: Sequence[Mapping[str, Any]], branch_id: str, budget_key: Any, seq: int
                  ) -> Mapping[str, Any] | None:  # fmt: skip
    """The stored manifest a call at ``seq`` grows from when this process assembled nothing before it.

    Among ``manifests`` (oldest first) of ``branch_id`` with the same ``(api, requested input tokens)``: the first
    stored at the largest snapshot ``seq`` below ``seq`` (what :func:`previous` picks in memory), or ``None``.
    """
    best: Mapping[str, Any] | None = None
    for m in manifests:
        requested = (m.get("budget") or {}).get("requested") or {}
        if m.get("branch_id") != branch_id or (m.get("api"), requested.get("input")) != tuple(budget_key):
            continue
        at = m.get("snapshot_seq")
        if isinstance(at, int) and at < seq and (best is None or at > best["snapshot_seq"]):
            best = m
    return best


def from_manifest(manifest: Mapping[str, Any] | None, items: Sequence[SelectionItem]) -> PreviousAssembly | None:
    """The previous assembly rebuilt from its stored manifest, for a process that did not make it.

    Each included unit is matched to the option ``items`` offers in the representation the manifest records
    (the one of the same tokens, else of the same transform); instructions (not selection items) and units no
    longer offered are left out, as :func:`grow` leaves them. ``turns`` and ``messages`` are not stored, so the
    manifest's ``prefix`` of the next call reports no shared tokens; the selection is the same.

    Returns:
        ``None`` without a manifest.
    """
    if not manifest:
        return None
    sent: dict[str, tuple[str, int, Any]] = {}
    for entry in manifest.get("included") or ():
        uid = entry.get("unit")
        if uid is None:
            continue
        rep, tokens, transform = sent.get(uid, (entry.get("representation"), 0, entry.get("transform")))
        sent[uid] = (rep, tokens + int(entry.get("tokens") or 0), transform)
    by_id = {i.unit_id: i for i in items}
    chosen: dict[str, Option] = {}
    for uid, (rep, tokens, transform) in sent.items():
        item = by_id.get(uid)
        same = [o for o in item.options if o.representation == rep] if item is not None else []
        found = [o for o in same if o.tokens == tokens] or [o for o in same if o.transform == transform]
        if found:
            chosen[uid] = found[0]
    return PreviousAssembly(str(manifest.get("id")), int(manifest["snapshot_seq"]), chosen, ())


def target_budget(
    dynamic: int, headroom: float, prev: PreviousAssembly | None, items: Sequence[SelectionItem] | None = None
) -> int:
    """The budget a fresh selection fills: ``(1 − headroom)`` of ``B_dynamic`` when the history grew since ``prev``.

    All of ``B_dynamic`` on a first call, and for a question asked of an unchanged history (``items`` given and
    none newer than ``prev``): such a call is not followed by growth, so it leaves no headroom.
    """
    if prev is None or headroom <= 0:
        return dynamic
    if items is not None and not any(i.seq > prev.seq for i in items):
        return dynamic
    return max(0, int(dynamic * (1.0 - headroom)))


def _sources(option: Option) -> dict[str, Any] | None:
    """Record id → sha256 of the content a derived option was made from (``None`` when it does not say)."""
    records = option.detail.get("records")
    if not isinstance(records, Mapping) or not records:
        return None
    return {rid: v.get("sha256") if isinstance(v, Mapping) else None for rid, v in records.items()}


def _same_option(item: SelectionItem, sent: Option) -> Option | None:
    """The option of ``item`` equal to ``sent``, or ``sent`` itself when it is still a faithful derivation.

    A derived form (excerpt, extraction …) may be cut differently on a later call (its length follows the
    budget and the query); when ``item`` still offers that representation made from the same content (same
    records, same sha256), the form sent before is as true as the new one and is kept, so the payload does not
    change. ``None`` when neither holds (the unit changed or is offered in other forms only).
    """
    for option in item.options:
        if option.representation == sent.representation and option.tokens == sent.tokens and option.turns == sent.turns:
            return option
    sources = _sources(sent)
    if sent.representation == "verbatim" or sources is None:
        return None
    for option in item.options:
        if option.representation == sent.representation and _sources(option) == sources:
            return sent
    return None


ESSENTIAL = 3
"""The fresh selection's highest-utility optional units that a grown or prefix-keeping selection must carry too."""


def _failed_call(item: SelectionItem) -> bool:
    """Whether the unit holds a tool result marked as an error."""
    return any(t.is_error for o in item.options[:1] for t in o.turns)


def _error_lines(item: SelectionItem) -> bool:
    """Whether an option of the unit reports error lines in its output."""
    return any(error_lines(o)[0] for o in item.options)


def essentials(items: Sequence[SelectionItem], fresh: SelectionResult, k: int = ESSENTIAL) -> frozenset[str]:
    """Ids of the units a grown or prefix-keeping selection must carry, whatever it kept before.

    The ``k`` highest-utility optional units the fresh selection chose (the evidence it ranks first), the newest
    unit holding a failed tool call and the newest unit whose output shows error lines (the failure the next step
    must see, even when the fresh selection ranked it lower).
    """
    ranked = sorted(
        (i for i in items if not i.required and i.unit_id in fresh.chosen),
        key=lambda i: (-fresh.chosen[i.unit_id].utility, -i.seq, i.unit_id),
    )
    latest = []
    for fails in (_failed_call, _error_lines):  # the newest failed call, and the newest output showing errors
        failing = [i for i in items if not i.required and fails(i)]
        if failing:
            latest.append(max(failing, key=lambda i: (i.seq, i.unit_id)).unit_id)
    return frozenset([*(i.unit_id for i in ranked[:k]), *latest])


def grow(
    prev: PreviousAssembly | None,
    items: Sequence[SelectionItem],
    fresh: SelectionResult,
    dynamic: int,
    class_caps: Mapping[str, float],
) -> tuple[SelectionResult, BudgetLedger] | None:
    """The previous selection grown by the units written since, or ``None`` when it must be chosen afresh.

    ``None`` when there is no previous assembly, nothing was written since, a unit it sent is no longer offered
    in the same form (omitted, changed, rebuilt), or the grown selection exceeds ``dynamic`` tokens or a class
    cap. New units, required units and the fresh selection's :func:`essentials` enter as the fresh selection
    chose them, else at their first (verbatim) option.

    Returns:
        The selection (units left out are omitted for ``budget``) and its budget ledger.
    """
    if prev is None or not any(i.seq > prev.seq for i in items):
        return None
    by_id = {i.unit_id: i for i in items}
    chosen: dict[str, Option] = {}
    for uid, sent in prev.chosen.items():
        item = by_id.get(uid)
        if item is None:
            continue  # the policy no longer offers it (superseded, redundant …): it leaves the payload
        option = _same_option(item, sent)
        if option is None:
            return None
        chosen[uid] = option
    first = essentials(items, fresh)
    for item in items:
        if item.unit_id not in chosen and (item.required or item.seq > prev.seq or item.unit_id in first):
            chosen[item.unit_id] = fresh.chosen.get(item.unit_id) or item.options[0]
    total = sum(o.tokens for o in chosen.values())
    if total > dynamic:
        return None
    ledger = BudgetLedger(dynamic, class_caps)
    for item in items:
        option = chosen.get(item.unit_id)
        if option is None:
            continue
        if not item.required and not ledger.fits_cap(item.context_class, option.tokens):
            return None
        ledger.charge(item.context_class, option.tokens, required=item.required)
    result = SelectionResult(chosen=chosen, used_tokens=total)
    result.omitted = {i.unit_id: ReasonCode.BUDGET for i in items if i.unit_id not in chosen}
    return result, ledger


def keep_prefix(
    prev: PreviousAssembly | None,
    items: Sequence[SelectionItem],
    target: int,
    share: float,
    first: frozenset[str] = frozenset(),
) -> tuple[list[SelectionItem], frozenset[str]] | None:
    """Items for a re-chosen selection that keeps the previous payload's leading units (its cached prefix).

    The previous payload's units are taken oldest first while they are still offered in the same form and their
    tokens stay within ``share · target``; they become required at that form. Of the other units, only those
    newer than the last kept one, required ones and ``first`` (:func:`essentials`) are offered, so the re-chosen
    payload starts with the kept units unchanged. ``first`` become required whether or not a unit is kept, so a
    re-chosen selection carries them even when its target is too small for the fresh choice to rank them in.
    ``None`` without a previous assembly.

    Returns:
        The items to select from, and the ids of the units left out so that the prefix stays whole.
    """
    if prev is None:
        return None
    by_id = {i.unit_id: i for i in items}
    # a unit entering before the end of the kept run would split it: the run stops at the oldest of them
    entering = [i.seq for i in items if i.unit_id not in prev.chosen and (i.required or i.unit_id in first)]
    stop = min(entering, default=None)
    kept: dict[str, Option] = {}
    used = 0
    boundary = -1
    for uid in sorted(prev.chosen, key=lambda u: by_id[u].seq if u in by_id else -1):
        item = by_id.get(uid)
        option = _same_option(item, prev.chosen[uid]) if item is not None else None
        if option is None or used + option.tokens > share * target or (stop is not None and item.seq > stop):
            break
        kept[uid] = option
        used += option.tokens
        boundary = item.seq  # type: ignore[union-attr]
    offered: list[SelectionItem] = []
    left_out: set[str] = set()
    for item in items:
        if item.unit_id in kept:
            offered.append(replace(item, options=[kept[item.unit_id]], required=True))
        elif item.unit_id in first:
            offered.append(replace(item, required=True))  # the fresh choice's best evidence enters for sure
        elif item.required or item.seq > boundary:
            offered.append(item)
        else:
            left_out.add(item.unit_id)
    return offered, frozenset(left_out)


def payload_parts(
    fixed: Sequence[Unit], chosen: Sequence[Unit], options: Mapping[str, Option], costs: Mapping[str, int]
) -> tuple[tuple[Any, int], ...]:
    """The payload's units in payload order as ``(what was sent, tokens)``: instructions, then the chosen units."""
    parts: list[tuple[Any, int]] = [((u.id, u.turns), costs[u.id]) for u in sorted(fixed, key=lambda u: u.seq)]
    parts += [((u.id, options[u.id].turns), options[u.id].tokens) for u in sorted(chosen, key=lambda u: u.seq)]
    return tuple(parts)


def shared_prefix_tokens(prev: PreviousAssembly | None, turns: Sequence[tuple[Any, int]]) -> int:
    """Tokens of the leading payload parts (:func:`payload_parts`) equal to the previous assembly's (0 without one)."""
    if prev is None:
        return 0
    total = 0
    for a, b in zip(prev.turns, turns, strict=False):
        if a != b:
            break
        total += b[1]
    return total


def shared_messages(prev: PreviousAssembly | None, messages: Sequence[Any]) -> int:
    """How many leading provider messages equal the previous payload's (0 without one)."""
    if prev is None:
        return 0
    count = 0
    for a, b in zip(prev.messages, messages, strict=False):
        if a != b:
            break
        count += 1
    return count
