"""Token reduction against full replay on real tau-bench trajectories at the demo's 8k window.

The trajectory bundled for ``ctxledger demo`` (tau-bench airline task 33, trial 0) is the headline; every
trajectory of the shared tau-bench file is assessed too. Each is imported with the tau-bench importer
(``Error: …`` results are failed calls) and its next model call is assembled with the demo's budget:
``W = 8,000``, ``O = 1,000``, ``M = 200``, so ``B_input = 6,800`` tokens. Full replay is the manifest's
``tokens.replay`` (every turn of the history serialized, plus reply priming and tool schemas), the
same count the demo reports. A trajectory whose replay already fits is reported with 0% reduction.

"No required item lost" is checked twice: every unit the policy marked ``require`` is in the payload,
and, independently of the policy code, the records a user would call required are in it: the system
instructions, the latest user turn, every pending or deferred call, and every failed call not followed
by a success of the same tool. A ``RequiredBlocksDoNotFit`` error counts as a failure
to assemble and is reported, never hidden.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench.backends import Backend
from bench.ours import TENANT, AssemblyParams, open_ledger
from ctxledger.errors import RequiredBlocksDoNotFit
from ctxledger.ledger import Ledger
from ctxledger.records import Message, Record, Role, ToolArtifact, ToolCall, ToolStatus


@dataclass(frozen=True, slots=True)
class TrajectoryResult:
    """One trajectory assembled at the budget (tokens).

    Attributes:
        conversation_id: the imported conversation.
        events: messages in the trajectory (records of kind message + tool artifact).
        replay_tokens: full replay.
        input_tokens: the assembled payload (0 when assembly failed).
        lost: required record ids missing from the payload (policy's and independent check's union).
        error: the ``RequiredBlocksDoNotFit`` message, if any.
    """

    conversation_id: str
    events: int
    replay_tokens: int
    input_tokens: int
    lost: tuple[str, ...]
    error: str | None = None

    @property
    def reduction(self) -> float:
        """``1 − input / replay`` (0.0 when nothing was assembled)."""
        if self.error or not self.replay_tokens:
            return 0.0
        return 1.0 - self.input_tokens / self.replay_tokens


def independent_required(records: Sequence[Record]) -> set[str]:
    """Record ids that must reach the model whatever the policy says (see the module docstring)."""
    required = {r.id for r in records if isinstance(r, Message) and r.role in (Role.SYSTEM, Role.DEVELOPER)}
    users = [r for r in records if isinstance(r, Message) and r.role is Role.USER]
    if users:
        required.add(users[-1].id)
    answered = {r.tool_call_id for r in records if isinstance(r, ToolArtifact)}
    required |= {
        r.id
        for r in records
        if isinstance(r, ToolCall) and r.id not in answered and r.status is not ToolStatus.SUCCEEDED
    }
    succeeded_later: set[str] = set()
    for r in reversed(records):
        if isinstance(r, ToolArtifact):
            if r.status is ToolStatus.FAILED and r.name not in succeeded_later:
                required.add(r.id)
            elif r.status is ToolStatus.SUCCEEDED:
                succeeded_later.add(r.name)
    return required


def _events(records: Sequence[Record]) -> int:
    return sum(1 for r in records if isinstance(r, Message | ToolArtifact))


def assess(ledger: Ledger, conversation_id: str, params: AssemblyParams) -> TrajectoryResult:
    """Assemble one conversation at ``params`` and check it (see the module docstring)."""
    records = ledger.store.records(TENANT, conversation_id)
    try:
        asm = ledger.assemble(conversation_id, tenant_id=TENANT, **params.request())
    except RequiredBlocksDoNotFit as exc:
        return TrajectoryResult(conversation_id, _events(records), 0, 0, (), str(exc))
    manifest = asm.manifest
    included = {e["ref"] for e in manifest["included"]} | {e.get("unit") for e in manifest["included"]}
    policy_required = {d["ref"] for d in manifest["decisions"] if d["outcome"] == "require"}
    lost = sorted((policy_required | independent_required(records)) - included)
    return TrajectoryResult(
        conversation_id, _events(records), manifest["tokens"]["replay"], asm.input_tokens, tuple(lost)
    )


def bundled_trajectory() -> Path | None:
    """The tau-bench trajectory bundled with the package for ``ctxledger demo``, if this checkout has it."""
    try:
        from ctxledger import demo
    except ImportError:
        return None
    path = Path(demo.__file__).with_name("_demo") / demo.DEMO_FILE
    return path if path.is_file() else None


def _assess_demo_call(ledger: Ledger, params: AssemblyParams) -> TrajectoryResult:
    """The demo's own call: the bundled trajectory with its bundled tool schemas, as ``ctxledger demo`` makes it."""
    from ctxledger import demo

    demo.ensure_imported(ledger, tenant_id=TENANT)
    demo.ensure_tools(ledger, tenant_id=TENANT)
    return assess(ledger, demo.DEMO_CONVERSATION, params)


def _import_and_assess(ledger: Ledger, path: Path, params: AssemblyParams) -> list[TrajectoryResult]:
    result = ledger.import_file(path, "tau-bench", count_tokens_for=params.model)
    return [assess(ledger, cid, params) for cid in result.conversation_ids]


def _summary(results: Sequence[TrajectoryResult], params: AssemblyParams) -> dict[str, Any]:
    ok = [r for r in results if r.error is None]
    over = [r for r in ok if r.replay_tokens > params.input_tokens]
    return {
        "trajectories": len(results),
        "assembled": len(ok),
        "failed": len(results) - len(ok),
        "over_budget": len(over),
        "median_reduction_over_budget": statistics.median([r.reduction for r in over]) if over else 0.0,
        "total_replay_tokens": sum(r.replay_tokens for r in ok),
        "total_input_tokens": sum(r.input_tokens for r in ok),
        "required_lost": sum(len(r.lost) for r in results),
    }


def tau_bench_quality(backend: Backend, dataset: Path, params: AssemblyParams, headline: Path | None) -> dict[str, Any]:
    """Assess the headline trajectory file and every trajectory of ``dataset`` at ``params``.

    Args:
        backend: a fresh store.
        dataset: a tau-bench trajectories file (every trajectory is assessed).
        params: the budget (the demo's: ``W`` 8,000, ``O`` 1,000, ``M`` 200).
        headline: the trajectory to headline (the bundled one); ``None`` → the dataset's largest replay.

    Returns:
        ``{"budget", "headline_source", "dataset", "headline", "summary", "trajectories"}``.
    """
    with open_ledger(backend) as ledger:
        results = _import_and_assess(ledger, dataset, params)
        if headline is not None and headline == bundled_trajectory():
            top = _assess_demo_call(ledger, params)
        elif headline is not None:
            top = _import_and_assess(ledger, headline, params)[0]
        else:
            top = max(results, key=lambda r: r.replay_tokens)
    return {
        "budget": {
            "window": params.window_tokens,
            "output": params.output_tokens,
            "margin": params.margin_tokens,
            "input": params.input_tokens,
        },
        "headline_source": str(headline) if headline else f"largest replay in {dataset}",
        "dataset": str(dataset),
        "headline": _as_dict(top),
        "summary": _summary(results, params),
        "trajectories": [_as_dict(r) for r in results],
    }


def _as_dict(r: TrajectoryResult) -> dict[str, Any]:
    return {
        "conversation_id": r.conversation_id,
        "events": r.events,
        "replay_tokens": r.replay_tokens,
        "input_tokens": r.input_tokens,
        "reduction": round(r.reduction, 4),
        "lost": list(r.lost),
        "error": r.error,
    }
