"""The manifest record of one assembly, and the answers operators ask of it.

A manifest says what one model call saw, what it did not see and why (seed 004 §4.4–4.5). Production
assemblies persist a record that grows with what was *included*, not with the history: the included items,
the budget, the request, the policy identity, and the omissions summarised by (reason, stage) with counts
and ``seq`` ranges, plus a bounded list of notable omissions. The complete per-record lists (every omitted
candidate, every policy decision and mark) are the *trace*: always available on the in-process
:class:`~ctxledger.assemble.assembler.Assembly`, persisted only with ``trace="full"``, and otherwise
re-derived on demand by replaying the assembly (:meth:`ctxledger.ledger.Ledger.explain`).

Fields of the persisted record (:class:`Manifest`; JSON keys are the field names):

* ``id``, ``tenant_id``, ``conversation_id``, ``branch_id``, ``snapshot_seq``, ``created_at``: identity;
* ``trace``: ``"summary"`` or ``"full"`` (which of the trace lists below are stored);
* ``policy`` ``{name, version, hash[, unsafe_without], relevance}`` (``relevance``: ``"bm25"``, or
  ``"bm25+<embedding model>"`` when semantic relevance was mixed in, then ``+speaker``, ``+date``, ``+session``
  for each further signal that acted on the snapshot's units), ``assembler_version``, ``counter``
  ``{id, is_estimate}``, ``model``, ``api``, ``participant_id``: what a replay must match;
* ``request``: the rest of what the call asked for (``now``, ``provider``, ``query``, ``agent``,
  ``call_type``, ``phase``, ``checks_passed``, ``exact_evidence``, ``scope``, ``source_versions``, ``tools``),
  free text redacted, so the assembly can be replayed;
* ``budget``: ``requested`` ``{window, output, margin, input}`` as the caller asked, the effective
  ``window``/``output``/``margin``/``input`` after a working-set contract's cap (``contract_cap``: the cap in
  input tokens, or ``None``), and ``fixed`` and ``dynamic`` (``F`` and ``B_dynamic``), all tokens;
  ``fill``: why ``B_dynamic`` is not used up although something was left out for budget (``None`` when it
  is, or nothing was), also when it is charged but merging same-role turns into one provider message left
  part of the charged message framing unsent; ``framing_credit``: tokens charged beyond ``B_dynamic`` for
  message framing the provider format merges away (Anthropic), filled with more units (the counted payload still
  fits ``B_input``); ``ledger``: per context class ``{cap, used, required}`` and ``saved_by_transform``;
* ``candidate_count``; ``included``: one entry per included record ``{ref, unit, kind, role, external_id,
  representation, tokens, stage, reason, utility, transform, source_version, locators, branch_id, seq,
  visibility, owner, trust, sources[, promotion][, note]}``;
* ``omissions``: one group per (reason, stage) ``{reason, stage, count, first_seq, last_seq, ranges,
  more_ranges}`` (``ranges``: up to :data:`MAX_RANGES` inclusive ``[first, last]`` seq runs, oldest first;
  ``more_ranges``: runs not listed); ``omitted_by_reason`` / ``omitted_by_stage``: the counts. ``first_seq``,
  ``last_seq`` and ``ranges`` are in ``seq`` (the record's position in the store's write order, which also
  counts the conversation's structural records), not in the record numbers of ids such as ``<conversation>/23``
  that the CLI and :func:`explain` show: seq 28 may be record 23. Each entry's ``seq`` maps one to the other;
* ``notable_omissions``: at most :data:`MAX_NOTABLE` omitted entries (shape of ``omitted`` below plus
  ``why_notable``: ``requested`` — named by the caller's ``exact_evidence``; ``exact_evidence_path`` — a
  raw artifact or source behind a memory the call asked evidence for; ``budget`` — the highest-utility
  units left out for budget, with their ``utility``);
* ``decisions`` / ``marks``: the policy decisions and marks about included records (all of them with
  ``trace="full"``); ``rehydrations``, ``tools`` ``{exposed, withheld[, renamed][, undeclared]}``, ``lineage``,
  ``contract``, ``warnings``;
* ``tokens`` ``{estimated_input, replay, saved, observed_input, observed_output, error}`` (``saved`` = ``replay``
  − ``estimated_input``, negative when the payload's framing outweighs what was left out), ``timings`` (ms),
  ``turn_refs``, ``payload_hash``; ``payload``: the provider body with ``trace="full"``, else ``None``
  (a replay re-derives it and checks it against ``payload_hash``).

With ``trace="full"`` the record also holds ``omitted`` (every omitted candidate ``{ref, unit,
external_id, reason, stage, detail, kind, branch_id, seq, visibility, owner, trust, sources[, tokens,
utility]}``; ``unit``: the id of the record's unit, ``None`` for a record of no unit of the snapshot;
``tokens`` and ``utility``: for a unit the selection weighed and left out for ``budget``, the tokens and
utility of the option it weighed for the whole unit, the same on every record of the unit) and
``candidates`` (every candidate id).

**No secret is stored**: every free-text value copied from records or inputs is redacted line by line with
the policy's secret scanner when the entry is built.

The same policy on the same snapshot selects the same items and yields the same ``payload_hash``; ids,
``created_at`` and timings differ between runs and are not part of that promise.

The store writes this record in a columnar form (:mod:`ctxledger.manifest_codec`: the lists of entries as
tables of columns, ``manifest_format: 2``) and reads it back as the record above, exactly; records stored
entry by entry by earlier versions read as they are.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ctxledger.errors import ConfigurationError, RecordNotFound

TRACES = ("summary", "full")
"""Trace levels: ``summary`` (the default) persists the record above; ``full`` adds every per-record list."""

MAX_RANGES = 8
"""Seq runs listed per omission group; the rest are counted in ``more_ranges``."""

MAX_NOTABLE = 16
"""Notable omissions listed at most."""

TRACE_KEYS = ("omitted", "candidates", "decisions", "marks")
"""Keys whose complete lists are the trace (in a summary record ``decisions``/``marks`` hold only those
about included records)."""


def check_trace(trace: str) -> str:
    """``trace`` if it is a known trace level.

    Raises:
        ConfigurationError: anything else (the message lists the levels).
    """
    if trace not in TRACES:
        raise ConfigurationError(f"unknown trace level {trace!r}; use one of {', '.join(TRACES)}")
    return trace


@dataclass(frozen=True, slots=True)
class OmissionGroup:
    """The omitted candidates of one (reason, stage), summarised.

    Attributes:
        reason: the reason code (``budget``, ``not_in_lineage`` …) or ``budget (beyond reach)``.
        stage: the stage or phase that left them out.
        count: how many records.
        first_seq, last_seq: the ``seq`` of the oldest and newest of them.
        ranges: up to :data:`MAX_RANGES` inclusive runs of consecutive candidate ``seq`` s, oldest first. A
            ``seq`` is the record's position in the store's write order, not the number in its id
            (``<conversation>/23`` may have seq 28): the record numbers the CLI shows are not comparable with it.
        more_ranges: runs beyond those listed.
    """

    reason: str
    stage: str
    count: int
    first_seq: int
    last_seq: int
    ranges: tuple[tuple[int, int], ...]
    more_ranges: int = 0

    def as_dict(self) -> dict[str, Any]:
        """The JSON form (``ranges`` as lists)."""
        return {
            "reason": self.reason,
            "stage": self.stage,
            "count": self.count,
            "first_seq": self.first_seq,
            "last_seq": self.last_seq,
            "ranges": [list(r) for r in self.ranges],
            "more_ranges": self.more_ranges,
        }


def summarize_omissions(omitted: Iterable[tuple[str, str, int]], seqs: Sequence[int]) -> list[OmissionGroup]:
    """Group ``(reason, stage, seq)`` of omitted candidates; runs are consecutive in ``seqs`` (candidate order).

    Args:
        omitted: one triple per omitted candidate record.
        seqs: every candidate's ``seq`` in ascending order (a run is unbroken by candidates of other groups).

    Returns:
        Groups sorted by (reason, stage).
    """
    by_key: dict[tuple[str, str], list[int]] = {}
    for reason, stage, seq in omitted:
        by_key.setdefault((reason, stage), []).append(seq)
    order = np.asarray(seqs, dtype=np.int64)
    groups = []
    for (reason, stage), found in sorted(by_key.items()):
        runs = _runs(_distinct(found), order)
        listed = tuple(runs[:MAX_RANGES])
        groups.append(
            OmissionGroup(reason, stage, len(found), min(found), max(found), listed, max(0, len(runs) - MAX_RANGES))
        )
    return groups


def _distinct(found: Sequence[int]) -> np.ndarray:
    """``np.unique`` of ``found``: the array as it is when it already ascends strictly (candidates in order)."""
    values = np.asarray(found, dtype=np.int64)
    if len(values) < 2 or bool((values[1:] > values[:-1]).all()):
        return values
    return np.unique(values)


def _runs(found: np.ndarray, order: np.ndarray) -> list[tuple[int, int]]:
    """Inclusive ``(first, last)`` runs of ``found`` (distinct, ascending) unbroken in ``order`` (ascending).

    A seq continues a run when it is the candidate right after the run's last one in ``order``; a seq that is
    not a candidate stands alone.
    """
    if not len(found):
        return []
    rank = np.searchsorted(order, found, side="right") - 1  # the last position holding that seq
    member = (rank >= 0) & (order[np.clip(rank, 0, None)] == found) if len(order) else np.zeros(len(found), bool)
    joins = member[1:] & member[:-1] & (rank[1:] == rank[:-1] + 1)
    starts = np.flatnonzero(np.concatenate(([True], ~joins)))
    ends = np.concatenate((starts[1:] - 1, [len(found) - 1]))
    return list(zip(found[starts].tolist(), found[ends].tolist(), strict=True))


@dataclass(slots=True)
class Manifest:
    """The persisted record of one assembly (see the module docstring for every field's meaning)."""

    id: str
    tenant_id: str
    conversation_id: str
    branch_id: str
    snapshot_seq: int
    created_at: str
    trace: str
    policy: dict[str, Any]
    assembler_version: str
    counter: dict[str, Any]
    model: str | None
    api: str
    participant_id: str | None
    request: dict[str, Any]
    budget: dict[str, Any]
    ledger: dict[str, Any]
    candidate_count: int
    included: list[dict[str, Any]]
    omissions: list[OmissionGroup]
    omitted_by_reason: dict[str, int]
    omitted_by_stage: dict[str, int]
    notable_omissions: list[dict[str, Any]]
    decisions: list[dict[str, Any]]
    marks: list[dict[str, Any]]
    rehydrations: list[dict[str, Any]]
    tools: dict[str, Any]
    lineage: list[dict[str, Any]]
    contract: dict[str, Any] | None
    warnings: list[dict[str, Any]]
    tokens: dict[str, Any]
    timings: dict[str, float]
    turn_refs: list[str]
    payload_hash: str
    payload: dict[str, Any] | None = None
    extra: dict[str, Any] = field(default_factory=dict)
    """Trace lists stored with ``trace="full"`` (``omitted``, ``candidates``)."""

    def as_dict(self) -> dict[str, Any]:
        """The JSON form the store persists (field names as keys; ``extra``'s keys at the top level)."""
        out = {name: getattr(self, name) for name in self.__dataclass_fields__ if name != "extra"}
        out["omissions"] = [g.as_dict() for g in self.omissions]
        out.update(self.extra)
        return out


class ManifestView(dict[str, Any]):
    """The in-process manifest: the persisted record's keys, plus the trace's lists computed on first read.

    ``view["omitted"]``, ``view["candidates"]``, and the complete ``view["decisions"]`` / ``view["marks"]``
    are built from the assembly's decisions when first asked for (``get`` and ``in`` see them too), so an
    assembly nobody inspects never pays for them. :meth:`persisted` is what the store writes.
    """

    def __init__(self, record: Manifest, trace: Callable[[], Mapping[str, Any]]) -> None:
        super().__init__(record.as_dict())
        self.record = record
        self._trace: Callable[[], Mapping[str, Any]] | None = trace
        self._stored: dict[str, Any] = dict(self)
        if record.trace == "full":
            self._load()
            self._stored = dict(self)

    def _load(self) -> None:
        if self._trace is not None:
            built, self._trace = self._trace(), None
            self.update(built)

    def __missing__(self, key: str) -> Any:
        """A trace key (loaded on first use), else ``KeyError``."""
        if key in TRACE_KEYS and self._trace is not None:
            self._load()
            return self[key]
        raise KeyError(key)

    def __getitem__(self, key: str) -> Any:
        """``view[key]``; ``decisions`` and ``marks`` load the trace first."""
        if key in ("decisions", "marks") and self._trace is not None:
            self._load()
        return super().__getitem__(key)

    def __setitem__(self, key: str, value: Any) -> None:
        """Set a key of the record (it is persisted too), e.g. a later phase's ``recalls``."""
        super().__setitem__(key, value)
        if key not in TRACE_KEYS:
            self._stored[key] = value

    def get(self, key: str, default: Any = None) -> Any:  # type: ignore[override]
        """``view[key]`` (loading the trace for its keys), else ``default``."""
        try:
            return self[key]
        except KeyError:
            return default

    def __contains__(self, key: object) -> bool:
        """Whether the record has ``key``, or the trace will (its keys count before it is loaded)."""
        return super().__contains__(key) or (key in TRACE_KEYS and self._trace is not None)

    def persisted(self) -> dict[str, Any]:
        """The record as the store keeps it (without trace lists a summary record does not hold)."""
        return dict(self._stored)


def has_full_trace(manifest: Mapping[str, Any]) -> bool:
    """Whether ``manifest`` holds every omitted candidate (a full trace, or a record written before summaries)."""
    return "omitted" in manifest


def find_entry(manifest: Mapping[str, Any], ref: str) -> tuple[str, dict[str, Any]]:
    """Find a record in a manifest by record id or external id.

    Returns:
        ``("included" | "omitted", entry)``.

    Raises:
        RecordNotFound: ``ref`` was not a candidate of this assembly.
    """
    for status in ("included", "omitted"):
        for entry in manifest.get(status, ()):
            if ref in (entry["ref"], entry.get("external_id")):
                return status, dict(entry)
    among = f"the candidates of assembly {manifest['id']}"
    if not has_full_trace(manifest):
        among = f"the included records of assembly {manifest['id']} (its summary lists no omitted record: replay it)"
    raise RecordNotFound(manifest["tenant_id"], ref, among=among)


def explain(manifest: Mapping[str, Any], ref: str) -> dict[str, Any]:
    """Answer "why did the model see this?" or "why did it not see that?" for one record.

    Returns:
        ``{ref, kind, status, stage, reason, unit, representation, tokens, utility, transform, locators,
        branch_id, policy, decisions, marks, rehydrations, detail, note, chain}``: for an included record the stage that
        admitted it (``fixed``, ``protection`` or ``selection``) with its utility and tokens; for an
        omitted one the reason code, the stage, its ``unit``, and, when the selection weighed the unit and left it
        out for budget, the ``tokens`` and ``utility`` of the option it weighed for the whole unit; an omitted
        record this call weighed no tokens or utility for (never visited beyond the budget's reach, or left out
        before the selection) has ``tokens`` and ``utility`` ``None`` and a ``note`` saying why. ``chain`` reads
        memory → artifact → branch → policy version → stage as sentences.

    ``manifest`` must hold the record: as an included item, or in a full trace (the in-process manifest,
    a ``trace="full"`` record, or a replay's; :meth:`ctxledger.ledger.Ledger.explain` replays a summary).

    Raises:
        RecordNotFound: ``ref`` was not a candidate of this assembly (or, in a summary, not included).
    """
    status, entry = find_entry(manifest, ref)
    rid = entry["ref"]
    decisions = [d for d in manifest.get("decisions", []) if d["ref"] in (rid, entry.get("unit"))]
    marks = [m for m in manifest.get("marks", []) if m["ref"] == rid]
    rehydrations = [r for r in manifest.get("rehydrations", []) if rid in (r["memory"], r["artifact"])]
    policy = manifest["policy"]
    out = {
        "ref": rid,
        "kind": entry.get("kind"),
        "external_id": entry.get("external_id"),
        "status": status,
        "stage": entry["stage"],
        "reason": entry["reason"],
        "unit": entry.get("unit"),
        "representation": entry.get("representation"),
        "tokens": entry.get("tokens"),
        "utility": entry.get("utility"),
        "transform": entry.get("transform"),
        "locators": entry.get("locators", []),
        "branch_id": entry.get("branch_id", manifest["branch_id"]),
        "policy": f"{policy['name']}@{policy['version']} ({policy['hash'][:19]})",
        "decisions": decisions,
        "marks": marks,
        "rehydrations": rehydrations,
        "detail": entry.get("detail", ""),
        "note": entry.get("note") if status == "included" else _unweighed_note(entry),
    }
    out["chain"] = _chain(manifest, status, entry, marks, rehydrations)
    return out


def _owner_words(entry: Mapping[str, Any]) -> str:
    """The record's owner (who produced it: an agent's system prompt is the agent's) and whom it limits."""
    owner = entry.get("owner")
    if owner is None:
        return "owner none"
    if entry.get("visibility") == "participant_private":
        return f"owner {owner}, the only participant who sees it"
    return f"owner {owner}, who produced it; only a participant_private record is limited to its owner"


def _unweighed_note(entry: Mapping[str, Any]) -> str | None:
    """Why an omitted record has no tokens or utility (``None`` when the selection weighed its unit)."""
    if entry.get("utility") is not None:
        return None
    if entry["reason"] == "budget (beyond reach)":
        return "never visited: beyond the budget's reach, this call weighed no tokens or utility for it"
    why = f"left out by stage {entry['stage']} ({entry['reason']})"
    return f"{why} without the selection weighing its tokens or utility"


def _chain(
    manifest: Mapping[str, Any],
    status: str,
    entry: Mapping[str, Any],
    marks: Sequence[Mapping[str, Any]],
    rehydrations: Sequence[Mapping[str, Any]],
) -> list[str]:
    """The explanation as a chain of sentences: record → sources → branch → visibility → policy → stage."""
    policy = manifest["policy"]
    what = f"{entry.get('kind', 'record')} {entry['ref']}" + (
        f" ({entry['external_id']})" if entry.get("external_id") else ""
    )
    chain = [("included " if status == "included" else "omitted ") + what]
    if entry.get("sources"):
        chain.append("derived from " + ", ".join(entry["sources"]))
    chain.append(_branch_sentence(manifest, entry))
    if entry.get("visibility"):
        who = manifest.get("participant_id") or "an anonymous caller"
        chain.append(f"visibility {entry['visibility']} ({_owner_words(entry)}), requested for {who}")
    chain.append(f"under policy {policy['name']} version {policy['version']} ({policy['hash'][:19]})")
    if status == "included":
        how = f"admitted by stage {entry['stage']} ({entry['reason']}) as {entry.get('representation')}"
        if entry.get("utility") is not None:
            how += f", utility {entry['utility']}"
        chain.append(how + f", {entry.get('tokens')} tokens")
        if entry.get("note"):
            chain.append(entry["note"])
        if entry.get("locators"):
            spans = ", ".join(f"bytes {loc['byte_start']}:{loc['byte_end']}" for loc in entry["locators"][:4])
            more = f" (+{len(entry['locators']) - 4} more)" if len(entry["locators"]) > 4 else ""
            fetch = f"all of it: ctxledger rehydrate {entry['ref']}"
            chain.append(f"shown by {entry.get('transform')}: {spans}{more}; {fetch}")
    else:
        chain.append(
            f"left out by stage {entry['stage']}: {entry['reason']}"
            + (f" ({entry['detail']})" if entry.get("detail") else "")
        )
        if entry.get("utility") is not None:
            weighed = f"{entry.get('tokens')} tokens, utility {entry['utility']}"
            chain.append(f"its unit {entry.get('unit')} weighed at {weighed}")
    chain += [f"marked {m['reason']} by {m['stage']}: {m['detail']}" for m in marks]
    for r in rehydrations:
        if r["decision"] == "rehydrated":
            chain.append(
                f"raw artifact {r['artifact']} rehydrated ({r['bytes']} bytes, sha256 {str(r['sha256'])[:12]})"
            )
        else:
            why = r["reason"] + (f" ({r['detail']})" if r.get("detail") else "")
            chain.append(f"raw artifact {r['artifact']} not rehydrated: {why}; a reference was included")
    if status == "included" and entry.get("kind") == "tool_memory" and not rehydrations:
        chain.append("raw artifact not rehydrated: the compact memory was sufficient (no exact evidence asked)")
    return chain


def _branch_sentence(manifest: Mapping[str, Any], entry: Mapping[str, Any]) -> str:
    branch = entry.get("branch_id") or manifest["branch_id"]
    if branch == manifest["branch_id"]:
        return f"on the active branch {branch}"
    active = manifest["branch_id"]
    for hop in manifest.get("lineage", []):
        if hop["branch_id"] == branch:
            seq, last = entry.get("seq"), hop["max_seq"]
            if isinstance(seq, int) and last is not None and seq > last:
                return (
                    f"on branch {branch} after the active branch {active} forked from it "
                    f"(seq {seq} > {last}), so not inherited"
                )
            return f"inherited from branch {branch} (up to seq {last}) by the active branch {active}"
    outside = f"from branch {branch}, outside the lineage of the active branch {active}"
    if entry.get("visibility") in ("conversation", "shared"):
        outside += f" ({entry['visibility']}-visible: may fill room the lineage leaves)"
    return outside
