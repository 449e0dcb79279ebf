"""Validity: supersession, staleness, source-version invalidation, conflicts and provenance.

Seed 004 §4.7 (freshness classes), §4.8 (contradiction and supersession), §9.4 (broken provenance);
seed 002 "Freshness no es una timestamp" and "Provenance".

* **Supersession has a direction.** ``supersedes`` on the *new* record names the old ones; the old record
  is omitted (``superseded``, detail ``superseded by <new>``) and the new one stays selectable. The link
  is honoured only while the new record is itself a live candidate, and only when the new record's trust
  is at least the old one's: lower trust never overrides higher, so such a claim leaves both records in,
  flagged as a conflict. A newer checkpoint of the same run and owner supersedes the older ones.
  Claims that cannot be honoured are kept out of the way and flagged, never acted on: a record naming
  itself is not omitted (mark ``supersession_ignored``); records that supersede each other in a cycle
  (A names B, B names A, or longer) are all kept and flagged as a ``conflict``; an *older* record (lower
  ``seq``, or an earlier ``observed_at`` when both have one) cannot supersede a newer one (both kept,
  ``conflict``, the detail gives both seqs).
* **Staleness.** A record is stale when ``stale_after`` has passed at the request's ``now``; when it has
  no ``stale_after`` but an ``observed_at``, when the ``ttl_seconds`` of its freshness class has passed
  (``permanent`` never goes stale); when it was derived from an older version of a source than the
  current one (``source_version`` ``"<source>@<version>"``; the current version is the request's
  ``source_versions[source]`` or else the newest version recorded for that source among the candidates:
  a summary and test results tied to ``repo@a1b2c3`` are stale once ``repo@d4e5f6`` is seen); or when its
  provenance is broken and cannot be repaired. ``stale_actions[freshness]`` says what happens: ``omit``
  (``stale``) or ``mark`` (kept, rendered with ``status="stale"`` and the revalidation tool).
* **Conflicts** (``conflicts_with``) stay separate records. ``conflicts="flag"`` keeps both and flags both;
  ``"prefer_trusted"`` omits the side with lower trust (then lower confidence) as ``conflict_suppressed``
  and flags the other; equal sides are both kept and flagged.
* **Provenance** (repaired or marked stale, never replaced by an invented id). A memory
  whose source artifact is missing, or whose locator's sha256 differs from the artifact it names, is
  repaired only by content: an artifact that holds the locator's sha256 and already exists in the store.
  Where it is looked for, first match wins, lowest ``seq`` then id within each place:

  1. the call's candidates;
  2. the rest of the request's conversation up to the snapshot ``seq``;
  3. the tenant's other conversations (``StageContext.find_artifacts``), only artifacts created by the
     request's clock ``now`` that this participant may see (not ``audit_only``, not private to someone
     else) and whose scope labels (``scope_keys``) agree with the request's.

  Another tenant's artifact is never used, whatever its sha256. The memory is marked
  ``provenance_repaired``; the detail names the artifact and, when it lies in another conversation, that
  conversation; ``StageContext.repairs`` records it so rehydration reads the repaired artifact. Every
  broken source must be repaired: otherwise the memory is stale (``provenance cannot be repaired``).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from datetime import timedelta
from typing import Any, ClassVar

from ctxledger.errors import InvalidSetting
from ctxledger.policy.checks import choice, mapping, number, strings
from ctxledger.policy.decisions import Outcome, PolicyDecision, ReasonCode, StageContext
from ctxledger.policy.stages._common import mark, omit, request_attr
from ctxledger.policy.stages.scope import scope_mismatch
from ctxledger.policy.stages.visibility import visible_to
from ctxledger.records import Checkpoint, Freshness, Record, ToolArtifact, ToolMemory, Visibility, utcnow

DEFAULT_STALE_ACTIONS: Mapping[str, str] = {
    "volatile": "omit",
    "session": "mark",
    "bounded": "mark",
    "durable": "mark",
    "permanent": "mark",
    "default": "mark",
}
"""What happens to a stale record, by freshness class (``default``: records without a class)."""

DEFAULT_TTL_SECONDS: Mapping[str, int] = {"volatile": 900, "session": 86_400, "bounded": 7 * 86_400}
"""Age after which a record with ``observed_at`` but no ``stale_after`` is stale (durable: never by age)."""

STALE_ACTIONS = ("omit", "mark")
"""What may happen to a stale record."""

CONFLICT_RULES = ("flag", "prefer_trusted")
"""How conflicting records are treated."""


def _freshness_key(key: str, setting: str, *, with_default: bool) -> None:
    known = [f.value for f in Freshness] + (["default"] if with_default else [])
    if key not in known:
        why = f"unknown freshness class; known: {', '.join(known)}"
        raise InvalidSetting(ValidityStage.name, f"{setting}.{key}", why)


def split_version(value: str) -> tuple[str, str]:
    """``"repo@d4e5f6"`` → ``("repo", "d4e5f6")``; a bare version belongs to source ``""``."""
    source, sep, version = value.rpartition("@")
    return (source, version) if sep else ("", value)


class ValidityStage:
    """Omit superseded records; mark or omit stale ones; flag conflicts; repair or mark broken provenance.

    Args:
        stale_actions: freshness class → ``"omit"`` or ``"mark"``.
        ttl_seconds: freshness class → maximum age in seconds when ``stale_after`` is absent.
        conflicts: ``"flag"`` (keep both sides) or ``"prefer_trusted"``.
        scope_keys: scope labels an artifact of another conversation must share with the request to
            repair provenance (as :class:`~ctxledger.policy.stages.scope.ScopeStage` ``keys``).

    Raises:
        InvalidSetting: a ``stale_actions`` key that is not a freshness class (or ``default``) or a value
            other than ``omit`` / ``mark``; a ``ttl_seconds`` key that is not a freshness class or a value
            that is not a number > 0; an unknown ``conflicts`` rule; ``scope_keys`` not a list of strings.
    """

    name: ClassVar[str] = "validity"
    version: ClassVar[str] = "3"

    def __init__(
        self,
        stale_actions: Mapping[str, str] | None = None,
        ttl_seconds: Mapping[str, int] | None = None,
        conflicts: str = "flag",
        scope_keys: Iterable[str] = ("app", "user_id"),
    ) -> None:
        actions = mapping({} if stale_actions is None else stale_actions, self.name, "stale_actions")
        for key, action in actions.items():
            _freshness_key(key, "stale_actions", with_default=True)
            choice(action, self.name, f"stale_actions.{key}", STALE_ACTIONS)
        self.stale_actions = {**DEFAULT_STALE_ACTIONS, **actions}
        ttl = mapping(DEFAULT_TTL_SECONDS if ttl_seconds is None else ttl_seconds, self.name, "ttl_seconds")
        for key, seconds in ttl.items():
            _freshness_key(key, "ttl_seconds", with_default=False)
            number(seconds, self.name, f"ttl_seconds.{key}", low=0, low_open=True)
        self.ttl_seconds = ttl
        self.conflicts = choice(conflicts, self.name, "conflicts", CONFLICT_RULES)
        self.scope_keys = strings(scope_keys, self.name, "scope_keys")

    def config(self) -> Mapping[str, Any]:
        """Stale actions, TTLs, the conflict rule and the scope keys of cross-conversation repairs."""
        return {
            "stale_actions": dict(sorted(self.stale_actions.items())),
            "ttl_seconds": dict(sorted(self.ttl_seconds.items())),
            "conflicts": self.conflicts,
            "scope_keys": list(self.scope_keys),
        }

    def __call__(self, ctx: StageContext) -> Iterable[PolicyDecision]:
        """Run supersession first (its omissions decide what is left), then staleness, provenance, conflicts."""
        out: list[PolicyDecision] = []
        for d in self._supersession(ctx):
            out.append(d)
            if d.outcome is Outcome.OMIT:
                ctx.omitted.add(d.ref)
        out += self._staleness(ctx)
        out += self._conflicts(ctx, {d.ref for d in out if d.outcome is Outcome.OMIT})
        out += self._dead_sources(ctx, out)
        return out

    def _dead_sources(self, ctx: StageContext, decided: list[PolicyDecision]) -> list[PolicyDecision]:
        """Raw artifacts whose every memory was omitted as stale or superseded share that fate.

        The raw observation is as old as the memory made from it: when the memory may not be shown as
        current truth, neither may its source (unless another live memory still stands on it). A source
        that is one result of a parallel call is marked ``stale`` instead of omitted: omitting it would take
        its call and the sibling results, which are not stale, out with it (a unit enters whole).
        """
        dead = {
            d.ref: d.reason
            for d in decided
            if d.outcome is Outcome.OMIT and d.reason in (ReasonCode.STALE, ReasonCode.SUPERSEDED)
        }
        dead_memories = [m for m in (ctx.record(r) for r in dead) if isinstance(m, ToolMemory)]
        if not dead_memories:
            return []
        standing = {
            aid
            for r in ctx.records
            if isinstance(r, ToolMemory) and r.id not in dead and ctx.live(r.id)
            for aid in r.source_artifact_ids
        }
        sources = {aid: mem for mem in dead_memories for aid in mem.source_artifact_ids}
        siblings = _sibling_results(ctx, set(sources))
        out: list[PolicyDecision] = []
        for aid, mem in sources.items():
            if aid in standing or not ctx.live(aid):
                continue
            detail = f"raw source of {dead[mem.id]} memory {mem.id}"
            if siblings.get(aid):  # a parallel call's other results are not stale: keep the unit, flag this one
                out.append(mark(self.name, aid, "stale", detail))
            else:
                out.append(omit(self.name, aid, dead[mem.id], detail))
        return out

    # -- supersession ----------------------------------------------------------------------------

    def _supersession(self, ctx: StageContext) -> Iterable[PolicyDecision]:
        done: set[str] = set()
        claimants = [r for r, _ in ctx.scan((self.name, "claims"), ctx.records, _claims)]
        cyclic = _cycles(ctx, claimants)
        flagged: set[tuple[str, str]] = set()
        for new in sorted(claimants, key=lambda r: -r.seq):  # records that claim nothing decide nothing
            if not ctx.live(new.id) and new.id not in done:
                continue  # a record superseded itself still outdates what it superseded (chains)
            for old_id in _supersedes(new, ctx):
                old = ctx.record(old_id)
                if old is None or old_id in done or old_id in ctx.omitted:
                    continue
                refused = _refused(new, old, cyclic)
                if refused is not None:
                    pair = (min(new.id, old.id), max(new.id, old.id))
                    if pair not in flagged:
                        flagged.add(pair)
                        yield from refused
                    continue
                done.add(old_id)
                yield omit(self.name, old_id, ReasonCode.SUPERSEDED, f"superseded by {new.id}")

    # -- staleness -------------------------------------------------------------------------------

    def _staleness(self, ctx: StageContext) -> list[PolicyDecision]:
        now = ctx.now or utcnow()
        current = _current_versions(ctx)
        out: list[PolicyDecision] = []
        for rec, _ in ctx.scan((self.name, "may_go_stale"), ctx.records, _may_go_stale):
            if rec.id in ctx.omitted:
                continue
            why = _stale_by_time(rec, now, self.ttl_seconds) or _stale_by_version(rec, current)
            repair = self._provenance(rec, ctx) if isinstance(rec, ToolMemory) else None
            if repair is not None and repair[0] == "provenance_repaired":
                out.append(mark(self.name, rec.id, "provenance_repaired", repair[1]))
            elif repair is not None:
                why = why or repair[1]
            if why:
                out.append(self._stale(rec, why))
        return out

    def _stale(self, rec: Record, why: str) -> PolicyDecision:
        freshness = getattr(rec, "freshness", None)
        action = self.stale_actions.get(freshness.value if freshness else "default", "mark")
        tool = getattr(rec, "revalidation_tool", None)
        detail = why + (f"; revalidate with {tool}" if tool else "")
        if action == "omit":
            return omit(self.name, rec.id, ReasonCode.STALE, detail)
        return mark(self.name, rec.id, "stale", detail)

    # -- provenance ------------------------------------------------------------------------------

    def _provenance(self, mem: ToolMemory, ctx: StageContext) -> tuple[str, str] | None:
        """``None`` when intact; ``("provenance_repaired", detail)`` or ``("provenance_broken", detail)``.

        A repair is recorded in ``ctx.repairs[mem.id]`` (see the module docstring for where it looks).
        """
        locator_sha = {
            str(loc.get("artifact_id", "")): str(loc.get("sha256", "")).removeprefix("sha256:") for loc in mem.locators
        }
        repaired: dict[str, ToolArtifact] = {}
        notes: list[str] = []
        for aid in mem.source_artifact_ids:
            art = ctx.record(aid)
            want = locator_sha.get(aid, "")
            if isinstance(art, ToolArtifact) and (not want or want == art.sha256):
                continue
            problem = (
                f"source artifact {aid} is missing"
                if art is None
                else f"artifact {aid} no longer has sha256 {want[:12]}"
            )
            found = self._repair_source(aid, want, ctx) if _is_sha256(want) else None
            if found is None:
                return "provenance_broken", f"{problem}; provenance cannot be repaired"
            repaired[aid] = found
            where = f" in conversation {found.conversation_id}" if found.conversation_id != mem.conversation_id else ""
            notes.append(f"{problem}; its locator's sha256 matches artifact {found.id}{where}")
        if not repaired:
            return None
        ctx.repairs[mem.id] = repaired
        return "provenance_repaired", "; ".join(notes)

    def _repair_source(self, aid: str, sha: str, ctx: StageContext) -> ToolArtifact | None:
        """The artifact holding ``sha`` that replaces broken source ``aid``: candidates, conversation, tenant."""
        tenant = ctx.request.tenant_id
        local = [r for r in ctx.records if isinstance(r, ToolArtifact) and r.sha256 == sha and r.id != aid]
        local = [r for r in local if r.tenant_id == tenant]
        if local:
            return min(local, key=lambda r: (r.seq, r.id))
        if ctx.find_artifacts is None:
            return None
        now = ctx.now or utcnow()
        who = request_attr(ctx, "participant_id", None)
        scope: Mapping[str, str] = request_attr(ctx, "scope", None) or {}
        same: list[ToolArtifact] = []
        elsewhere: list[ToolArtifact] = []
        for art in ctx.find_artifacts(sha):
            if not isinstance(art, ToolArtifact) or art.tenant_id != tenant or art.sha256 != sha or art.id == aid:
                continue  # never another tenant's bytes, whatever the lookup returned
            if art.conversation_id == ctx.request.conversation_id:
                if ctx.snapshot_seq is None or art.seq <= ctx.snapshot_seq:
                    same.append(art)
            elif (
                art.created_at <= now
                and art.visibility is not Visibility.AUDIT_ONLY
                and visible_to(art, who)
                and not scope_mismatch(art.scope, scope, self.scope_keys)
            ):
                elsewhere.append(art)
        pool = same or elsewhere
        return min(pool, key=lambda r: (r.seq, r.id)) if pool else None

    # -- conflicts -------------------------------------------------------------------------------

    def _conflicts(self, ctx: StageContext, omitted_now: set[str]) -> list[PolicyDecision]:
        out: list[PolicyDecision] = []
        seen: set[tuple[str, str]] = set()
        for rec, _ in ctx.scan((self.name, "conflicts"), ctx.records, lambda r: bool(getattr(r, "conflicts_with", ()))):
            for other_id in getattr(rec, "conflicts_with", ()) or ():
                other = ctx.record(other_id)
                pair = (min(rec.id, other_id), max(rec.id, other_id))
                if other is None or pair in seen or not ctx.live(rec.id) or not ctx.live(other_id):
                    continue
                if rec.id in omitted_now or other_id in omitted_now:
                    continue
                seen.add((pair[0], pair[1]))
                out += self._resolve(rec, other)
        return out

    def _resolve(self, a: Record, b: Record) -> list[PolicyDecision]:
        key_a, key_b = _strength(a), _strength(b)
        if self.conflicts == "prefer_trusted" and key_a != key_b:
            win, lose = (a, b) if key_a > key_b else (b, a)
            return [
                omit(self.name, lose.id, ReasonCode.CONFLICT_SUPPRESSED, f"conflicts with {win.id} (higher trust)"),
                mark(self.name, win.id, "conflict", f"conflicts with {lose.id} (suppressed)"),
            ]
        return [
            mark(self.name, a.id, "conflict", f"conflicts with {b.id}"),
            mark(self.name, b.id, "conflict", f"conflicts with {a.id}"),
        ]


def _sibling_results(ctx: StageContext, artifact_ids: set[str]) -> dict[str, bool]:
    """Artifact id → whether its tool exchange holds another result that is not among ``artifact_ids``."""
    out: dict[str, bool] = {}
    for unit in ctx.units:
        mine = [r.id for r in unit.records if r.id in artifact_ids]
        if not mine:
            continue
        others = any(isinstance(r, ToolArtifact) and r.id not in artifact_ids for r in unit.records)
        out.update(dict.fromkeys(mine, others))
    return out


def _strength(rec: Record) -> tuple[int, float]:
    return (-rec.trust.rank, float(getattr(rec, "confidence", 1.0)))


def _refused(new: Record, old: Record, cyclic: Mapping[str, int]) -> list[PolicyDecision] | None:
    """The marks of a supersession claim that is not honoured, or ``None`` when ``new`` may replace ``old``.

    Refused, in this order: a record naming itself (``supersession_ignored``); records that supersede each
    other in a cycle (both kept, ``conflict``); an older record (lower ``seq``, or an earlier
    ``observed_at`` when both have one) naming a newer one (both kept, ``conflict``); a record of lower
    trust naming one of higher trust (both kept, ``conflict``).
    """
    stage = ValidityStage.name
    if new.id == old.id:
        return [mark(stage, new.id, "supersession_ignored", f"{new.id} claims to supersede itself; ignored")]
    if new.id in cyclic and cyclic.get(new.id) == cyclic.get(old.id):
        detail = f"{new.id} and {old.id} supersede each other (a cycle); neither is honoured"
        return [mark(stage, new.id, "conflict", detail), mark(stage, old.id, "conflict", detail)]
    if _older(new, old):
        detail = (
            f"{new.id} (seq {new.seq}{_observed(new)}) claims to supersede the newer {old.id} "
            f"(seq {old.seq}{_observed(old)}); an older record cannot supersede a newer one"
        )
        return [mark(stage, new.id, "conflict", detail), mark(stage, old.id, "conflict", detail + "; not honoured")]
    if new.trust.rank > old.trust.rank:
        detail = f"{new.id} ({new.trust.value}) claims to supersede {old.id} ({old.trust.value})"
        return [
            mark(stage, new.id, "conflict", detail + "; lower trust does not override higher"),
            mark(stage, old.id, "conflict", detail + "; not honoured"),
        ]
    return None


def _older(new: Record, old: Record) -> bool:
    """Whether ``new`` is older than the record it claims to supersede (lower seq, or observed earlier)."""
    if new.seq < old.seq:
        return True
    new_at, old_at = getattr(new, "observed_at", None), getattr(old, "observed_at", None)
    return new_at is not None and old_at is not None and new_at < old_at


def _observed(rec: Record) -> str:
    at = getattr(rec, "observed_at", None)
    return f", observed {at.isoformat()}" if at is not None else ""


def _cycles(ctx: StageContext, claimants: Sequence[Record] | None = None) -> dict[str, int]:
    """Record id → cycle number, for records whose ``supersedes`` links lead back to themselves.

    Tarjan's strongly connected components over the explicit ``supersedes`` links among the candidates;
    a component of two or more records is a cycle (a record naming only itself is handled apart).
    """
    edges = {
        r.id: [o for o in (getattr(r, "supersedes", ()) or ()) if o != r.id and ctx.record(o) is not None]
        for r in (ctx.records if claimants is None else claimants)
        if getattr(r, "supersedes", ())
    }
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    out: dict[str, int] = {}

    def visit(root: str) -> None:
        work = [(root, iter(edges.get(root, ())))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(edges.get(child, ()))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                members = []
                while True:
                    top = stack.pop()
                    on_stack.discard(top)
                    members.append(top)
                    if top == node:
                        break
                if len(members) > 1:
                    number = len(set(out.values()))
                    out.update(dict.fromkeys(members, number))

    for rid in edges:
        if rid not in index:
            visit(rid)
    return out


def _claims(rec: Record) -> bool:
    """Whether a record can supersede anything: it lists ``supersedes``, or it is a checkpoint."""
    return bool(getattr(rec, "supersedes", ())) or isinstance(rec, Checkpoint)


def _may_go_stale(rec: Record) -> bool:
    """Whether staleness can apply at all: a time bound, a source version, or provenance to check."""
    if isinstance(rec, ToolMemory) or getattr(rec, "source_version", None):
        return True
    freshness = getattr(rec, "freshness", None)
    if freshness is Freshness.PERMANENT:
        return False
    return getattr(rec, "stale_after", None) is not None or (
        freshness is not None and getattr(rec, "observed_at", None) is not None
    )


def _supersedes(new: Record, ctx: StageContext) -> list[str]:
    ids = list(getattr(new, "supersedes", ()) or ())
    if isinstance(new, Checkpoint):
        ids += [
            r.id
            for r in ctx.records
            if isinstance(r, Checkpoint)
            and r.seq < new.seq
            and r.run_id == new.run_id
            and r.owner_participant_id == new.owner_participant_id
        ]
    return ids


def _stale_by_time(rec: Record, now: Any, ttl: Mapping[str, int]) -> str:
    freshness = getattr(rec, "freshness", None)
    if freshness is Freshness.PERMANENT:
        return ""
    stale_after = getattr(rec, "stale_after", None)
    if stale_after is not None:
        return f"stale since {stale_after.isoformat()}" if now > stale_after else ""
    observed = getattr(rec, "observed_at", None)
    if freshness is None or observed is None:
        return ""
    limit = ttl.get(freshness.value)
    if limit is not None and now > observed + timedelta(seconds=limit):
        return f"{freshness.value} observation from {observed.isoformat()} is older than {limit} s"
    return ""


def _current_versions(ctx: StageContext) -> dict[str, str]:
    current: dict[str, str] = {}
    versioned = ctx.scan("source_version", ctx.records, lambda r: bool(getattr(r, "source_version", None)))
    for rec, _ in versioned:  # seq order: the newest observation of a source wins
        value = getattr(rec, "source_version", None)
        if value and ctx.in_lineage(rec):
            source, version = split_version(value)
            current[source] = version
    current.update({str(k): str(v) for k, v in (request_attr(ctx, "source_versions", None) or {}).items()})
    return current


def _stale_by_version(rec: Record, current: Mapping[str, str]) -> str:
    value = getattr(rec, "source_version", None)
    if not value:
        return ""
    source, version = split_version(value)
    now = current.get(source)
    if now is None or now == version:
        return ""
    label = f"{source}@" if source else ""
    return f"derived from {label}{version}; current is {label}{now}"


_SHA256_HEX = frozenset("0123456789abcdef")


def _is_sha256(value: str) -> bool:
    return len(value) == 64 and set(value) <= _SHA256_HEX
