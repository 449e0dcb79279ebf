"""Why the replay of a stored assembly is not the same call, and what the caller can do about it.

A manifest kept as a summary (the default trace) answers for a record it does not list by replaying the
assembly (:meth:`ctxledger.ledger.Ledger.replay`). When the replay differs from the stored call, the answer is
"unknown" with a :class:`ReplayMismatch`: a sentence naming what differs, which also carries its ``kind`` so that
:func:`replay_remedy` picks its advice from the kind, not from the sentence's wording.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any, Literal

from ctxledger.store.base import AuditEntry

MismatchKind = Literal[
    "assembler_version", "replay_failed", "policy_hash", "retention", "relevance", "relevance_signals", "payload_hash"
]
"""What differs: the code (``assembler_version``), the replay itself raised (``replay_failed``), the policy
(``policy_hash``), the store's records because a retention rule or a request to be forgotten deleted or rewrote
some of them after the assembly (``retention``), the semantic extra or its model (``relevance``), the relevance
signals that act on the snapshot's units (``relevance_signals``: its speakers or days differ), or the payload under
the same policy and code (``payload_hash``: the store, the counter or the clock)."""

SIGNALS = frozenset({"speaker", "date", "session"})
"""The ``+<signal>`` suffixes of a manifest's ``policy.relevance`` that follow the snapshot's units, not the code
(:func:`ctxledger.assemble.relevance.relevance_name`)."""

REMEDIES: dict[str, str] = {
    "policy_hash": (
        "pass the policy the assembly was made under (policy= in the library, --policy FILE on the command line, "
        "as given to assemble)"
    ),
    "relevance": "explain with the relevance the assembly was made with (install or remove the semantic extra)",
    "retention": (
        "the records as the assembly saw them are gone, so its omissions cannot be re-derived; assemble with "
        "trace='full' (--trace full) to keep why each record was left out"
    ),
    "relevance_signals": (
        "the records of the snapshot are not those the assembly read; assemble with trace='full' (--trace full) "
        "to keep why each record was left out"
    ),
    "assembler_version": (
        "explain with the ctxledger version that made the assembly, or assemble with trace='full' to keep why"
    ),
}
GENERIC_REMEDY = (
    "pass the policy and counter the assembly was made with, or assemble with trace='full' (--trace full) so the "
    "record keeps every omitted item"
)


class ReplayMismatch(str):
    """A sentence saying what differs between a stored assembly and its replay, with its ``kind``.

    It is a ``str`` (the sentence), so it prints and formats as one; ``kind`` is a :data:`MismatchKind`.
    """

    __slots__ = ("kind",)
    kind: MismatchKind

    def __new__(cls, kind: MismatchKind, sentence: str) -> ReplayMismatch:
        """Make the sentence ``sentence`` of kind ``kind``."""
        made = super().__new__(cls, sentence)
        made.kind = kind
        return made


def replay_remedy(why: ReplayMismatch | str) -> str:
    """What to do so that a replay that differed for ``why`` is the same call.

    A plain string (a mismatch read back from somewhere that kept only its sentence) gets the generic advice.
    """
    return REMEDIES.get(getattr(why, "kind", ""), GENERIC_REMEDY)


def relevance_parts(name: str) -> tuple[str, tuple[str, ...]]:
    """``(scorer, signals)`` of a manifest's ``policy.relevance``: ``"bm25+m+speaker"`` → ``("bm25+m", ("speaker",))``.

    The scorer (BM25, with the semantic model when one was mixed in) follows the code and its extras; the signals
    (:data:`SIGNALS`) follow the snapshot's units.
    """
    parts = name.split("+")
    cut = len(parts)
    while cut > 1 and parts[cut - 1] in SIGNALS:
        cut -= 1
    return "+".join(parts[:cut]), tuple(parts[cut:])


def relevance_mismatch(then: str, now: str) -> ReplayMismatch:
    """What differs between the relevance an assembly recorded (``then``) and its replay's (``now``).

    Kind ``relevance`` when the scorer differs (the semantic extra or its model), else ``relevance_signals`` (the
    snapshot's speakers or days differ: the store's records are not what the assembly read).
    """
    (scorer_then, signals_then), (scorer_now, signals_now) = relevance_parts(then), relevance_parts(now)
    if scorer_then != scorer_now:
        return ReplayMismatch(
            "relevance", f"relevance {then} then, {now} now (the semantic extra or its model differs)"
        )
    shown = ", ".join(signals_then) or "none"
    return ReplayMismatch(
        "relevance_signals",
        f"relevance signals {shown} then, {', '.join(signals_now) or 'none'} now under the same scorer {scorer_now} "
        "(the snapshot's speakers or days differ: its records are not those the assembly read)",
    )


def retention_mismatch(manifest: Mapping[str, Any], audit: Sequence[AuditEntry]) -> ReplayMismatch | None:
    """Kind ``retention`` when retention changed records of ``manifest``'s conversation after the assembly.

    Args:
        manifest: a stored manifest (``created_at``, ``included`` and ``retention`` are read).
        audit: the retention audit trail of the manifest's conversation (``GraphStore.retention_audit``).

    Returns:
        A sentence counting the records deleted, redacted … after ``created_at`` (or, whenever done, an included
        one), naming the rules and the last time; or the manifest's own ``retention`` note when a rule reduced
        it to its summary; ``None`` when retention changed nothing the assembly read.
    """
    since = _created_at(manifest)
    shown = {e.get("ref") for e in manifest.get("included") or ()}
    changed = [
        e
        for e in audit
        if e.target == "record" and (e.ref in shown or (since is not None and e.at >= since))
    ]
    if changed:
        actions = Counter(e.action for e in changed)
        done = ", ".join(f"{_ACTED.get(a, a)} {n}" for a, n in sorted(actions.items()))
        rules = ", ".join(sorted({e.rule for e in changed}))
        last = max(e.at for e in changed).isoformat(timespec="seconds").replace("+00:00", "Z")
        return ReplayMismatch(
            "retention",
            f"retention changed {len({e.ref for e in changed})} record(s) of conversation "
            f"{manifest.get('conversation_id')} after the assembly ({done}; rule {rules}, last at {last})",
        )
    note = (manifest.get("retention") or {}).get("detail")
    return ReplayMismatch("retention", f"the stored {note}") if note else None


_ACTED = {"delete": "deleted", "redact": "redacted", "hash_only": "reduced to a hash", "summary": "summarised"}


def _created_at(manifest: Mapping[str, Any]) -> datetime | None:
    """The manifest's ``created_at`` as an aware datetime, ``None`` when absent or unreadable."""
    try:
        found = datetime.fromisoformat(str(manifest.get("created_at")))
    except ValueError:
        return None
    return found if found.tzinfo is not None else None
