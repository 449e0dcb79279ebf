"""ctxledger benchmark: assembly latency, import throughput and same-run ratios against peers.

A script, not a test. It measures, on this machine:

* assembly latency (median, p95) of synthetic conversations of 1,000 / 10,000 / 100,000 events and of
  real chained trajectories (tau-bench, mini-swe-agent), on SQLite and PostgreSQL, cold / restart /
  warm / append-one (definitions in :mod:`bench.ours`);
* import throughput (events/s, counting tokens on the way);
* the same-run ratio against a plain newest-messages-that-fit window and langchain-core
  ``trim_messages`` with an exact tiktoken counter on the same messages (:mod:`bench.peers`);
* the token reduction against full replay on tau-bench at an 8k input budget (:mod:`bench.quality`);

then prints Markdown tables and the targets beside the measurements, and writes everything as
JSON with ``--json``. Examples::

    python bench/run.py --quick                       # 1k and 10k, fewer repeats (~5 min)
    python bench/run.py --json bench/results/full.json
    python bench/run.py --sizes 10000 --backends sqlite --no-real
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
import traceback
from collections.abc import Callable, Iterator, Sequence
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any, TypeVar

if __package__ in (None, ""):  # run as a script: make ``bench`` importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench import first_call, measure, ours, peers, plan, profiling, quality, report, targets
from bench.backends import DEFAULT_POSTGRES_DB, DEFAULT_POSTGRES_URL, Backend, postgres_backend, sqlite_backend
from bench.stats import time_ms
from bench.workloads import Workload, mini_swe_agent, shared_dir, synthetic, tau_bench
from ctxledger.tokens import get_counter

T = TypeVar("T")

QUALITY_PARAMS = ours.AssemblyParams(window_tokens=8_000, output_tokens=1_000, margin_tokens=200)
"""The tau-bench check's budget, the demo's (``ctxledger.demo.run_demo``): ``B_input = 6,800`` tokens."""


class Log:
    """Progress lines on stderr with the elapsed time."""

    def __init__(self) -> None:
        self.started = time.perf_counter()

    def __call__(self, message: str) -> None:
        """Print ``message`` with the seconds since the run started."""
        print(f"[{time.perf_counter() - self.started:7.1f}s] {message}", file=sys.stderr, flush=True)


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    """The command line (see ``--help``)."""
    p = argparse.ArgumentParser(
        description=__doc__.split("\n")[0],
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog=__doc__.split("\n", 2)[2],
    )
    p.add_argument("--quick", action="store_true", help="1,000 and 10,000 events only, fewer repeats")
    p.add_argument("--sizes", type=int, nargs="+", help="synthetic sizes in events (default 1000 10000 100000)")
    p.add_argument("--backends", nargs="+", choices=("sqlite", "postgres"), default=["sqlite", "postgres"])
    p.add_argument("--no-real", action="store_true", help="skip the real chained trajectories")
    p.add_argument("--real-on-postgres", action="store_true", help="also run the real trajectories on PostgreSQL")
    p.add_argument("--no-quality", action="store_true", help="skip the tau-bench 8k check")
    p.add_argument("--no-trim", action="store_true", help="skip langchain-core trim_messages")
    p.add_argument(
        "--trim-max-events",
        type=int,
        default=10_000,
        help="run trim_messages only up to this size (it takes ~1 min per call at 100k)",
    )
    p.add_argument("--seed", type=int, default=0, help="gen_trace seed")
    p.add_argument("--model", default="gpt-4o", help="model of every request (selects the tokenizer)")
    p.add_argument("--window", type=int, default=128_000, help="window W in tokens (O = 4,096, M = 512)")
    p.add_argument(
        "--postgres-url",
        default=os.environ.get("CTXLEDGER_TEST_POSTGRES_URL", DEFAULT_POSTGRES_URL),
        help="maintenance URL of the PostgreSQL server (a database is created and dropped there)",
    )
    p.add_argument(
        "--postgres-db",
        default=DEFAULT_POSTGRES_DB,
        help="name prefix of the throw-away database (a random suffix is added, so concurrent runs never collide)",
    )
    p.add_argument(
        "--tau-file",
        type=Path,
        help="tau-bench trajectory to headline in the 8k check (default: the one bundled for the demo)",
    )
    p.add_argument(
        "--cache-dir",
        type=Path,
        default=Path(tempfile.gettempdir()) / "ctxledger-bench-cache",
        help="where generated traces are kept between runs",
    )
    p.add_argument("--work-dir", type=Path, help="stores go here (default: a temporary folder, removed after)")
    p.add_argument(
        "--scenario-seconds",
        type=float,
        default=plan.Limits().scenario_seconds,
        help="stop sampling a scenario after this many seconds (at least one sample is taken)",
    )
    p.add_argument(
        "--max-call-seconds",
        type=float,
        default=plan.Limits().max_call_seconds,
        help="skip a scenario whose time per call, extrapolated from the smaller size, exceeds this",
    )
    p.add_argument(
        "--max-import-seconds",
        type=float,
        default=plan.Limits().max_import_seconds,
        help="skip a backend at a size whose import, extrapolated from the smaller size, exceeds this",
    )
    p.add_argument("--json", type=Path, help="write all results to this JSON file")
    p.add_argument(
        "--profile",
        type=Path,
        metavar="DIR",
        help="also run import/cold/warm/append-one once under cProfile and dump .prof files to DIR",
    )
    return p.parse_args(argv)


def environment() -> dict[str, Any]:
    """Machine, versions and the commit measured."""
    from importlib.metadata import PackageNotFoundError, version

    def ver(name: str) -> str | None:
        try:
            return version(name)
        except PackageNotFoundError:
            return None

    def git(*args: str) -> str:
        out = subprocess.run(["git", *args], cwd=Path(__file__).resolve().parents[1], capture_output=True, text=True)
        return out.stdout.strip()

    return {
        "python": platform.python_version(),
        "platform": platform.platform(),
        "cpus": os.cpu_count(),
        "load_average_at_start": [round(x, 2) for x in os.getloadavg()],
        "commit": git("rev-parse", "--short", "HEAD"),
        "uncommitted_src_files": len(git("status", "--porcelain", "--", "src").splitlines()),
        "versions": {
            n: ver(n) for n in ("sqlalchemy", "psycopg", "tiktoken", "quicktok-v1", "bm25s", "langchain-core")
        },
    }


@contextmanager
def work_folder(path: Path | None) -> Iterator[Path]:
    """``path`` (kept), or a temporary folder removed on exit."""
    if path is not None:
        path.mkdir(parents=True, exist_ok=True)
        yield path
        return
    tmp = Path(tempfile.mkdtemp(prefix="ctxledger-bench-"))
    try:
        yield tmp
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def load_workloads(args: argparse.Namespace, log: Log) -> list[Workload]:
    """Synthetic traces of every size, then the real chained trajectories."""
    sizes = args.sizes or ([1_000, 10_000] if args.quick else [1_000, 10_000, 100_000])
    loaded = []
    for n in sizes:
        ms, wl = time_ms(lambda n=n: synthetic(n, args.cache_dir, seed=args.seed))
        log(f"workload {wl.name}: {wl.events:,} messages ({ms / 1000:.1f} s to load or generate)")
        loaded.append(wl)
    if not args.no_real:
        for make in (tau_bench, mini_swe_agent):
            wl = make(args.cache_dir)
            log(f"workload {wl.name}: {wl.events:,} messages ({wl.source})")
            loaded.append(wl)
    return loaded


def guarded(results: dict[str, Any], what: str, log: Log, fn: Callable[[], T]) -> T | None:
    """Run ``fn``; on an exception, log it, record it under ``results["errors"]`` and return ``None``.

    A long run then keeps every other measurement (e.g. when the database is dropped under it).
    """
    try:
        return fn()
    except Exception as exc:
        message = f"{type(exc).__name__}: {' '.join(str(exc).split())}"
        log(f"  ERROR in {what}: {message}")
        results.setdefault("errors", []).append({"what": what, "error": message, "traceback": traceback.format_exc()})
        return None


def save(results: dict[str, Any], path: Path | None) -> None:
    """Write ``results`` as JSON to ``path`` (if given); called after every workload, so a crash keeps them."""
    if path is not None:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(results, indent=2, default=str), encoding="utf-8")


def measure_workload(
    wl: Workload,
    args: argparse.Namespace,
    params: ours.AssemblyParams,
    limits: plan.Limits,
    predictor: plan.Predictor,
    results: dict[str, Any],
    work: Path,
    pg: Backend | None,
    log: Log,
) -> None:
    """Every backend (each guarded), then the peers, for one workload; rows go into ``results``."""
    log(f"{wl.name} ({wl.events:,} events)")
    results["workloads"].append({"name": wl.name, "kind": wl.kind, "events": wl.events, "source": wl.source})
    rep = plan.repeats_for(wl.events, args.quick, limits)
    for name in args.backends if wl.kind == "synthetic" or args.real_on_postgres else ["sqlite"]:
        backend = sqlite_backend(work / f"sqlite-{wl.name}") if name == "sqlite" else pg
        assert backend is not None
        measured = guarded(
            results,
            f"{wl.name} on {name}",
            log,
            lambda backend=backend: measure.measure_ours(wl, backend, params, rep, predictor, limits, log),
        )
        if measured is None:
            continue
        if args.profile and measured["conversation_id"]:
            conversation = measured["conversation_id"]
            done = profiling.profile_scenarios(wl, backend, conversation, params, args.profile, work)
            log(f"  {backend.name}: profiles written: {', '.join(p.name for p in done)}")
        if measured["import"]:
            results["import"].append(measured["import"])
        cid = measured["conversation_id"]
        if cid and wl.kind == "synthetic":
            row = guarded(
                results,
                f"{wl.name} first call on {name}",
                log,
                lambda backend=backend, cid=cid: first_call_row(wl, backend, cid, params, limits),
            )
            if row is not None:
                results["first_call"].append(row)
                log(
                    f"  {name}: first call of a new process {row['call_cpu_ms']:,.0f} ms CPU, "
                    f"peak RSS {row['peak_rss_mb']:,.0f} MB"
                )
        results["latency"].extend(measured["latency"])
    if "sqlite" in args.backends:
        trim = not args.no_trim and wl.events <= args.trim_max_events and peers.langchain_available()
        row = guarded(
            results,
            f"{wl.name} peers",
            log,
            lambda: measure.measure_peers(wl, params, rep["peers"], results["latency"], trim, log),
        )
        if row is not None:
            results["peers"].append(row)


def first_call_row(
    wl: Workload, backend: Backend, conversation: str, params: ours.AssemblyParams, limits: plan.Limits
) -> dict[str, Any]:
    """One first call of a new process on ``wl``'s populated store (:mod:`bench.first_call`), as a result row."""
    figures = first_call.measure(backend, conversation, params.model, params.window_tokens, limits.max_call_seconds)
    return {"workload": wl.name, "kind": wl.kind, "events": wl.events, "backend": backend.name} | figures


def run(args: argparse.Namespace) -> dict[str, Any]:
    """Run every measurement; return the results dict (also what ``--json`` writes)."""
    log = Log()
    params = ours.AssemblyParams(model=args.model, window_tokens=args.window)
    limits = plan.Limits(args.scenario_seconds, args.max_call_seconds, args.max_import_seconds)
    predictor = plan.Predictor()
    load_ms, _ = time_ms(lambda: (get_counter(args.model), peers.tiktoken_count()))
    log(f"tokenizers loaded and verified in {load_ms / 1000:.1f} s (once per process, not in any timing)")
    workloads = load_workloads(args, log)
    results: dict[str, Any] = {
        "environment": environment(),
        "params": dataclasses.asdict(params) | {"input_tokens": params.input_tokens},
        "tokenizer_load_ms": load_ms,
        "limits": dataclasses.asdict(limits),
        "workloads": [],
        "import": [],
        "latency": [],
        "peers": [],
        "first_call": [],
    }
    with work_folder(args.work_dir) as work, ExitStack() as stack:
        pg = None
        if "postgres" in args.backends:
            database = postgres_backend(work / "postgres", args.postgres_url, args.postgres_db)
            pg = guarded(results, "PostgreSQL database", log, lambda: stack.enter_context(database))
            if pg is None:
                args.backends = [b for b in args.backends if b != "postgres"]
        for wl in workloads:
            measure_workload(wl, args, params, limits, predictor, results, work, pg, log)
            save(results, args.json)
        if not args.no_quality:
            tau = shared_dir() / "data" / "tau-bench" / "gpt-4o-airline_tasks0-39.json"
            headline = args.tau_file or quality.bundled_trajectory()
            backend = sqlite_backend(work / "sqlite-quality")
            found = guarded(
                results,
                "tau-bench quality",
                log,
                lambda: quality.tau_bench_quality(backend, tau, QUALITY_PARAMS, headline),
            )
            if found is not None:
                results["quality"] = found
                log(f"tau-bench 8k: {found['summary']}")
    results["elapsed_s"] = round(time.perf_counter() - log.started, 1)
    results["environment"]["load_average_at_end"] = [round(x, 2) for x in os.getloadavg()]
    return results


def render(results: dict[str, Any]) -> str:
    """Every table, titled, as one Markdown text."""
    env = results["environment"]
    parts = [
        f"# ctxledger benchmark — commit {env['commit']}, Python {env['python']}, {env['cpus']} CPUs, "
        f"{results['elapsed_s']} s; load average (1 min) {env['load_average_at_start'][0]} at start, "
        f"{env['load_average_at_end'][0]} at end",
        f"Requests: model {results['params']['model']}, W {results['params']['window_tokens']:,}, "
        f"B_input {results['params']['input_tokens']:,} tokens; manifests persisted.",
        "## Targets",
        report.targets_table(targets.check_targets(results)),
        "## Assembly CPU time",
        report.latency_table(results["latency"]),
        "## Growth with the history (largest synthetic size over the smallest; target ≤ 1.5×)",
        report.growth_table(results["latency"]),
        "## First call of a new process (a child process: store opened, snapshot read, assembled, persisted)",
        report.first_call_table(results.get("first_call", [])),
        "## Import (counting tokens on the way)",
        report.import_table(results["import"]),
        "## Same run, same messages: ctxledger (SQLite) vs peers (ms; ratio = peer ÷ ours, > 1 means ours is faster)",
        report.peers_table(results["peers"]),
        report.omitted_table(results["peers"]),
    ]
    if results.get("errors"):
        parts += [
            "## Errors (measurements that raised; the rest of the run went on)",
            report.table(("what", "error"), [(e["what"], e["error"]) for e in results["errors"]]),
        ]
    if results.get("quality"):
        q = results["quality"]["budget"]
        parts += [
            f"## tau-bench, the demo's budget: W {q['window']:,}, O {q['output']:,}, M {q['margin']:,} → "
            f"B_input {q['input']:,} tokens (headline: {results['quality']['headline_source']})",
            report.quality_table(results["quality"]),
        ]
    return "\n\n".join(parts)


def main(argv: Sequence[str] | None = None) -> int:
    """Run the benchmark, print the tables, write the JSON if asked."""
    args = parse_args(argv)
    results = run(args)
    print(render(results))
    save(results, args.json)
    if args.json:
        print(f"\nresults written to {args.json}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
