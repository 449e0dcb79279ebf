"""The first assembly of a new process, measured in a child process of its own.

The in-process ``restart`` scenario (:mod:`bench.ours`) makes a fresh :class:`~ctxledger.ledger.Ledger` in the
bench process, whose heap already holds the trace, the peers' messages and every earlier measurement; its peak
memory says little about ctxledger. Here a child process opens the populated store, loads the tokenizer (as
the bench does before any timing; reported separately) and the semantic extra's embedding model when installed
(likewise: a model loaded once per process, reported separately), makes one assembly with the manifest persisted, and
prints its own figures as JSON:

* ``call_cpu_ms``: CPU time of ``Ledger(open_store(...)).assemble(...)`` (store opened, snapshot read, assembled);
* ``call_wall_ms``: the same call's wall clock;
* ``tokenizer_ms``: CPU time to load the tokenizer before the call;
* ``embedder_ms``: CPU time to load the semantic extra's embedding model before the call (0 without the extra);
* ``process_cpu_ms``: the child's whole CPU time (interpreter start and imports included);
* ``rss_before_mb`` / ``peak_rss_mb``: the child's peak resident memory before the call and after it (``VmHWM``);
* ``input_tokens``: tokens of the payload;
* ``phases_cpu_ms`` (with ``--phases``): the call's CPU time by phase (:mod:`bench.call_phases`: each part of the
  snapshot build, the turn costs and relevance of every unit, the collector, and the rest); the wrappers add a
  little CPU of their own, so compare ``call_cpu_ms`` without ``--phases``.

Run as ``python -m bench.first_call URL BLOBS CONVERSATION --model M --window W [--phases]`` (what :func:`measure`
does, without ``--phases``).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import resource
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from bench.backends import Backend

TENANT = "default"
ROOT = Path(__file__).resolve().parents[1]


def _rss_mb() -> float:
    # VmHWM is this address space's peak; ru_maxrss would carry the parent's peak across fork and exec
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return round(int(line.split()[1]) / 1024, 1)
    return round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)


def _child(url: str, blobs: str, conversation: str, model: str, window: int, phases: bool = False) -> dict[str, Any]:
    from bench.call_phases import phase_ms, timed_phases
    from ctxledger.assemble.semantic import default_embedder
    from ctxledger.ledger import Ledger
    from ctxledger.store import open_store
    from ctxledger.tokens import get_counter

    started = time.process_time()
    get_counter(model)
    tokenizer_ms = (time.process_time() - started) * 1000.0
    started = time.process_time()
    default_embedder()  # the semantic extra's model, loaded once per process like the tokenizer
    embedder_ms = (time.process_time() - started) * 1000.0
    rss_before = _rss_mb()
    with timed_phases() if phases else contextlib.nullcontext() as spent:
        cpu0, wall0 = time.process_time(), time.perf_counter()
        ledger = Ledger(open_store(url, blobs_dir=Path(blobs)))
        asm = ledger.assemble(
            conversation, tenant_id=TENANT, model=model, window_tokens=window, output_tokens=4_096, margin_tokens=512
        )
        call_cpu = (time.process_time() - cpu0) * 1000.0
        call_wall = (time.perf_counter() - wall0) * 1000.0
    ledger.close()
    extra = {"phases_cpu_ms": phase_ms(spent, call_cpu / 1000.0)} if spent is not None else {}
    return {
        "call_cpu_ms": round(call_cpu, 1),
        "call_wall_ms": round(call_wall, 1),
        "tokenizer_ms": round(tokenizer_ms, 1),
        "embedder_ms": round(embedder_ms, 1),
        "process_cpu_ms": round(time.process_time() * 1000.0, 1),
        "rss_before_mb": rss_before,
        "peak_rss_mb": _rss_mb(),
        "input_tokens": asm.input_tokens,
        **extra,
    }


def measure(backend: Backend, conversation: str, model: str, window: int, timeout_s: float = 900.0) -> dict[str, Any]:
    """Run one first call in a child process; return its figures (see the module docstring).

    Raises:
        RuntimeError: the child failed (its stderr is in the message).
    """
    cmd = [sys.executable, "-m", "bench.first_call", backend.url, str(backend.blobs_dir), conversation]
    cmd += ["--model", model, "--window", str(window)]
    done = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=timeout_s, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"first call in a new process failed: {done.stderr.strip()[-2000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the child process: one first call, its figures as one JSON line on stdout."""
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("url")
    p.add_argument("blobs")
    p.add_argument("conversation")
    p.add_argument("--model", default="gpt-4o")
    p.add_argument("--window", type=int, default=128_000)
    p.add_argument("--phases", action="store_true", help="also report the call's CPU time by phase")
    args = p.parse_args(argv)
    print(json.dumps(_child(args.url, args.blobs, args.conversation, args.model, args.window, args.phases)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
