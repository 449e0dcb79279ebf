"""Importing one transcript whose single tool output is a large log: peak memory and CPU, in a child process.

The transcript (OpenAI chat format) is a user turn, an assistant tool call, the tool's output and an assistant
answer; the output is a generated log of ``--mb`` megabytes: timestamped lines with levels, words, numbers and
UUIDs (``--shape lines``), or the same text with every line break a space, one single line (``--shape line``).
Each measurement runs in a fresh child process that loads the tokenizer and the embedding model first (reported as
``rss_before_mb``), then imports the file into a new SQLite store with token counts (``Ledger.import_file``) and
prints its CPU seconds and peak resident memory (``VmHWM``). ``--rev REV`` measures the ``src`` of another revision
(``git archive``) the same way, alternated with this checkout's, for a before/after. Run from the repository root::

    python bench/big_output.py --mb 16 --rev main
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

_WORDS = ("request", "handled", "worker", "started", "connection", "closed", "retry", "timeout", "cache", "miss")


def log_text(megabytes: float, *, one_line: bool = False, seed: int = 7) -> str:
    """A generated log of about ``megabytes`` million characters (ASCII; see the module docstring)."""
    rnd = random.Random(seed)
    target = int(megabytes * 1_000_000)
    lines: list[str] = []
    size = 0
    i = 0
    while size < target:
        if i % 3 == 0:
            tail = f"id={uuid.UUID(int=rnd.getrandbits(128))}"
        else:
            tail = f"{rnd.choice(_WORDS)} {rnd.choice(_WORDS)} n={rnd.randint(0, 10**6)}"
        line = f"2024-05-{1 + i % 28:02d} 12:{i % 60:02d}:{i * 7 % 60:02d}.{i % 1000:03d} {'IDWE'[i % 4]} {tail}"
        lines.append(line)
        size += len(line) + 1
        i += 1
    return (" " if one_line else "\n").join(lines)


def transcript(output: str) -> list[dict[str, object]]:
    """An OpenAI chat transcript with one tool call whose output is ``output``."""
    call = {"id": "call_1", "type": "function", "function": {"name": "read_log", "arguments": '{"path": "app.log"}'}}
    return [
        {"role": "user", "content": "Why did the service restart last night?"},
        {"role": "assistant", "content": None, "tool_calls": [call]},
        {"role": "tool", "tool_call_id": "call_1", "content": output},
        {"role": "assistant", "content": "The worker ran out of memory after a retry storm."},
    ]


def _peak_mb() -> float:
    # VmHWM is this address space's peak; ru_maxrss would carry the parent's peak across fork and exec
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def _child(path: str) -> None:
    """Import ``path`` into a fresh store and print this process's figures as JSON."""
    from ctxledger.assemble.semantic import default_embedder
    from ctxledger.ledger import Ledger
    from ctxledger.store import open_store
    from ctxledger.tokens import counter_for_model

    counter_for_model("gpt-4o").count("warm")
    default_embedder()
    before = _peak_mb()
    with tempfile.TemporaryDirectory() as tmp:
        ledger = Ledger(open_store(f"sqlite:///{tmp}/d.db", blobs_dir=f"{tmp}/blobs"))
        started = time.process_time()
        ledger.import_file(path, "openai-chat", conversation_id="big", count_tokens_for="gpt-4o")
        cpu = time.process_time() - started
        ledger.close()
    print(json.dumps({"cpu_s": round(cpu, 2), "rss_before_mb": round(before), "peak_rss_mb": round(_peak_mb())}))


def _measure(src: Path, path: Path) -> dict[str, float]:
    env = {**os.environ, "PYTHONPATH": f"{src}{os.pathsep}{ROOT}"}
    done = subprocess.run(
        [sys.executable, __file__, "--child", str(path)], env=env, check=True, capture_output=True, text=True
    )
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    """Print each revision's median CPU and peak RSS over ``--repeat`` alternated child processes."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mb", type=float, default=16.0, help="size of the tool output, millions of characters")
    parser.add_argument("--shape", choices=("lines", "line"), default="lines")
    parser.add_argument("--rev", help="also measure this revision's src (before/after)")
    parser.add_argument("--repeat", type=int, default=1)
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        _child(args.child)
        return
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "big.json"
        path.write_text(json.dumps(transcript(log_text(args.mb, one_line=args.shape == "line"))), encoding="utf-8")
        sources = {"this": ROOT / "src"}
        if args.rev:
            other = Path(tmp) / "rev"
            other.mkdir()
            archive = subprocess.run(
                ["git", "-C", str(ROOT), "archive", args.rev, "src"], check=True, capture_output=True
            )
            subprocess.run(["tar", "-x", "-C", str(other)], input=archive.stdout, check=True)
            sources = {args.rev: other / "src", **sources}
        runs: dict[str, list[dict[str, float]]] = {name: [] for name in sources}
        for _ in range(args.repeat):
            for name, src in sources.items():
                runs[name].append(_measure(src, path))
        print(f"tool output: {args.mb:g} M characters, shape {args.shape}; median of {args.repeat} child process(es)")
        for name, figures in runs.items():
            med = {key: statistics.median(f[key] for f in figures) for key in figures[0]}
            print(
                f"  {name:>8}: import CPU {med['cpu_s']:.2f} s, peak RSS {med['peak_rss_mb']:.0f} MB "
                f"(before the import {med['rss_before_mb']:.0f} MB)"
            )


if __name__ == "__main__":
    main()
