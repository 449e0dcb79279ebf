"""Relevance variants on LoCoMo, fast: the default policy's relevance recomputed per question, filled greedily.

A full run of ``bench/locomo_splits.py`` costs minutes per setting; this sweep records each conversation once
(as ``ctxledger eval run`` does), keeps the snapshot of its first assembly (BM25 index, unit vectors, dates),
and then, per question and variant, recomputes relevance in numpy and fills the budget with units in the order
of the selection's utility (``0.8·relevance + 0.1·recency``, the question weights). It is a proxy of the
selector, not the selector: on conversations 0–4 at 2,000 tokens it gave 0.885 where the harness gave 0.885
(8,000: 0.964 / 0.966) before ``drop_question_words``, and 0.891 / 0.887 (0.971 / 0.971) with it, but
multi-hop 0.725 where the harness gives 0.692 (the harness also drops a leading non-user turn and places the
protected turns first); use it to rank variants, then confirm with ``bench/locomo_splits.py``.

    python bench/locomo_relevance_sweep.py --conversations 0-4 '{}' '{"prf": 1.0}' '{"speaker": 0.5}'

A variant is a JSON object; keys (absent = the default policy):
``w`` semantic weight, ``decay`` / ``window`` neighbour spread, ``date`` date boost, ``sem_power`` /
``lex_power`` (each normalised part raised to a power before the mix), ``prf`` / ``prf_k`` (Rocchio feedback in
vector space: the query vector plus ``prf`` × the mean centred vector of the ``prf_k`` best units, then
re-scored), ``speaker`` (units said by the one participant the question names count ``1 + speaker`` times, after the
neighbour spread),
``session`` (each unit × ``1 + session ×`` its day's best score), ``diversity`` (a unit's score divided by
``1 + diversity · r / 8``, ``r`` its rank among its day's units), ``unnamed`` (BM25 of the query without the one
speaker name it names), ``sem_named`` (the query vector with that name: the assembler leaves it out while the
speaker boost is on), ``qwords`` (``drop_question_words``: BM25 and the query vector without the query's question
words), ``forward`` / ``backward`` (the spread's share to the turns after / before a hit, both 1 in the policy),
``question_penalty`` (after the spread, a turn whose last sentence asks a question × ``1 − question_penalty``),
``session_cap`` (the fill takes at most this many units of one calendar day). Absent keys take the default policy's
settings, so ``{}`` is the assembler's relevance.
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
from collections import defaultdict
from pathlib import Path
from typing import Any

import numpy as np

import ctxledger.assemble.assembler as assembler
from ctxledger.assemble.dates import days_match, query_dates
from ctxledger.assemble.phases.select import latest_user_text
from ctxledger.assemble.query import query_topic, unit_relevance
from ctxledger.assemble.relevance import spread, tokenize
from ctxledger.assemble.semantic import default_embedder
from ctxledger.assemble.speakers import named_speaker
from ctxledger.eval.base import REQUEST_BASE_TOKENS, SelectionTask
from ctxledger.eval.datasets import load_locomo
from ctxledger.eval.harness import HEADLINE_EXCLUDED
from ctxledger.eval.ours import PolicySelector
from ctxledger.policy.default import default_policy
from ctxledger.tokens import get_counter

DEFAULT = default_policy().selection


def _unit_relevance(request: Any, snap: Any, policy: Any = None) -> np.ndarray:
    """The assembler's relevance as :func:`~ctxledger.assemble.query.unit_relevance` computes it (every setting)."""
    query = request.query if request.query is not None else latest_user_text(snap.units)
    selection = policy.selection if policy is not None else None
    return unit_relevance(query, snap.index, snap.vectors, snap.facets, len(snap.units), selection)


def _capture() -> dict[str, Any]:
    """Keep the snapshot and the scores of each assembly's relevance (:func:`_unit_relevance`)."""
    seen: dict[str, Any] = {}
    original = _unit_relevance

    def wrapped(request: Any, snap: Any, policy: Any = None) -> np.ndarray:
        seen["snap"] = snap
        seen["scores"] = scores = original(request, snap, policy)
        return scores

    assembler.relevance_scores = wrapped  # type: ignore[assignment]
    return seen


def _centred_cos(rows: np.ndarray, mean: np.ndarray, q: np.ndarray) -> np.ndarray:
    c = rows - mean
    q = q - mean
    norms = np.linalg.norm(c, axis=1) * max(float(np.linalg.norm(q)), 1e-12)
    return np.divide(c @ q, norms, out=np.zeros(len(rows)), where=norms > 0)


def _rescale(cos: np.ndarray) -> np.ndarray:
    floor, top = float(cos.mean()), float(cos.max())
    return np.clip((cos - floor) / (top - floor), 0.0, None) if top > floor else np.zeros_like(cos)


def _unnamed(query: str, names: list[str]) -> str:
    """The query without the one speaker name it names (the speaker signal carries it), else the query."""
    named = named_speaker(query, names)
    return re.sub(rf"(?<!\w){re.escape(named)}(?:'s)?(?!\w)", " ", query) if named else query


def _spread_asymmetric(s: np.ndarray, decay: float, window: int, forward: float, backward: float) -> np.ndarray:
    """:func:`spread` with the turns after a hit given ``forward`` × and those before it ``backward`` × its share."""
    out = np.array(s, dtype=np.float64, copy=True)
    for d in range(1, min(window, len(s) - 1) + 1):
        out[d:] += forward * decay**d * s[:-d]
        out[:-d] += backward * decay**d * s[d:]
    return out


def _asks(text: str) -> bool:
    """Whether a LoCoMo turn (``"<speaker>: <text>"``, a shared photo's caption aside) ends with a question."""
    body = re.sub(r" \[shares a photo: .*\]$", "", text.partition(": ")[2]).strip()
    return body.endswith("?")


def relevance(conv: dict[str, Any], q: dict[str, Any], p: dict[str, Any]) -> np.ndarray:
    """The variant's relevance of every unit of ``conv`` to question ``q``, normalised to max 1."""
    rows, mean = conv["rows"], conv["mean"]
    topic = "_topic" if p.get("qwords", DEFAULT.drop_question_words) else ""
    bm = q["bm25_unnamed"] if p.get("unnamed") else q["bm25" + topic]
    lex = (bm / bm.max() if bm.max() > 0 else bm) ** p.get("lex_power", 1.0)
    speaker = p.get("speaker", DEFAULT.speaker_boost)
    qv = q["vector_unnamed" + topic] if speaker and not p.get("sem_named") else q["vector" + topic]
    sem = _rescale(_centred_cos(rows, mean, qv)) ** p.get("sem_power", 1.0)
    w = p.get("w", DEFAULT.semantic_weight)
    s = (1 - w) * lex + w * sem
    if p.get("prf"):
        top = np.argsort(-s)[: p.get("prf_k", 5)]
        fed = rows[top] - mean
        fed /= np.maximum(np.linalg.norm(fed, axis=1, keepdims=True), 1e-12)
        qc = qv - mean
        expanded = qc / max(float(np.linalg.norm(qc)), 1e-12) + p["prf"] * fed.mean(axis=0) + mean
        s = (1 - w) * lex + w * _rescale(_centred_cos(rows, mean, expanded))
    named = named_speaker(q["text"], conv["names"]) if speaker else None
    s = s * (1 + p.get("date", DEFAULT.date_boost) * q["dates"])
    decay, window = p.get("decay", DEFAULT.neighbour_decay), p.get("window", DEFAULT.neighbour_window)
    if "forward" in p or "backward" in p:
        s = _spread_asymmetric(s, decay, window, p.get("forward", 1.0), p.get("backward", 1.0))
    else:
        s = spread(s, decay, window)
    if p.get("question_penalty"):
        s = s * (1 - p["question_penalty"] * conv["asks"])
    if named is not None:
        s = s * (1 + speaker * (conv["speakers"] == named))
    sess = conv["sessions"]
    session = p.get("session", DEFAULT.session_boost)
    if session and s.max() > 0:
        best = np.zeros(sess.max() + 1)
        np.maximum.at(best, sess, s / float(s.max()))
        s = s * (1 + session * best[sess])
    if p.get("diversity"):
        rank, seen = np.zeros(len(s)), defaultdict(int)
        for i in np.argsort(-s, kind="stable"):
            rank[i] = seen[sess[i]]
            seen[sess[i]] += 1
        s = s / (1 + p["diversity"] * rank / 8)
    return s / s.max() if s.max() > 0 else s


def load(path: Path, indices: list[int], memories: bool, *, check: int = 0) -> list[dict[str, Any]]:
    """Per conversation: unit costs, vectors, sessions, speakers and per-question BM25, query vector, dates.

    ``check``: assemble the first ``check`` questions of each conversation too and keep the assembler's own
    relevance of each (``question["assembled"]``), to compare with :func:`relevance` of the empty variant.
    """
    counter = get_counter("cl100k_base")
    seen = _capture()
    embedder = default_embedder()
    if embedder is None:
        raise SystemExit("needs the semantic extra (pip install 'ctxledger[semantic]')")
    records = json.loads(path.read_text(encoding="utf-8"))
    out = []
    for index in indices:
        one = Path(f"/tmp/locomo_sweep_{index}.json")
        one.write_text(json.dumps([records[index]]), encoding="utf-8")
        dataset = load_locomo(one, counter, memories=memories)
        first = dataset.cases[0]
        PolicySelector(counter).select(SelectionTask(first.items, first.query, 2000, counter, first.query_tokens))
        snap = seen["snap"]
        by_id = {item.id: item for item in first.items}
        ext = [[r.external_id for r in u.records if r.external_id] for u in snap.units]
        rows = snap.vectors._rows[: len(snap.vectors)].astype(np.float64)
        codes, days, sessions = snap.facets.arrays()
        names = snap.facets.names
        questions = []
        selector = PolicySelector(counter)
        b = DEFAULT.bm25_b
        for case in dataset.cases:
            if case.category in HEADLINE_EXCLUDED or not case.required_ids:
                continue
            assembled = None
            topic = query_topic(case.query)
            if len(questions) < check:
                selector.select(SelectionTask(case.items, case.query, 2000, counter, case.query_tokens))
                assembled = seen["scores"]
            questions.append(
                {
                    "assembled": assembled,
                    "text": case.query,
                    "category": case.category.split("-", 1)[1],
                    "required": case.required_ids,
                    "tokens": case.query_tokens,
                    "bm25": snap.index.scores(tokenize([case.query])[0], len(snap.units), b=b),
                    "bm25_unnamed": snap.index.scores(tokenize([_unnamed(case.query, names)])[0], len(snap.units), b=b),
                    "bm25_topic": snap.index.scores(tokenize([topic])[0], len(snap.units), b=b),
                    "vector": embedder.embed([case.query])[0].astype(np.float64),
                    "vector_topic": embedder.embed([topic])[0].astype(np.float64),
                    "vector_unnamed": embedder.embed([_unnamed(case.query, names)])[0].astype(np.float64),
                    "vector_unnamed_topic": embedder.embed([_unnamed(topic, names)])[0].astype(np.float64),
                    "dates": days_match(query_dates(case.query), days),
                }
            )
        out.append(
            {
                "ext": ext,
                "cost": np.array([sum(by_id[e].tokens for e in ex if e in by_id) for ex in ext], dtype=float),
                "asks": np.array([float(any(_asks(by_id[e].text) for e in ex if e in by_id)) for ex in ext]),
                "rows": rows,
                "mean": rows.mean(axis=0),
                "covers": {i.id: tuple(i.meta.get("covers", ())) for i in first.items},
                "sessions": sessions,
                "speakers": np.array([names[c] if c >= 0 else "" for c in codes]),
                "names": names,
                "snap": snap,
                "questions": questions,
            }
        )
    return out


def run(data: list[dict[str, Any]], p: dict[str, Any], budget: int) -> tuple[float, dict[str, float]]:
    """Mean recall and recall per category of the greedy fill at ``budget`` tokens (module docstring)."""
    per: dict[str, list[float]] = defaultdict(list)
    for conv in data:
        n = len(conv["cost"])
        recency = 0.5 ** (np.arange(n)[::-1] / 4.0)
        for q in conv["questions"]:
            utility = 0.8 * relevance(conv, q, p) + 0.1 * recency
            room = budget - q["tokens"] - REQUEST_BASE_TOKENS
            got: set[str] = set()
            per_day: dict[int, int] = defaultdict(int)
            cap = p.get("session_cap")
            for i in np.argsort(-utility, kind="stable"):
                if cap and per_day[conv["sessions"][i]] >= cap:
                    continue
                if conv["cost"][i] <= room:
                    per_day[conv["sessions"][i]] += 1
                    room -= conv["cost"][i]
                    got.update(conv["ext"][i])
            credited = got | {c for g in got for c in conv["covers"].get(g, ())}
            per[q["category"]].append(len(q["required"] & credited) / len(q["required"]))
    every = [r for v in per.values() for r in v]
    return statistics.mean(every), {k: statistics.mean(v) for k, v in sorted(per.items())}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("variants", nargs="*", default=["{}"], help="JSON objects (module docstring)")
    parser.add_argument("--file", type=Path, default=Path("../shared/data/locomo/locomo10_conv0-6.json"))
    parser.add_argument("--conversations", default="0-4", help="indices, e.g. 0-4 (tune only on 0-4)")
    parser.add_argument("--memories", action="store_true")
    args = parser.parse_args()
    first, _, last = args.conversations.partition("-")
    data = load(args.file, list(range(int(first), int(last or first) + 1)), args.memories)
    for spec in args.variants:
        parts = []
        for budget in (2000, 8000):
            mean, cats = run(data, json.loads(spec), budget)
            parts.append(f"{budget}: {mean:.3f} (" + " ".join(f"{k} {v:.3f}" for k, v in cats.items()) + ")")
        print(f"{spec:40} " + " | ".join(parts), flush=True)


if __name__ == "__main__":
    main()
