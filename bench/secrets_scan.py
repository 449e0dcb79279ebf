"""Secret-scan CPU over the texts of real agent traces: the scanner of a git revision against the working tree's.

Each text is a message's content, a tool call's arguments or a tool result, as an import scans them. Every
repeat scans all texts with a fresh scanner (empty cache) and measures process CPU seconds; prints the median
per scanner, the ratio, and how many texts the two find different findings in (new detectors add some).
Run from the repository root::

    python bench/secrets_scan.py --rev HEAD~2 --data mini-swe-agent tau-bench --repeats 3
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterable
from pathlib import Path
from types import ModuleType
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.workloads import REPO_ROOT, shared_dir, tau_bench_trajectories
from ctxledger.policy import secrets as current

MODULE = "src/ctxledger/policy/secrets.py"


def _texts_of(messages: Iterable[dict[str, Any]]) -> Iterable[str]:
    for m in messages:
        content = m.get("content")
        if isinstance(content, str):
            yield content
        elif isinstance(content, list):
            yield from (str(p.get("text", "")) for p in content if isinstance(p, dict))
        for call in m.get("tool_calls") or ():
            yield str(call.get("function", {}).get("arguments", ""))


def dataset_texts(name: str) -> list[str]:
    """The non-empty texts of one dataset under ``../shared/data`` (``mini-swe-agent`` or ``tau-bench``)."""
    shared = shared_dir()
    if name == "tau-bench":
        messages = [m for r in tau_bench_trajectories(shared) for m in r["traj"]]
    elif name == "mini-swe-agent":
        files = sorted((shared / "data" / "mini-swe-agent-deepseek").glob("*.traj.json"))
        messages = [m for f in files for m in json.loads(f.read_text(encoding="utf-8"))["messages"]]
    else:
        raise SystemExit(f"unknown dataset {name!r}")
    return [t for t in _texts_of(messages) if t]


def module_at(rev: str) -> ModuleType:
    """The scanner module as it is at git revision ``rev``, imported under another name."""
    source = subprocess.run(
        ["git", "show", f"{rev}:{MODULE}"], cwd=REPO_ROOT, check=True, capture_output=True, text=True
    ).stdout
    path = Path(tempfile.mkdtemp()) / "secrets_before.py"
    path.write_text(source, encoding="utf-8")
    spec = importlib.util.spec_from_file_location("secrets_before", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up by name
    spec.loader.exec_module(module)
    return module


def cpu(module: ModuleType, texts: list[str]) -> tuple[float, list[tuple[Any, ...]]]:
    """CPU seconds to scan ``texts`` with a fresh scanner of ``module``, and the findings per text."""
    scanner = module.SecretScanner()
    started = time.process_time()
    found = [scanner.scan(t) for t in texts]
    return time.process_time() - started, [tuple((f.line, f.type) for f in fs) for fs in found]


def main() -> None:
    """Print one Markdown row per dataset."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rev", default="HEAD~2", help="git revision of the scanner to compare with")
    parser.add_argument("--data", nargs="+", default=["mini-swe-agent", "tau-bench"])
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    before = module_at(args.rev)
    print(f"| dataset | texts | MB | {args.rev} CPU s (median) | now CPU s (median) | ratio | findings differ in |")
    print("|---|---|---|---|---|---|---|")
    for name in args.data:
        texts = dataset_texts(name)
        size = sum(len(t) for t in texts) / 1e6
        old, new = [], []
        for _ in range(args.repeats):
            seconds, old_found = cpu(before, texts)
            old.append(seconds)
            seconds, new_found = cpu(current, texts)
            new.append(seconds)
        differ = sum(a != b for a, b in zip(old_found, new_found, strict=True))
        a, b = statistics.median(old), statistics.median(new)
        print(f"| {name} | {len(texts):,} | {size:.1f} | {a:.2f} | {b:.2f} | {a / b:.1f}x | {differ} |")


if __name__ == "__main__":
    main()
