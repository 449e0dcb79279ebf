"""Selector latency on one LoCoMo conversation: CPU time per call of the default policy, p50 and p95.

The conversation is recorded once in an in-memory ledger (as ``ctxledger eval run`` does); then each of its
questions is assembled as the next call under the budget, and ``time.process_time`` is taken around each call
(CPU time, since the machine is shared). The first call warms the snapshot and is not counted. The last line
says which relevance the calls used: lexical only, or with the semantic extra's embedding model.

    python bench/locomo_latency.py --file ../shared/data/locomo/locomo10_conv0-6.json --conversation 0
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from collections import Counter
from pathlib import Path

from ctxledger.eval.base import SelectionTask
from ctxledger.eval.datasets import load_path
from ctxledger.eval.ours import PolicySelector
from ctxledger.tokens import get_counter


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--file", type=Path, default=Path("../shared/data/locomo/locomo10_conv0-6.json"))
    parser.add_argument("--conversation", type=int, default=0, help="index of the conversation in the file")
    parser.add_argument("--budget", type=int, default=2000, help="input budget of every call (tokens)")
    parser.add_argument("--questions", type=int, default=80, help="calls measured (plus one warm-up)")
    args = parser.parse_args()
    conversations = json.loads(args.file.read_text(encoding="utf-8"))
    counter = get_counter("cl100k_base")
    with tempfile.TemporaryDirectory() as tmp:
        one = Path(tmp) / "conversation.json"
        one.write_text(json.dumps([conversations[args.conversation]]), encoding="utf-8")
        [dataset] = load_path(one, counter)
    cases = dataset.cases[: args.questions + 1]
    selector = PolicySelector(counter)

    def task(case):
        return SelectionTask(case.items, case.query, args.budget, counter, case.query_tokens)

    selector.select(task(cases[0]))
    cpu = []
    used: Counter[str] = Counter()
    for case in cases[1:]:
        started = time.process_time()
        selection = selector.select(task(case))
        cpu.append((time.process_time() - started) * 1000)
        used[str(selection.details.get("relevance"))] += 1
    cpu.sort()
    p95 = cpu[min(len(cpu) - 1, int(0.95 * len(cpu)))]
    print(f"conversation {args.conversation} ({len(cases[0].items)} turns), budget {args.budget}, {len(cpu)} calls: "
          f"CPU p50 {statistics.median(cpu):.1f} ms, p95 {p95:.1f} ms")  # fmt: skip
    print(relevance_line(used))


LEXICAL = frozenset({"bm25", "speaker", "date", "session"})
"""Parts of ``policy.relevance`` that are not an embedding model."""


def relevance_line(used: Counter[str]) -> str:
    """Which relevance the measured calls used (the manifest's ``policy.relevance``), and how many calls each."""
    semantic = any(set(name.split("+")) - LEXICAL for name in used)  # another part is the embedding model's id
    what = "with the semantic extra (BM25 and embeddings)" if semantic else "lexical only (BM25, no embedding model)"
    counts = ", ".join(f"{name} ({n} calls)" for name, n in sorted(used.items()))
    return f"relevance: {what}: {counts}"


if __name__ == "__main__":
    main()
