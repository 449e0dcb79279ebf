"""LoCoMo with a sentence rung: lower-ranked turns enter as their best sentence, so more turns fit the budget.

A measurement, not a policy: the select phase's knapsack call is wrapped so that every optional message unit
ranked (by utility) past ``--rank`` × the number of units that would fit verbatim is offered only as its
``--keep`` sentences most like the question (query-topic stems in the sentence, plus the sentence's centred
cosine to the query's topic vector), joined by `` … `` after the speaker prefix; a turn of ``--keep``
sentences or fewer stays verbatim. Everything else is the default policy, assembled by the harness's own
:func:`~ctxledger.eval.harness.evaluate_case`.

Evidence recall credits a turn that entered as an excerpt, whatever the excerpt kept; so the script also
prints **answer words kept**: per question, of the stems of LoCoMo's answer that occur in its evidence turns,
the share that occur in what the payload carries of those turns (0 for a turn left out), averaged over the
questions where the evidence holds any (a check of what the excerpts lose, not a LoCoMo metric):

    python bench/locomo_sentence_rung.py --split 0-4 --rank 0.65 -b 2000 -b 8000
    python bench/locomo_sentence_rung.py --split 0-4 --rank 0      # rung never offered: the default policy

``--rank`` above 1 is an absolute rank (``--rank 30``: from the 31st unit on).
Tune only on 0–4; 5–6 is the check. CPU per call includes embedding each new turn's sentences once.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import re
import statistics
from collections import defaultdict
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

import ctxledger.assemble.assembler as assembler
import ctxledger.assemble.phases.select as select_phase
import ctxledger.ledger as ledger_module
from ctxledger.assemble.query import query_topic
from ctxledger.assemble.relevance import tokenize
from ctxledger.assemble.select import SelectionItem, new_option
from ctxledger.assemble.semantic import default_embedder
from ctxledger.eval.datasets import chat_tokens, load_locomo
from ctxledger.eval.harness import HEADLINE_EXCLUDED, evaluate_case
from ctxledger.eval.ours import PolicySelector, _sent_texts
from ctxledger.policy.default import default_policy
from ctxledger.tokens import get_counter

SENTENCE_END = re.compile(r"(?<=[.!?])\s+")
CAPTION = re.compile(r" \[shares a photo: .*\]$")


def split_turn(text: str) -> tuple[str, list[str]]:
    """A LoCoMo turn ``"<speaker>: <text> [shares a photo: …]"`` as its prefix and its sentences (caption dropped)."""
    speaker, sep, body = text.partition(": ")
    if not sep:
        speaker, body = "", text
    body = CAPTION.sub("", body)
    parts = [s for s in SENTENCE_END.split(body) if s.strip()]
    return speaker + sep, parts or [body]


def best_sentences(parts: Sequence[str], scores: Sequence[float], keep: int) -> list[int]:
    """Indices of the ``keep`` best-scored sentences, in text order (ties: the earlier sentence)."""
    ranked = sorted(range(len(parts)), key=lambda k: (-scores[k], k))
    return sorted(ranked[:keep])


def excerpt_text(prefix: str, parts: Sequence[str], kept: Sequence[int]) -> str:
    """The excerpt as sent: the prefix, then the kept sentences joined by `` … ``."""
    return prefix + " … ".join(parts[k] for k in kept)


class SentenceRung:
    """Wraps the select phase's knapsack (see the module docstring); ``rank`` 0 = the rung is never offered."""

    def __init__(self, rank: float, keep: int, counter: Any) -> None:
        self.rank, self.keep, self.counter = rank, keep, counter
        self.embedder = default_embedder()
        if self.embedder is None:
            raise SystemExit("needs the semantic extra (pip install 'ctxledger[semantic]')")
        self.memo: dict[str, tuple[str, list[str], np.ndarray | None, list[set[str]]]] = {}
        self.seen: dict[str, Any] = {}
        self._select = select_phase.select
        self._relevance = assembler.relevance_scores

    def install(self) -> None:
        def relevance(request: Any, snap: Any, policy: Any = None) -> Any:
            self.seen["query"], self.seen["snap"] = request.query, snap
            return self._relevance(request, snap, policy)

        assembler.relevance_scores = relevance  # type: ignore[assignment]
        select_phase.select = self.select  # type: ignore[assignment]

    def _sentences(self, text: str) -> tuple[str, list[str], np.ndarray | None, list[set[str]]]:
        hit = self.memo.get(text)
        if hit is None:
            prefix, parts = split_turn(text)
            vectors = self.embedder.embed(parts).astype(np.float64) if len(parts) > self.keep else None
            hit = self.memo[text] = (prefix, parts, vectors, [set(tokenize([p])[0]) for p in parts])
        return hit

    def _first_excerpted(self, items: Sequence[SelectionItem], optional: Sequence[SelectionItem], target: int) -> int:
        if self.rank > 1:
            return int(self.rank)
        room = target - sum(min(o.tokens for o in i.options) for i in items if i.required)
        fitting = 0
        for item in optional:
            if item.options[0].tokens <= room:
                room -= item.options[0].tokens
                fitting += 1
        return int(self.rank * fitting)

    def select(self, items: Sequence[SelectionItem], target: int, ledger: Any) -> Any:
        snap = self.seen["snap"]
        if self.rank <= 0 or snap.vectors is None or not self.seen["query"]:
            return self._select(items, target, ledger)
        mean = snap.vectors._rows[: len(snap.vectors)].astype(np.float64).mean(axis=0)
        topic = query_topic(self.seen["query"])
        terms = set(tokenize([topic])[0])
        query = self.embedder.embed([topic])[0].astype(np.float64) - mean
        optional = sorted(
            (i for i in items if not i.required), key=lambda i: (-i.options[0].utility, -i.seq, i.unit_id)
        )
        for item in optional[self._first_excerpted(items, optional, target) :]:
            verbatim = item.options[0]
            if len(verbatim.turns) != 1 or not isinstance(verbatim.turns[0].content, str):
                continue
            prefix, parts, vectors, stems = self._sentences(verbatim.turns[0].content)
            if vectors is None:
                continue
            centred = vectors - mean
            norms = np.linalg.norm(centred, axis=1) * max(float(np.linalg.norm(query)), 1e-12)
            cos = np.divide(centred @ query, norms, out=np.zeros(len(parts)), where=norms > 0)
            scores = [len(terms & stems[k]) + float(cos[k]) for k in range(len(parts))]
            text = excerpt_text(prefix, parts, best_sentences(parts, scores, self.keep))
            turn = dataclasses.replace(verbatim.turns[0], content=text)
            tokens = chat_tokens(self.counter, turn.role, text)
            item.options = [
                new_option(
                    "excerpt", tokens, verbatim.utility, (turn,), f"sentences@{self.keep}", turn_tokens=(tokens,)
                )
            ]
        return self._select(items, target, ledger)


def _split(text: str) -> list[int]:
    first, _, last = text.partition("-")
    return list(range(int(first), int(last or first) + 1))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--file", type=Path, default=Path("../shared/data/locomo/locomo10_conv0-6.json"))
    parser.add_argument("--split", default="0-4", help="conversation indices, e.g. 0-4")
    parser.add_argument("-b", "--budget", type=int, action="append", help="budget in tokens (repeatable)")
    parser.add_argument(
        "--rank", type=float, default=0.65, help="share (≤ 1) of the verbatim-fitting units, or a rank (> 1); 0 = off"
    )
    parser.add_argument("--keep", type=int, default=1, help="sentences an excerpt keeps")
    args = parser.parse_args()
    budgets = args.budget or [2000, 8000]
    counter = get_counter("cl100k_base")
    rung = SentenceRung(args.rank, args.keep, counter)
    rung.install()
    last: dict[str, Any] = {}
    assemble = ledger_module.Ledger.assemble

    def kept_assembly(self: Any, *a: Any, **k: Any) -> Any:
        last["asm"] = assemble(self, *a, **k)
        return last["asm"]

    ledger_module.Ledger.assemble = kept_assembly  # type: ignore[method-assign]
    records = json.loads(args.file.read_text(encoding="utf-8"))
    recall: dict[int, list[tuple[str, float]]] = defaultdict(list)
    words: dict[int, list[float]] = defaultdict(list)
    cpu: dict[int, list[float]] = defaultdict(list)
    for index in _split(args.split):
        one = Path(f"/tmp/locomo_rung_{index}.json")  # a one-conversation file the loader reads
        one.write_text(json.dumps([records[index]]), encoding="utf-8")
        dataset = load_locomo(one, counter)
        answers = {qa["question"]: str(qa.get("answer", "")) for qa in records[index]["qa"]}
        selector = PolicySelector(counter, default_policy())
        for case in dataset.cases:
            for budget in budgets:
                row = evaluate_case(case, selector, budget, counter)
                if row.recall is None or case.category in HEADLINE_EXCLUDED:
                    continue
                recall[budget].append((case.category.split("-", 1)[1], row.recall))
                cpu[budget].append(row.cpu_s * 1000)
                share = _answer_words_kept(case, selector, last["asm"], answers.get(case.query, ""))
                if share is not None:
                    words[budget].append(share)
    for budget in budgets:
        by_cat: dict[str, list[float]] = defaultdict(list)
        for category, value in recall[budget]:
            by_cat[category].append(value)
        cats = " ".join(f"{c} {statistics.mean(v):.3f}" for c, v in sorted(by_cat.items()))
        print(
            f"split {args.split} rank {args.rank:g} keep {args.keep} b={budget}: recall "
            f"{statistics.mean(v for _, v in recall[budget]):.3f} ({len(recall[budget])} q) | {cats} | answer words "
            f"kept {statistics.mean(words[budget]):.3f} ({len(words[budget])} q) | cpu p50 "
            f"{statistics.median(cpu[budget]):.1f} ms",
            flush=True,
        )


def _answer_words_kept(case: Any, selector: PolicySelector, asm: Any, answer: str) -> float | None:
    """Of the answer's stems found in the evidence turns, the share found in what the payload carries of them."""
    history = selector._histories[0]
    sent = _sent_texts(asm, history)
    included = {history.item_of[ref] for ref in asm.turn_refs if ref in history.item_of}
    stems = set(tokenize([answer])[0])
    items = {i.id: i for i in case.items}
    whole: set[str] = set()
    carried: set[str] = set()
    for evidence in case.required_ids:
        item = items.get(evidence)
        if item is None:
            continue
        whole |= stems & set(tokenize([item.text])[0])
        if evidence in included:
            carried |= stems & set(tokenize([sent.get(evidence, item.text)])[0])
    return len(carried) / len(whole) if whole else None


if __name__ == "__main__":
    main()
