"""ctxledger's default policy as an evaluation :class:`~ctxledger.eval.base.Selector`.

The adapter does what an agent using ctxledger does, nothing more: it records the candidate turns of a
:class:`~ctxledger.eval.base.SelectionTask` as graph records in an in-memory ledger (one conversation,
appended to as the history grows, as a deployed ledger is), then asks :meth:`Ledger.assemble
<ctxledger.ledger.Ledger.assemble>` for the next call under the task's budget and reads the answer back
from the manifest. Policy, protection, relevance, the representation ladder and selection are the core's;
the harness then judges the result like any other selector's.

Mapping (one record per turn, ids ``<conversation>/<seq>``, ``external_id`` = the item id):

* ``system`` / ``developer`` / ``user`` / ``assistant`` items become :class:`~ctxledger.records.Message`
  records (named ``meta["speaker"]`` when the item has one, as LoCoMo's turns do); an assistant item's calls
  become :class:`~ctxledger.records.ToolCall` records of it;
* a ``tool`` item becomes the :class:`~ctxledger.records.ToolArtifact` of the open call it answers (its
  text stored as the raw blob, ``failed`` when ``is_error``); a result whose call is not among the
  candidates cannot be sent validly and is not recorded (counted in ``details["orphan_results"]``).

Budget: the current user turn of evidence datasets (``query_tokens``) is not a history item; it is the
request's ``query`` and its tokens are reserved, so the assembly gets ``W = budget − query_tokens`` with
no output reserve or margin (the harness's budget is already the input budget, ``B_input``).

Costs: a verbatim turn costs exactly what the harness charges for its item (:attr:`EvalItem.tokens`,
the cl100k count of the OpenAI Chat Completions form with framing); a turn the policy derived (an excerpt
of a long tool output, a status stub for an unanswered call) is counted with the same rule
(:func:`~ctxledger.eval.datasets.chat_tokens`) and counter on its own text. Items sent in a derived form
are reported in ``details["sent_texts"]`` with the text sent, so the harness recounts what was sent
rather than the verbatim item: the payload it judges is the payload the assembler budgeted.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from ctxledger.assemble.assembler import Assembly
from ctxledger.errors import RequiredBlocksDoNotFit
from ctxledger.eval.base import REQUEST_BASE_TOKENS, EvalItem, Selection, SelectionTask
from ctxledger.eval.datasets import chat_tokens
from ctxledger.hashing import sha256_hex
from ctxledger.ledger import Ledger
from ctxledger.policy.base import Policy
from ctxledger.records import (
    Branch,
    Conversation,
    Message,
    Record,
    Role,
    ToolArtifact,
    ToolCall,
    ToolStatus,
    Trust,
)
from ctxledger.serialize import get_serializer
from ctxledger.serialize.base import Turn
from ctxledger.store.memory import MemoryStore
from ctxledger.tokens import TokenCounter
from ctxledger.units import content_text

__all__ = ["EVAL_NOW", "STABLE", "ItemCoster", "PolicySelector", "register", "stable_policy"]

EVAL_NOW = datetime(2026, 1, 1, tzinfo=UTC)
"""The request clock of every evaluation assembly (freshness rules see the same time in every run)."""

_BASE_TIME = datetime(2024, 1, 1, tzinfo=UTC)
_ROLES = {"system": Role.SYSTEM, "developer": Role.DEVELOPER, "user": Role.USER, "assistant": Role.ASSISTANT}
_TRUST = {"system": Trust.SYSTEM, "developer": Trust.DEVELOPER, "user": Trust.USER}
_TEXT = "text/plain; charset=utf-8"


class ItemCoster:
    """Costs turns in tokens as the harness does (see the module docstring).

    Args:
        counter: the harness's exact counter.
        api: the serializer that prices derived turns (``openai-chat``, the harness's format).
    """

    def __init__(self, counter: TokenCounter, api: str = "openai-chat") -> None:
        self.serializer = get_serializer(api)
        self._counter = counter
        self.counter_id = f"eval-items/{counter.id}"
        self.is_estimate = counter.is_estimate
        self._verbatim: dict[str, tuple[Any, int]] = {}

    def register(self, ref: str, content: Any, tokens: int) -> None:
        """Price the verbatim turn of record ``ref`` (content as recorded) at ``tokens``."""
        self._verbatim[ref] = (content, tokens)

    def turn_tokens(self, turn: Turn) -> int:
        """The item's cost for a verbatim turn; :func:`chat_tokens` of the turn's own text for any other."""
        known = self._verbatim.get(turn.ref)
        if known is not None and known[0] == turn.content:
            return known[1]
        return chat_tokens(self._counter, turn.role, content_text(turn.content), tool_calls=turn.tool_calls)

    def tools_tokens(self, tools: Sequence[Mapping[str, Any]]) -> int:
        """Tokens of tool schemas (the evaluation datasets carry none)."""
        return self.serializer.tools_tokens(tools, self._counter) if tools else 0

    def base_tokens(self) -> int:
        """The request base the harness charges (:data:`REQUEST_BASE_TOKENS`)."""
        return REQUEST_BASE_TOKENS

    def prefetch(self, turns: Sequence[Turn]) -> None:
        """Nothing to warm: verbatim costs are known, derived ones are counted on demand."""

    def merged_framing(self, turns: Sequence[Turn]) -> int:
        """The harness prices each item alone: nothing is merged."""
        return 0


@dataclass
class _History:
    """One conversation recorded in its own in-memory ledger, extended as later tasks add turns."""

    ledger: Ledger
    conversation_id: str
    coster: ItemCoster
    ids: list[str] = field(default_factory=list)
    item_of: dict[str, str] = field(default_factory=dict)
    content_of: dict[str, str] = field(default_factory=dict)
    """Record id → the text recorded, for the records whose turn carries an item's text (messages, results)."""
    version_of: dict[str, str] = field(default_factory=dict)
    """Record id → ``sha256:<hex>`` of that text (the version a derived representation was made from)."""
    open_calls: dict[str, ToolCall] = field(default_factory=dict)
    orphans: int = 0

    def extends_to(self, items: Sequence[EvalItem]) -> bool:
        """Whether ``items`` starts with exactly the turns recorded so far."""
        n = len(self.ids)
        return len(items) >= n and [item.id for item in items[:n]] == self.ids


class PolicySelector:
    """A :class:`~ctxledger.eval.base.Selector` that assembles with a ctxledger :class:`Policy`.

    Args:
        counter: the harness's exact counter (item costs were measured with it).
        policy: the policy (default: :func:`ctxledger.policy.default.default_policy`).
        name: the report label (default :data:`ctxledger.eval.harness.OURS`).
        cache_size: conversations kept recorded at once (each extended in place when a task adds turns).
    """

    def __init__(
        self,
        counter: TokenCounter,
        policy: Policy | None = None,
        *,
        name: str = "ctxledger-default",
        cache_size: int = 4,
    ) -> None:
        self.counter = counter
        self.policy = policy
        self.name = name
        self.cache_size = cache_size
        self._histories: list[_History] = []
        self._made = 0

    def select(self, task: SelectionTask) -> Selection:
        """Assemble the call of ``task`` and report the included items, tokens, hash and manifest facts.

        A task whose required blocks do not fit, or whose budget is not larger than the question
        (``budget_tokens <= query_tokens``), gives a non-fitting selection (nothing sent), with the error in
        ``details["error"]``.
        """
        started = time.perf_counter()
        history = self._history(task.items)
        window = task.budget_tokens - task.query_tokens
        if window < 1:
            details = {
                "error": f"the budget of {task.budget_tokens} tokens leaves no room beside the question's "
                f"{task.query_tokens} tokens",
                "orphan_results": history.orphans,
            }
            return Selection([], task.query_tokens, time.perf_counter() - started, fits=False, details=details)
        try:
            asm = history.ledger.assemble(
                history.conversation_id,
                persist=False,
                coster=history.coster,
                query=task.query,
                window_tokens=window,
                output_tokens=0,
                margin_tokens=0,
                now=EVAL_NOW,
            )
        except RequiredBlocksDoNotFit as exc:
            details = {"error": str(exc), "orphan_results": history.orphans}
            return Selection([], exc.required_tokens, time.perf_counter() - started, fits=False, details=details)
        latency = time.perf_counter() - started
        included = _included_items(asm.manifest, history.item_of)
        return Selection(
            included_ids=included,
            payload_tokens=asm.input_tokens + task.query_tokens,
            latency_s=latency,
            payload_hash=asm.payload_hash,
            details=_details(asm, history, task.query_tokens),
        )

    # -- recording ----------------------------------------------------------------------------------

    def _history(self, items: Sequence[EvalItem]) -> _History:
        """The recorded conversation whose turns ``items`` extends (new turns appended), or a new one."""
        for n, history in enumerate(self._histories):
            if history.extends_to(items):
                self._histories.insert(0, self._histories.pop(n))
                _append(history, items[len(history.ids) :])
                return history
        history = self._new_history()
        _append(history, items)
        self._histories = [history, *self._histories[: self.cache_size - 1]]
        return history

    def _new_history(self) -> _History:
        self._made += 1
        conv = f"eval-{self._made}"
        ledger = Ledger(MemoryStore(), policy=self.policy)
        main = f"{conv}/main"
        scope: dict[str, Any] = {
            "tenant_id": "default",
            "conversation_id": conv,
            "branch_id": main,
            "created_at": _BASE_TIME,
        }
        ledger.append(
            [
                Conversation(id=conv, trust=Trust.SYSTEM, title=conv, **scope),
                Branch(id=main, trust=Trust.SYSTEM, name="main", **scope),
            ]
        )
        return _History(ledger, conv, ItemCoster(self.counter))


def _append(history: _History, items: Sequence[EvalItem]) -> None:
    """Record ``items`` (see the module docstring for the mapping) in one append."""
    if not items:
        return
    records: list[Record] = []
    for item in items:
        records.extend(_records(history, item))
        history.ids.append(item.id)
    history.ledger.append(records)


def _records(history: _History, item: EvalItem) -> list[Record]:
    seq = len(history.ids)
    rid = f"{history.conversation_id}/{seq}"
    env: dict[str, Any] = {
        "tenant_id": "default",
        "conversation_id": history.conversation_id,
        "branch_id": f"{history.conversation_id}/main",
        "created_at": _written_at(item, seq),
        "external_id": item.id,
    }
    if item.role == "tool":
        return _result(history, item, rid, env)
    content = item.text if item.text or not item.tool_calls else None
    speaker = item.meta.get("speaker")
    message = Message(
        id=rid,
        role=_ROLES[item.role],
        content=content,
        name=speaker if isinstance(speaker, str) and speaker else None,
        trust=_TRUST.get(item.role, Trust.VERIFIED_INTERNAL),
        **env,
    )
    _remember(history, rid, item)
    history.coster.register(rid, content, item.tokens)
    out: list[Record] = [message]
    for k, call in enumerate(item.tool_calls):
        record = ToolCall(
            id=f"{rid}#call{k}",
            trust=Trust.VERIFIED_INTERNAL,
            message_id=rid,
            call_id=call.call_id,
            name=call.name,
            arguments=call.arguments,
            index=k,
            **{**env, "external_id": None},
        )
        history.item_of[record.id] = item.id
        history.open_calls[call.call_id] = record
        out.append(record)
    return out


def _written_at(item: EvalItem, seq: int) -> datetime:
    """When the item was written: its ``meta["written_at"]`` (LoCoMo's session times), else one second per seq."""
    found = item.meta.get("written_at")
    if isinstance(found, str):
        try:
            return datetime.fromisoformat(found)
        except ValueError:
            pass
    return _BASE_TIME + timedelta(seconds=seq)


def _remember(history: _History, rid: str, item: EvalItem) -> None:
    history.item_of[rid] = item.id
    history.content_of[rid] = item.text
    history.version_of[rid] = f"sha256:{sha256_hex(item.text.encode('utf-8'))}"


def _result(history: _History, item: EvalItem, rid: str, env: dict[str, Any]) -> list[Record]:
    call = history.open_calls.pop(item.tool_call_id or "", None)
    if call is None:
        history.orphans += 1
        return []
    data = item.text.encode("utf-8")
    ref = history.ledger.store.blobs.put(data, _TEXT)
    _remember(history, rid, item)
    history.coster.register(rid, item.text, item.tokens)
    return [
        ToolArtifact(
            id=rid,
            trust=Trust.TOOL_RESULT,
            tool_call_id=call.id,
            call_id=call.call_id,
            name=call.name,
            sha256=ref.sha256,
            size_bytes=len(data),
            media_type=_TEXT,
            status=ToolStatus.FAILED if item.is_error else ToolStatus.SUCCEEDED,
            **env,
        )
    ]


# -- reading the manifest back ------------------------------------------------------------------------


def _included_items(manifest: Mapping[str, Any], item_of: Mapping[str, str]) -> list[str]:
    """Item ids of the records the payload carries, in payload order, each once."""
    seen: dict[str, None] = {}
    for entry in manifest["included"]:
        item = item_of.get(entry["ref"])
        if item is not None:
            seen.setdefault(item, None)
    return list(seen)


def _details(asm: Assembly, history: _History, query_tokens: int) -> dict[str, Any]:
    """Manifest facts for the harness: derived items and their sent text, occupancy per class, omissions."""
    manifest = asm.manifest
    classes = manifest["ledger"]["classes"]
    occupancy = {c: v["used"] for c, v in classes.items() if v["used"]}
    if query_tokens:
        occupancy["conversation"] = occupancy.get("conversation", 0) + query_tokens
    derived = [
        {
            "item": history.item_of[e["ref"]],
            "sources": sorted({loc["artifact_id"] for loc in e["locators"]}) or [e["ref"]],
            "source_version": e["source_version"] or history.version_of[e["ref"]],
            "transform": e["transform"],
            "representation": e["representation"],
        }
        for e in manifest["included"]
        if e["representation"] != "verbatim" and e["ref"] in history.content_of
    ]
    return {
        "derived": derived,
        "sent_texts": _sent_texts(asm, history),
        "occupancy_tokens": occupancy,
        "omitted_by_reason": dict(manifest["omitted_by_reason"]),
        "relevance": manifest["policy"].get("relevance"),
        "orphan_results": history.orphans,
    }


def _sent_texts(asm: Assembly, history: _History) -> dict[str, str]:
    """Item id → the text its payload message carries, for every item not sent as recorded.

    Read from the payload itself (an excerpt, an extraction, a reference, or a turn the policy marked),
    so the harness recounts exactly what was sent.
    """
    messages = asm.payload.get("messages", [])
    out: dict[str, str] = {}
    for ref, message in zip(asm.turn_refs, messages, strict=True):
        recorded = history.content_of.get(ref)
        text = content_text(message.get("content"))
        if recorded is not None and text != recorded:
            out[history.item_of[ref]] = text
    return out


STABLE = "ctxledger-stable"
"""The default policy with prefix-stable selection on (``selection.stable_prefix``), for ``eval caching``."""


def stable_policy() -> Policy:
    """The default policy with ``selection.stable_prefix`` on (:mod:`ctxledger.assemble.stability`)."""
    import dataclasses

    from ctxledger.policy.default import default_policy

    base = default_policy()
    return dataclasses.replace(base, selection=dataclasses.replace(base.selection, stable_prefix=True))


def register(*, replace: bool = True) -> None:
    """Register :class:`PolicySelector` with the harness as :data:`ctxledger.eval.harness.OURS` and :data:`STABLE`."""
    from ctxledger.eval.harness import OURS, register_selector

    register_selector(OURS, lambda counter: PolicySelector(counter, name=OURS), replace=replace)
    register_selector(STABLE, lambda counter: PolicySelector(counter, stable_policy(), name=STABLE), replace=replace)
