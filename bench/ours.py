"""ctxledger itself: import throughput and assembly latency, through the public :class:`Ledger` API.

Scenarios, all with ``persist=True`` (the manifest is written, as in use):

* **import**: ``Ledger.import_file(path, "openai-chat", count_tokens_for=model)`` into a fresh store:
  parse, blobs, one append transaction, and the token counts of every turn counted and stored.
* **cold**: a fresh :class:`Ledger` on the store (nothing cached in the process) with the store's
  token-count table emptied, so the assembly reads, builds, indexes *and counts* the whole history.
  The tokenizer itself is loaded before timing (once per process; reported separately).
* **restart**: a fresh :class:`Ledger` with the counts in the store (a new process after import).
* **warm**: the same :class:`Ledger` again (snapshot cached in process, counts cached).
* **append-one**: append one user message to the assembled conversation, then assemble; the time of
  the assembly (the append is reported beside it).
"""

from __future__ import annotations

import gc
import os
import resource
import time
from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import text

from bench.backends import Backend
from bench.stats import Timing, summarize, time_ms
from bench.workloads import Workload
from ctxledger.ledger import Ledger
from ctxledger.records import Message, Role, Trust
from ctxledger.store import open_store
from ctxledger.store.codec import assembly_row

TENANT = "default"
PHASES = ("graph_query_ms", "policy_ms", "selection_ms", "serialization_ms")


@dataclass(frozen=True, slots=True)
class AssemblyParams:
    """The request every measured assembly makes (tokens).

    Attributes:
        model: the model name (selects the counter; gpt-4o → o200k_base).
        window_tokens, output_tokens, margin_tokens: ``W``, ``O``, ``M``.
    """

    model: str = "gpt-4o"
    window_tokens: int = 128_000
    output_tokens: int = 4_096
    margin_tokens: int = 512

    @property
    def input_tokens(self) -> int:
        """``B_input = W − O − M``."""
        return self.window_tokens - self.output_tokens - self.margin_tokens

    def request(self) -> dict[str, Any]:
        """Keyword arguments for :meth:`Ledger.assemble`."""
        return {
            "model": self.model,
            "window_tokens": self.window_tokens,
            "output_tokens": self.output_tokens,
            "margin_tokens": self.margin_tokens,
        }


@dataclass(slots=True)
class LatencySeries:
    """Timings of one scenario plus the median of each manifest timing phase.

    Attributes:
        timing: wall clock of ``Ledger.assemble`` (ms).
        phases: median of the manifest's ``timings`` per phase (wall clock ms, as the manifest records them).
        input_tokens: tokens of the last payload.
        extra: scenario-specific numbers (e.g. the append time).
    """

    timing: Timing
    phases: dict[str, float]
    input_tokens: int
    extra: dict[str, Any] = field(default_factory=dict)


def open_ledger(backend: Backend) -> Ledger:
    """A fresh :class:`Ledger` on the backend's store (its own blob folder)."""
    return Ledger(open_store(backend.url, blobs_dir=backend.blobs_dir))


def import_workload(backend: Backend, workload: Workload, model: str) -> tuple[float, str]:
    """Import ``workload`` into a fresh conversation; return (milliseconds, conversation id)."""
    conversation_id = f"bench-{workload.name}"
    with open_ledger(backend) as ledger:
        ms, _ = time_ms(
            lambda: ledger.import_file(
                workload.path, "openai-chat", conversation_id=conversation_id, count_tokens_for=model
            )
        )
    return ms, conversation_id


def _series(samples: list[tuple[float, Any]], extra: dict[str, Any] | None = None) -> LatencySeries:
    # the manifest's phase timings are wall clock, the samples CPU time: shown side by side, never subtracted
    phases = {p: _median([asm.manifest["timings"][p] for _, asm in samples]) for p in PHASES}
    last = samples[-1][1]
    extra = dict(extra or {}) | {
        "omitted_by_reason": omitted_by_reason(last.manifest),
        "manifest_bytes": manifest_bytes(last),
        "peak_rss_mb": peak_rss_mb(),
    }
    return LatencySeries(summarize([ms for ms, _ in samples]), phases, last.input_tokens, extra)


def omitted_by_reason(manifest: Mapping[str, Any]) -> dict[str, int]:
    """How many records the assembly omitted, per reason code (most frequent first)."""
    return dict(Counter(manifest["omitted_by_reason"]).most_common())


def manifest_bytes(asm: Any) -> int:
    """Bytes of the manifest as persisted: the text the store writes in its ``assemblies`` row (columnar)."""
    persisted = asm.persisted() if hasattr(asm, "persisted") else asm.manifest
    return len(assembly_row(persisted)["manifest"].encode())


def peak_rss_mb() -> float:
    """Peak resident memory of this process so far (MB; Linux reports ``ru_maxrss`` in KB)."""
    return round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)


def _median(values: list[float]) -> float:
    return summarize(values).median_ms


def _assemble(ledger: Ledger, conversation_id: str, params: AssemblyParams) -> Callable[[], Any]:
    return lambda: ledger.assemble(conversation_id, tenant_id=TENANT, **params.request())


def clear_counts(backend: Backend) -> None:
    """Empty the store's token-count cache (``token_counts`` table of the SQL store)."""
    store = open_store(backend.url, blobs_dir=backend.blobs_dir)
    try:
        with store.engine.begin() as conn:  # type: ignore[attr-defined]
            conn.execute(text("DELETE FROM token_counts"))
    finally:
        store.close()


@dataclass(frozen=True, slots=True)
class Repeat:
    """How long one scenario runs: up to ``times`` samples, but no new sample after ``seconds``.

    At least one sample is always taken; the table shows how many were.
    """

    times: int
    seconds: float = 120.0

    def more(self, samples: int, started: float) -> bool:
        """Whether to take another sample after ``samples`` taken since ``started`` (``perf_counter``)."""
        return samples < self.times and (samples == 0 or time.perf_counter() - started < self.seconds)


def cold(backend: Backend, conversation_id: str, params: AssemblyParams, repeat: Repeat) -> LatencySeries:
    """Assemble from a fresh Ledger with no counts in the store, as often as ``repeat`` allows."""
    samples: list[tuple[float, Any]] = []
    started = time.perf_counter()
    while repeat.more(len(samples), started):
        clear_counts(backend)
        gc.collect()
        with open_ledger(backend) as ledger:
            samples.append(time_ms(_assemble(ledger, conversation_id, params)))
    return _series(samples)


def restart(
    backend: Backend, conversation_id: str, params: AssemblyParams, repeat: Repeat
) -> tuple[LatencySeries, Ledger]:
    """Assemble from a fresh Ledger with the counts in the store, as often as ``repeat`` allows.

    Returns:
        The timings and the Ledger of the last sample, still open: it has assembled the conversation,
        so :func:`warm` can use it without another (restart-priced) warm-up call. The caller closes it.
    """
    samples: list[tuple[float, Any]] = []
    started = time.perf_counter()
    ledger: Ledger | None = None
    while repeat.more(len(samples), started):
        if ledger is not None:
            ledger.close()
        gc.collect()
        ledger = open_ledger(backend)
        samples.append(time_ms(_assemble(ledger, conversation_id, params)))
    assert ledger is not None
    return _series(samples), ledger


def warm(ledger: Ledger, conversation_id: str, params: AssemblyParams, repeat: Repeat) -> LatencySeries:
    """Assemble again and again on a Ledger that has assembled the conversation already (see :func:`restart`)."""
    run = _assemble(ledger, conversation_id, params)
    samples: list[tuple[float, Any]] = []
    started = time.perf_counter()
    while repeat.more(len(samples), started):
        samples.append(time_ms(run))
    return _series(samples)


def user_message(ledger: Ledger, conversation_id: str, k: int) -> Message:
    """The ``k``-th appended user turn of the append-one scenario (a new record id each time)."""
    branch = ledger.store.get(TENANT, conversation_id).branch_id
    return Message(
        id=f"{conversation_id}/bench-append-{os.getpid()}-{k}",
        tenant_id=TENANT,
        conversation_id=conversation_id,
        branch_id=branch,
        owner_participant_id=f"{conversation_id}/participant/user",
        role=Role.USER,
        trust=Trust.USER,
        content=f"Follow-up {k}: re-run the failing tests and summarize the database timeout errors.",
    )


def append_one(ledger: Ledger, conversation_id: str, params: AssemblyParams, repeat: Repeat) -> LatencySeries:
    """Append one user message then assemble (timed), again and again, on an assembled conversation.

    ``ledger`` must have assembled the conversation already (as after :func:`warm`).
    """
    run = _assemble(ledger, conversation_id, params)
    samples: list[tuple[float, Any]] = []
    appends: list[float] = []
    started = time.perf_counter()
    while repeat.more(len(samples), started):
        message = user_message(ledger, conversation_id, len(samples))
        append_ms, _ = time_ms(lambda message=message: ledger.append([message]))
        appends.append(append_ms)
        samples.append(time_ms(run))
    return _series(samples, {"append": summarize(appends).as_dict()})
