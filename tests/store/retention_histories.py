"""Random histories and retention rule sets for the retention tests (hypothesis strategies).

A history is one conversation of tenant ``a``: user turns, assistant replies and tool exchanges (an
assistant message, its calls, their results as blobs) with memories derived from some results, each record
with its own age and privacy class and a unique marker string in its content, so a test can tell exactly
whose content a payload shows. Tenant ``b`` holds one young tool exchange whose result has the same bytes
as one of ``a``'s: its blob must survive whatever retention does to ``a``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from hypothesis import strategies as st

from ctxledger.records import (
    Conversation,
    Message,
    Record,
    Role,
    ToolArtifact,
    ToolCall,
    ToolMemory,
)
from ctxledger.retention.rules import RETAINABLE_KINDS, Action, RetentionRule, RetentionRules
from ctxledger.store.base import GraphStore

NOW = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)
PRIVACY = ("internal", "confidential")


@dataclass
class History:
    """The records written, each record's content marker, and tenant b's shared artifact."""

    records: list[Record] = field(default_factory=list)
    markers: dict[str, str] = field(default_factory=dict)
    blobs: dict[str, bytes] = field(default_factory=dict)
    shared: ToolArtifact | None = None
    b_records: list[Record] = field(default_factory=list)


@st.composite
def histories(draw: Any) -> History:
    """A random history (see the module docstring); ages in days, oldest first, none younger than 1 day."""
    steps = draw(st.lists(st.sampled_from(["chat", "tool", "tool2"]), min_size=1, max_size=5))
    ages = sorted(draw(st.lists(st.integers(1, 120), min_size=60, max_size=60)), reverse=True)
    h = History()
    env = {"tenant_id": "a", "conversation_id": "c", "branch_id": "c/main"}
    n = iter(range(1000))

    def stamp() -> dict[str, Any]:
        i = next(n)
        return {
            **env,
            "created_at": NOW - timedelta(days=ages[min(i, 59)], minutes=-i),
            "privacy_class": draw(st.sampled_from(PRIVACY)),
        }

    h.records.append(Conversation(id="c", **{**stamp(), "privacy_class": "internal"}))
    for s, kind in enumerate(steps):
        uid = f"c/u{s}"
        h.markers[uid] = f"USERMARK{s}Q"
        h.records.append(Message(id=uid, role=Role.USER, content=f"question {h.markers[uid]}", **stamp()))
        if kind == "chat":
            aid = f"c/a{s}"
            h.markers[aid] = f"REPLYMARK{s}Q"
            h.records.append(Message(id=aid, role=Role.ASSISTANT, content=f"answer {h.markers[aid]}", **stamp()))
            continue
        mid = f"c/m{s}"
        text = draw(st.booleans())
        if text:
            h.markers[mid] = f"CALLERMARK{s}Q"
        h.records.append(
            Message(id=mid, role=Role.ASSISTANT, content=f"looking {h.markers[mid]}" if text else None, **stamp())
        )
        for k in range(2 if kind == "tool2" else 1):
            cid, rid = f"c/t{s}{k}", f"c/r{s}{k}"
            h.records.append(
                ToolCall(id=cid, message_id=mid, call_id=f"call_{s}{k}", name="lookup", index=k, **stamp())
            )
            h.markers[rid] = f"RESULTMARK{s}{k}Q"
            data = f'{{"row": "{h.markers[rid]}"}}'.encode()
            sha = _sha(data)
            h.blobs[sha] = data
            art = ToolArtifact(
                id=rid, tool_call_id=cid, call_id=f"call_{s}{k}", name="lookup", sha256=sha,
                size_bytes=len(data), **stamp(),
            )
            h.records.append(art)
            if h.shared is None:
                h.shared = art
            if draw(st.booleans()):
                mem_id = f"c/mem{s}{k}"
                h.markers[mem_id] = f"MEMORYMARK{s}{k}Q"
                h.records.append(
                    ToolMemory(
                        id=mem_id, summary=f"lookup found {h.markers[mem_id]}", source_artifact_ids=(rid,),
                        locators=({"artifact_id": rid, "sha256": sha},), **stamp(),
                    )
                )
    last = f"c/u{len(steps)}"
    h.markers[last] = "LASTMARKQ"
    h.records.append(Message(id=last, role=Role.USER, content=f"and now? {h.markers[last]}", **stamp()))
    if h.shared is not None:
        h.b_records = _tenant_b(h.shared)
    return h


def _tenant_b(shared: ToolArtifact) -> list[Record]:
    env = {"tenant_id": "b", "conversation_id": "c", "branch_id": "c/main", "created_at": NOW}
    return [
        Conversation(id="c", **env),
        Message(id="c/u0", role=Role.USER, content="look it up", **env),
        Message(id="c/m0", role=Role.ASSISTANT, content=None, **env),
        ToolCall(id="c/t0", message_id="c/m0", call_id="call_b", name="lookup", **env),
        ToolArtifact(
            id="c/r0", tool_call_id="c/t0", call_id="call_b", name="lookup", sha256=shared.sha256,
            size_bytes=shared.size_bytes, **env,
        ),
        Message(id="c/u1", role=Role.USER, content="thanks", **env),
    ]


def _sha(data: bytes) -> str:
    import hashlib

    return hashlib.sha256(data).hexdigest()


@st.composite
def rule_sets(draw: Any) -> RetentionRules:
    """1-4 rules over random kinds, privacy classes (or all), ages of 1-120 days and actions."""
    rules = []
    for i in range(draw(st.integers(1, 4))):
        kinds = draw(st.lists(st.sampled_from(RETAINABLE_KINDS), min_size=1, max_size=3, unique=True))
        privacy = draw(st.lists(st.sampled_from(PRIVACY), max_size=2, unique=True))
        rules.append(
            RetentionRule(
                name=f"rule-{i}",
                kinds=tuple(kinds),
                privacy=tuple(privacy),
                after_days=draw(st.integers(1, 120)),
                action=draw(st.sampled_from([a.value for a in Action])),
            )
        )
    return RetentionRules(tuple(rules))


def write(store: GraphStore, h: History) -> None:
    """Put the blobs and append both tenants' records."""
    for data in h.blobs.values():
        store.blobs.put(data)
    store.append(h.records)
    if h.b_records:
        store.append(h.b_records)


def acted(h: History, rules: RetentionRules) -> dict[str, RetentionRule]:
    """Record id → the rule that removes or replaces its content at :data:`NOW` (keep rules left out)."""
    out = {}
    for rec in h.records:
        rule = rules.rule_for(rec, NOW)
        if rule is not None and rule.action != Action.KEEP and rec.id in h.markers:
            out[rec.id] = rule
    return out
