"""Import throughput into SQLite with every write-path fact computed, and the peak memory of a first call.

Prints, per synthetic size: import wall and CPU seconds, events/s (CPU), the share of CPU spent computing
facts (``ctxledger.facts.compute_facts``, profiled separately), and the peak RSS of a fresh process that
imports and then assembles once. Run from the repository root::

    python bench/import_facts.py --sizes 10000 100000
"""

from __future__ import annotations

import argparse
import resource
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.workloads import synthetic  # noqa: E402
from ctxledger.ledger import Ledger  # noqa: E402
from ctxledger.store import open_store  # noqa: E402

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


def main() -> None:
    """Measure each size and print one Markdown row per size."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[10_000])
    parser.add_argument("--cache-dir", type=Path, default=Path(tempfile.gettempdir()) / "ctxledger-bench-cache")
    parser.add_argument("--assemble", action="store_true", help="assemble once after the import (peak RSS)")
    args = parser.parse_args()
    spent = _timed_facts()
    print("| events | wall s | CPU s | events/s (CPU) | facts CPU s | first assemble CPU s | peak RSS MB |")
    print("|---|---|---|---|---|---|---|")
    for n in args.sizes:
        wl = synthetic(n, args.cache_dir)
        with tempfile.TemporaryDirectory() as tmp:
            url = f"sqlite:///{tmp}/bench.db"
            spent.clear()
            ledger = Ledger(open_store(url, blobs_dir=f"{tmp}/blobs"))
            wall, cpu = time.perf_counter(), time.process_time()
            ledger.import_file(wl.path, "openai-chat", conversation_id="bench", count_tokens_for=MODEL)
            wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
            ledger.close()
            asm_cpu = float("nan")
            if args.assemble:
                fresh = Ledger(open_store(url, blobs_dir=f"{tmp}/blobs"))
                started = time.process_time()
                fresh.assemble("bench", model=MODEL, window_tokens=128_000, output_tokens=4_096, margin_tokens=512)
                asm_cpu = time.process_time() - started
                fresh.close()
        rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        print(
            f"| {wl.events:,} | {wall:.2f} | {cpu:.2f} | {wl.events / cpu:,.0f} | {sum(spent):.2f} | {asm_cpu:.2f} | "
            f"{rss:,.0f} |"
        )


if __name__ == "__main__":
    main()
