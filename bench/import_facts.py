"""Import throughput into SQLite with every write-path fact computed, and the peak memory of a first call.

Prints, per synthetic size: import wall and CPU seconds of this process, the CPU seconds of the fact worker
processes a large import starts (``ctxledger._fact_workers``, start-up included; ``0`` when there are none),
events/s by wall time and by all CPU (this process and the workers), the CPU this process spent computing
facts (``ctxledger.facts.compute_facts``, its own share only) and, with ``--detectors``, how much of it each
detector took (secret scanning, term counting, semantic vectors, instruction-like phrases; this process's share, so
with ``CTXLEDGER_FACT_WORKERS=1`` all of it; the clock is read around every text scanned, about 2 µs each, so the
import costs a little more), the CPU of the first assembly by a fresh ``Ledger`` on the imported store
(``--assemble``: nothing in memory, as in a new process), and the process's peak RSS so far (one size per run
gives that size's peak). The detectors keep caches, so compare revisions in separate processes, alternated. Run
from the repository root::

    python bench/import_facts.py --sizes 10000 --assemble
    CTXLEDGER_FACT_WORKERS=1 python bench/import_facts.py --sizes 10000 --detectors
    python bench/import_facts.py --sizes 1000 --real
"""

from __future__ import annotations

import argparse
import importlib
import resource
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.workloads import mini_swe_agent, synthetic, tau_bench
from ctxledger.ledger import Ledger
from ctxledger.store import open_store

MODEL = "gpt-4o"


def _timed_facts() -> list[float]:
    spent: list[float] = []
    try:
        from ctxledger import facts
    except ImportError:  # a ctxledger without write-path facts (a before/after comparison)
        return spent
    inner = facts.compute_facts

    def timed(*args, **kwargs):  # type: ignore[no-untyped-def]
        started = time.process_time()
        try:
            return inner(*args, **kwargs)
        finally:
            spent.append(time.process_time() - started)

    for module in [m for m in list(sys.modules.values()) if getattr(m, "compute_facts", None) is inner]:
        module.compute_facts = timed  # type: ignore[attr-defined]
    return spent


DETECTORS = (
    ("scan", "ctxledger.policy.secrets", "SecretScanner.scan"),
    ("terms", "ctxledger.assemble.relevance", "term_counts"),
    ("vectors", "ctxledger.facts", "_vectors"),
    ("phrases", "ctxledger.policy.injection", "instruction_like"),
)
"""Per detector: its column, and the function the facts call it through (a module attribute, or a method)."""


def _timed_detectors() -> dict[str, list[float]]:
    """Wrap each detector of :data:`DETECTORS` there is in this ctxledger; their CPU seconds by name."""
    spent: dict[str, list[float]] = {}
    for name, module_name, attribute in DETECTORS:
        try:
            owner: object = importlib.import_module(module_name)
        except ImportError:  # a ctxledger without this detector module (a before/after comparison)
            continue
        *path, leaf = attribute.split(".")
        for part in path:
            owner = getattr(owner, part)
        inner = getattr(owner, leaf, None)
        if inner is None:
            continue
        times = spent.setdefault(name, [])

        def timed(*args, _inner=inner, _times=times, **kwargs):  # type: ignore[no-untyped-def]
            started = time.process_time()
            try:
                return _inner(*args, **kwargs)
            finally:
                _times.append(time.process_time() - started)

        setattr(owner, leaf, timed)
    return spent


def _worker_cpu() -> float:
    try:
        from ctxledger import _fact_workers
    except ImportError:  # a ctxledger without fact workers (a before/after comparison)
        return 0.0
    return _fact_workers.worker_cpu_seconds()


def main() -> None:
    """Measure each size and print one Markdown row per size."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[10_000])
    parser.add_argument("--cache-dir", type=Path, default=Path(tempfile.gettempdir()) / "ctxledger-bench-cache")
    parser.add_argument("--assemble", action="store_true", help="assemble once after the import (peak RSS)")
    parser.add_argument("--real", action="store_true", help="also the chained tau-bench and mini-swe-agent sessions")
    parser.add_argument("--detectors", action="store_true", help="the facts' CPU by detector (costs a little CPU)")
    args = parser.parse_args()
    spent = _timed_facts()
    detectors = _timed_detectors() if args.detectors else {}
    print(
        "| workload | events | wall s | CPU s | worker CPU s | events/s (wall) | events/s (all CPU) | facts CPU s |"
        f" of which {' / '.join(detectors) or '(--detectors)'} s | first assemble CPU s | peak RSS MB |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    workloads = [lambda n=n: synthetic(n, args.cache_dir) for n in args.sizes]
    if args.real:
        workloads += [lambda: tau_bench(args.cache_dir), lambda: mini_swe_agent(args.cache_dir)]
    for make in workloads:
        wl = make()
        with tempfile.TemporaryDirectory() as tmp:
            url = f"sqlite:///{tmp}/bench.db"
            spent.clear()
            for times in detectors.values():
                times.clear()
            ledger = Ledger(open_store(url, blobs_dir=f"{tmp}/blobs"))
            wall, cpu, workers = time.perf_counter(), time.process_time(), _worker_cpu()
            ledger.import_file(wl.path, "openai-chat", conversation_id="bench", count_tokens_for=MODEL)
            wall, cpu, workers = time.perf_counter() - wall, time.process_time() - cpu, _worker_cpu() - workers
            ledger.close()
            asm_cpu = float("nan")
            if args.assemble:
                fresh = Ledger(open_store(url, blobs_dir=f"{tmp}/blobs"))
                started = time.process_time()
                fresh.assemble("bench", model=MODEL, window_tokens=128_000, output_tokens=4_096, margin_tokens=512)
                asm_cpu = time.process_time() - started
                fresh.close()
        rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        by_detector = " / ".join(f"{sum(times):.2f}" for times in detectors.values()) or "—"
        print(
            f"| {wl.name} | {wl.events:,} | {wall:.2f} | {cpu:.2f} | {workers:.2f} | {wl.events / wall:,.0f} | "
            f"{wl.events / (cpu + workers):,.0f} | {sum(spent):.2f} | {by_detector} | "
            f"{asm_cpu:.2f} | {rss:,.0f} |"
        )


if __name__ == "__main__":
    main()
