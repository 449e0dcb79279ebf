"""``--profile DIR``: one extra run of each scenario under cProfile, dumped as ``.prof`` files.

Open them with ``python -m pstats DIR/<file>.prof`` (``sort tottime``, ``stats 30``) or snakeviz. The
profiled runs are extra: they never count in the timings of the tables.
"""

from __future__ import annotations

import cProfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from bench import ours
from bench.backends import Backend, sqlite_backend
from bench.workloads import Workload


def profile_call(fn: Callable[[], Any], path: Path) -> None:
    """Run ``fn`` once under cProfile and dump its stats to ``path``."""
    profiler = cProfile.Profile()
    profiler.enable()
    try:
        fn()
    finally:
        profiler.disable()
        path.parent.mkdir(parents=True, exist_ok=True)
        profiler.dump_stats(path)


def profile_scenarios(
    wl: Workload, backend: Backend, conversation_id: str, params: ours.AssemblyParams, out: Path, work: Path
) -> list[Path]:
    """Profile import (into a fresh SQLite store under ``work``), cold, warm and append-one on ``backend``."""
    stem = f"{wl.name}-{backend.name}"
    paths = {name: out / f"{stem}-{name}.prof" for name in ("import", "cold", "warm", "append-one")}
    if backend.name == "sqlite":
        fresh = sqlite_backend(work / f"profile-import-{wl.name}")
        profile_call(lambda: ours.import_workload(fresh, wl, params.model), paths["import"])
    else:
        del paths["import"]
    ours.clear_counts(backend)
    with ours.open_ledger(backend) as ledger:
        profile_call(lambda: ledger.assemble(conversation_id, **params.request()), paths["cold"])
        profile_call(lambda: ledger.assemble(conversation_id, **params.request()), paths["warm"])
        ledger.append([ours.user_message(ledger, conversation_id, 10_000)])
        profile_call(lambda: ledger.assemble(conversation_id, **params.request()), paths["append-one"])
    return list(paths.values())
