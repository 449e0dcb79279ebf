"""Where the LoCoMo evidence the default policy leaves out ranks, and how the budget is spent.

Each question of the chosen conversations (adversarial ones left out) is assembled by the default policy with the
harness's own :func:`~ctxledger.eval.harness.evaluate_case`; for each it reads the assembly's phases and prints:

* the budget: ``B_dynamic``, tokens used, units chosen, the share of those tokens that is message framing
  (:data:`~ctxledger.eval.datasets.MESSAGE_FRAMING_TOKENS` plus the role per message), required units;
* each evidence turn left out: its rank by relevance among all units of the conversation (0 = best), its rank by
  utility among the visited units (``-`` when the reach never visited it), its tokens and omission reason;

then a summary (medians, percentiles of the missed evidence's ranks, how many were never visited), and with
``--show N`` the first N questions with a miss, by category:

    python bench/locomo_misses.py --conversations 0-4 -b 2000 --show 12

Tune only on 0–4.
"""

from __future__ import annotations

import argparse
import json
import statistics
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

import ctxledger.assemble.assembler as assembler
import ctxledger.ledger as ledger_module
from ctxledger.eval.datasets import MESSAGE_FRAMING_TOKENS, load_locomo
from ctxledger.eval.harness import HEADLINE_EXCLUDED, evaluate_case
from ctxledger.eval.ours import PolicySelector
from ctxledger.tokens import get_counter


@dataclass
class Question:
    """One assembled question: the budget's use and its evidence turns left out."""

    conversation: int
    category: str
    text: str
    recall: float
    dynamic: int
    used: int
    chosen: int
    framing: int
    required: int
    missed: list[dict[str, Any]] = field(default_factory=list)


class Capture:
    """Keeps the last assembly and the relevance scores it ranked with (until :meth:`uninstall`)."""

    def __init__(self) -> None:
        self.last: dict[str, Any] = {}
        self._originals = relevance, assemble = assembler.relevance_scores, ledger_module.Ledger.assemble

        def scores(request: Any, snap: Any, policy: Any = None) -> Any:
            self.last["snap"], self.last["scores"] = snap, relevance(request, snap, policy)
            return self.last["scores"]

        def assembled(ledger: Any, *a: Any, **k: Any) -> Any:
            self.last["asm"] = assemble(ledger, *a, **k)
            return self.last["asm"]

        assembler.relevance_scores = scores  # type: ignore[assignment]
        ledger_module.Ledger.assemble = assembled  # type: ignore[method-assign]

    def uninstall(self) -> None:
        """Put the assembler's relevance and ``Ledger.assemble`` back."""
        assembler.relevance_scores, ledger_module.Ledger.assemble = self._originals  # type: ignore[assignment]


def examine(capture: Capture, selector: PolicySelector, case: Any, index: int, recall: float) -> Question:
    """The :class:`Question` of the assembly ``capture`` holds for ``case``."""
    asm, snap, scores = capture.last["asm"], capture.last["snap"], capture.last["scores"]
    history = selector._histories[0]
    phases = asm.phases
    result = phases.selected.result
    item_of = {u.id: history.item_of.get(u.records[0].id) for u in snap.units}
    unit_of = {v: k for k, v in item_of.items() if v is not None}
    order = np.argsort(-np.asarray(scores), kind="stable")
    rank_all = {snap.units[p].id: n for n, p in enumerate(order)}
    items = phases.selected.items
    by_utility = sorted(items, key=lambda i: (-i.options[0].utility, -i.seq, i.unit_id))
    rank_visited = {i.unit_id: n for n, i in enumerate(by_utility)}
    tokens = {i.unit_id: i.options[0].tokens for i in items}
    roles = {u.id: u.role for u in snap.units}
    chosen = result.chosen
    framing = sum(MESSAGE_FRAMING_TOKENS + selector.counter.count(roles.get(uid) or "user") for uid in chosen)
    question = Question(
        index,
        case.category,
        case.query,
        recall,
        phases.budgeted.dynamic,
        sum(o.tokens for o in chosen.values()),
        len(chosen),
        framing,
        sum(1 for i in items if i.required),
    )
    for evidence in sorted(case.required_ids):
        uid = unit_of.get(evidence)
        if uid is None or uid in chosen:
            continue
        reason = result.omitted.get(uid)
        question.missed.append(
            {
                "turn": evidence,
                "rank": rank_all.get(uid),
                "visited_rank": rank_visited.get(uid),
                "tokens": tokens.get(uid),
                "reason": reason.value if reason is not None else None,
            }
        )
    return question


def summary(questions: list[Question]) -> list[str]:
    """The summary lines (see the module docstring)."""
    missed = [m for q in questions for m in q.missed]
    ranks = [m["rank"] for m in missed if m["rank"] is not None]
    unvisited = [m for m in missed if m["visited_rank"] is None]
    lines = [
        f"{len(questions)} questions: B_dynamic median {statistics.median(q.dynamic for q in questions):.0f}, used "
        f"{statistics.median(q.used for q in questions):.0f} (unused mean "
        f"{statistics.mean(q.dynamic - q.used for q in questions):.1f}), units chosen median "
        f"{statistics.median(q.chosen for q in questions):.0f}, tokens per unit "
        f"{statistics.mean(q.used / q.chosen for q in questions if q.chosen):.1f}, framing share "
        f"{statistics.mean(q.framing / q.used for q in questions if q.used):.3f}, required units median "
        f"{statistics.median(q.required for q in questions):.0f}",
        f"evidence turns left out: {len(missed)} "
        f"({dict(Counter(q.category for q in questions for _ in q.missed))}); never visited {len(unvisited)}",
    ]
    if ranks:
        pct = np.percentile(ranks, [10, 25, 50, 75, 90])
        lines.append("their rank by relevance, percentiles 10/25/50/75/90: " + " / ".join(f"{p:.0f}" for p in pct))
    if unvisited:
        seen = [m["rank"] for m in unvisited if m["rank"] is not None]
        lines.append(f"never visited, median rank {statistics.median(seen):.0f}, within the top 60: "
                     f"{sum(1 for r in seen if r < 60)}")  # fmt: skip
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--file", type=Path, default=Path("../shared/data/locomo/locomo10_conv0-6.json"))
    parser.add_argument("--conversations", default="0-4", help="indices, e.g. 0-4 (tune only on 0-4)")
    parser.add_argument("-b", "--budget", type=int, default=2000, help="budget in tokens")
    parser.add_argument("--show", type=int, default=0, help="questions with a miss printed one by one")
    parser.add_argument("--json", type=Path, help="also write every question as JSON")
    args = parser.parse_args()
    first, _, last = args.conversations.partition("-")
    counter = get_counter("cl100k_base")
    capture = Capture()
    records = json.loads(args.file.read_text(encoding="utf-8"))
    questions = []
    for index in range(int(first), int(last or first) + 1):
        one = Path(f"/tmp/locomo_misses_{index}.json")  # a one-conversation file the loader reads
        one.write_text(json.dumps([records[index]]), encoding="utf-8")
        selector = PolicySelector(counter)
        for case in load_locomo(one, counter).cases:
            if case.category in HEADLINE_EXCLUDED or not case.required_ids:
                continue
            row = evaluate_case(case, selector, args.budget, counter)
            questions.append(examine(capture, selector, case, index, row.recall or 0.0))
    for line in summary(questions):
        print(line)
    shown = [q for q in questions if q.missed][: args.show]
    for q in shown:
        print(f"[{q.conversation}] {q.category} recall {q.recall:.2f}: {q.text}")
        for m in q.missed:
            visited = "-" if m["visited_rank"] is None else m["visited_rank"]
            print(f"    {m['turn']}: rank {m['rank']}, visited rank {visited}, {m['tokens']} tokens, {m['reason']}")
    if args.json:
        args.json.write_text(json.dumps([q.__dict__ for q in questions], indent=1), encoding="utf-8")


if __name__ == "__main__":
    main()
