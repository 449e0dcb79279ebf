"""LoCoMo evidence recall per split: the tuning conversations (0–4) and the check conversations (5–6).

Each conversation of the file is loaded as ``ctxledger eval run -d locomo`` loads it, its questions are assembled
by the default policy (or the policy with ``--set`` overrides of its selection parameters) at each budget with the
harness's own :func:`~ctxledger.eval.harness.evaluate_case`, and recall is printed per split and per category
(adversarial questions left out of the headline, as in the report):

    python bench/locomo_splits.py --split 0-4 --split 5-6 -b 2000 -b 8000
    python bench/locomo_splits.py --split 0-4 --memories --set neighbour_window=2 --json out.json

Tune only on 0–4; 5–6 is the check.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import statistics
import time
from pathlib import Path
from typing import Any

from ctxledger.eval.datasets import load_locomo
from ctxledger.eval.harness import HEADLINE_EXCLUDED, evaluate_case
from ctxledger.eval.ours import PolicySelector
from ctxledger.policy.default import default_policy
from ctxledger.tokens import get_counter

SHORT = {"multi-hop": "mh", "temporal": "tmp", "open-domain": "od", "single-hop": "sh", "adversarial": "adv"}


def _split(text: str) -> list[int]:
    first, _, last = text.partition("-")
    return list(range(int(first), int(last or first) + 1))


def _value(text: str) -> Any:
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        return text


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--file", type=Path, default=Path("../shared/data/locomo/locomo10_conv0-6.json"))
    parser.add_argument("--split", action="append", help="conversation indices, e.g. 0-4 (repeatable)")
    parser.add_argument("-b", "--budget", type=int, action="append", help="budget in tokens (repeatable)")
    parser.add_argument("--memories", action="store_true", help="offer the observation memories (locomo-memory)")
    parser.add_argument("--set", action="append", default=[], help="selection parameter override, key=json-value")
    parser.add_argument("--json", type=Path, help="also write the figures as JSON")
    args = parser.parse_args()
    splits = args.split or ["0-4", "5-6"]
    budgets = args.budget or [2000, 8000]
    counter = get_counter("cl100k_base")
    policy = default_policy()
    overrides = {k: _value(v) for k, _, v in (s.partition("=") for s in args.set)}
    if overrides:
        policy = dataclasses.replace(policy, selection=dataclasses.replace(policy.selection, **overrides))
    records = json.loads(args.file.read_text(encoding="utf-8"))
    out: dict[str, Any] = {"overrides": overrides, "memories": args.memories, "splits": {}}
    for split in splits:
        rows = []
        started = time.process_time()
        for index in _split(split):
            one = Path(f"/tmp/locomo_split_{index}.json")  # a one-conversation file the loader reads
            one.write_text(json.dumps([records[index]]), encoding="utf-8")
            dataset = load_locomo(one, counter, memories=args.memories)
            selector = PolicySelector(counter, policy)
            for case in dataset.cases:
                for budget in budgets:
                    rows.append(evaluate_case(case, selector, budget, counter))
        figures: dict[str, Any] = {}
        for budget in budgets:
            mine = [r for r in rows if r.budget == budget and r.recall is not None]
            head = [r.recall for r in mine if r.category not in HEADLINE_EXCLUDED]
            cats = sorted({r.category for r in mine if r.category not in HEADLINE_EXCLUDED})
            by_cat = {c.split("-", 1)[1]: statistics.mean(r.recall for r in mine if r.category == c) for c in cats}
            cpu = sorted(r.cpu_s * 1000 for r in rows if r.budget == budget and r.cpu_s is not None)
            figures[str(budget)] = {
                "recall": statistics.mean(head),
                "by_category": by_cat,
                "questions": len(head),
                "cpu_p50_ms": statistics.median(cpu),
            }
            cat_text = " ".join(f"{SHORT.get(c, c)} {v:.3f}" for c, v in by_cat.items())
            print(
                f"split {split}{' +mem' if args.memories else ''} b={budget}: recall {statistics.mean(head):.3f} "
                f"({len(head)} q) | {cat_text} | cpu p50 {statistics.median(cpu):.1f} ms",
                flush=True,
            )
        figures["elapsed_cpu_s"] = time.process_time() - started
        out["splits"][split] = figures
    if args.json:
        args.json.write_text(json.dumps(out, indent=1), encoding="utf-8")


if __name__ == "__main__":
    main()
