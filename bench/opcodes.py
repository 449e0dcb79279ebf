"""Python bytecodes executed per assembly: a cost figure that the machine's load does not move (a script).

CPU time on a shared 2-core machine varies by ±20 % from run to run, more than most changes to the per-call
pipeline. The number of bytecode instructions the interpreter executes for the same call on the same input
does not vary, so two revisions can be compared by running this script on each. It counts Python work only:
what C code does (json, numpy, SQLite, tokenizers, regular expressions) is not counted, and the tracing makes
each call about 50× slower, so it measures few calls. Two workloads:

* ``locomo``: the LoCoMo selector of ``bench/locomo_latency.py`` (conversation 0, 2,000 tokens); 20 calls
  warm it, the next 10 are counted;
* ``store URL BLOBS CONVERSATION``: warm ``Ledger.assemble`` calls on an existing store (W 128,000), after
  two untimed ones; 2 are counted.

    python bench/opcodes.py locomo
    python bench/opcodes.py store sqlite:////tmp/bw/sqlite-synthetic-10000/bench.db \\
        /tmp/bw/sqlite-synthetic-10000/blobs bench-synthetic-10000
    python bench/opcodes.py --top 30 locomo      # also the functions that execute the most, by their own code
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from types import FrameType
from typing import Any

SHARED = Path(__file__).resolve().parents[2] / "shared"


class _Counter:
    """A ``sys.settrace`` tracer counting ``opcode`` events, in all and per code object."""

    def __init__(self, per_function: bool) -> None:
        self.total = 0
        self.per_function = per_function
        self.by_code: Counter[tuple[str, int, str]] = Counter()

    def __call__(self, frame: FrameType, event: str, arg: Any) -> Any:
        frame.f_trace_opcodes = True
        frame.f_trace_lines = False
        return self._local

    def _local(self, frame: FrameType, event: str, arg: Any) -> Any:
        if event == "opcode":
            self.total += 1
            if self.per_function:
                code = frame.f_code
                self.by_code[(code.co_filename.split("/src/")[-1], code.co_firstlineno, code.co_name)] += 1
        return self._local


def _count(run: Callable[[int], Any], calls: int, per_function: bool) -> _Counter:
    tracer = _Counter(per_function)
    sys.settrace(tracer)
    try:
        for i in range(calls):
            run(i)
    finally:
        sys.settrace(None)
    return tracer


def _locomo(path: Path) -> tuple[Callable[[int], Any], int]:
    from ctxledger.eval.base import SelectionTask
    from ctxledger.eval.datasets import load_path
    from ctxledger.eval.ours import PolicySelector
    from ctxledger.tokens import get_counter

    conversations = json.loads(path.read_text(encoding="utf-8"))
    counter = get_counter("cl100k_base")
    with tempfile.TemporaryDirectory() as tmp:
        one = Path(tmp) / "conversation.json"
        one.write_text(json.dumps([conversations[0]]), encoding="utf-8")
        [dataset] = load_path(one, counter)
    cases = dataset.cases[:30]
    selector = PolicySelector(counter)

    def call(i: int) -> None:
        case = cases[i]
        selector.select(SelectionTask(case.items, case.query, 2000, counter, case.query_tokens))

    for i in range(20):
        call(i)
    return (lambda i: call(20 + i)), 10


def _store(url: str, blobs: str, conversation: str) -> tuple[Callable[[int], Any], int]:
    from ctxledger.ledger import Ledger
    from ctxledger.store import open_store

    ledger = Ledger(open_store(url, blobs_dir=blobs))
    request = {"model": "gpt-4o", "window_tokens": 128_000, "output_tokens": 4_096, "margin_tokens": 512}

    def call(_: int) -> None:
        ledger.assemble(conversation, tenant_id="default", **request)

    call(0)
    call(0)
    return call, 2


def main() -> None:
    """Parse the arguments, count, print."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("workload", choices=["locomo", "store"])
    parser.add_argument("store_args", nargs="*", help="for store: URL BLOBS CONVERSATION")
    parser.add_argument("--file", type=Path, default=SHARED / "data/locomo/locomo10_conv0-6.json")
    parser.add_argument("--top", type=int, default=0, help="also list the N functions executing the most")
    args = parser.parse_args()
    if args.workload == "store":
        if len(args.store_args) != 3:
            parser.error("store needs URL BLOBS CONVERSATION")
        run, calls = _store(*args.store_args)
    else:
        run, calls = _locomo(args.file)
    tracer = _count(run, calls, per_function=args.top > 0)
    print(f"{args.workload}: {tracer.total / calls:,.0f} bytecodes per call ({calls} calls)")
    for (path, line, name), n in tracer.by_code.most_common(args.top):
        print(f"{100 * n / tracer.total:5.1f}%  {n / calls:10,.0f}  {path}:{line} {name}")


if __name__ == "__main__":
    main()
