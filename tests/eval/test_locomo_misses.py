"""The LoCoMo miss diagnostic (``bench/locomo_misses.py``) reads the assembly it describes: what it lists as left
out is evidence the payload does not carry, and the budget figures are the assembly's own."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _bench():
    spec = importlib.util.spec_from_file_location("locomo_misses", ROOT / "bench" / "locomo_misses.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def test_the_missed_evidence_is_what_the_payload_leaves_out(data_dir, tmp_path):
    from ctxledger.eval.datasets import load_locomo
    from ctxledger.eval.harness import evaluate_case
    from ctxledger.eval.ours import PolicySelector
    from ctxledger.tokens import get_counter

    misses = _bench()
    counter = get_counter("cl100k_base")
    records = json.loads((data_dir / "locomo" / "locomo10_conv0-6.json").read_text(encoding="utf-8"))
    one = tmp_path / "conv0.json"
    one.write_text(json.dumps([records[0]]), encoding="utf-8")
    capture = misses.Capture()
    try:
        selector = PolicySelector(counter)
        questions = []
        for case in [c for c in load_locomo(one, counter).cases if c.category.startswith("1-")][:8]:
            row = evaluate_case(case, selector, 2000, counter)
            q = misses.examine(capture, selector, case, 0, row.recall)
            sent = set(selector.select(_task(case, counter)).included_ids)
            assert {m["turn"] for m in q.missed} == set(case.required_ids) - sent
            assert len(q.missed) == round((1 - row.recall) * len(case.required_ids))
            assert 0 < q.used <= q.dynamic and 0 < q.framing < q.used
            assert all(m["rank"] is not None for m in q.missed)
            questions.append(q)
    finally:
        capture.uninstall()
    assert any(q.missed for q in questions)  # multi-hop questions of conversation 0 do miss evidence at 2,000
    assert misses.summary(questions)[0].startswith("8 questions")


def _task(case, counter):
    from ctxledger.eval.base import SelectionTask

    return SelectionTask(case.items, case.query, 2000, counter, case.query_tokens)
