"""``bench/call_phases.py`` times a call by phase and leaves every function it wrapped as it found it."""

from __future__ import annotations

import gc
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.call_phases import PHASES, SNAPSHOT, phase_ms, timed_phases  # noqa: E402

from ctxledger.assemble import assembler, snapshot  # noqa: E402
from ctxledger.assemble.phases import budget  # noqa: E402
from ctxledger.ledger import Ledger  # noqa: E402
from ctxledger.store.sql import SqlStore  # noqa: E402


def _history(turns: int) -> list[dict[str, object]]:
    messages: list[dict[str, object]] = [{"role": "system", "content": "You answer questions about the build."}]
    for i in range(turns):
        messages.append({"role": "user", "content": f"question {i}: why did step {i} of the build fail?"})
        messages.append({"role": "assistant", "content": f"step {i} failed because module m{i} was missing"})
    return messages


@pytest.mark.parametrize("turns", [3, 40])
def test_a_new_ledgers_call_is_timed_by_phase_and_the_functions_are_put_back(tmp_path: Path, turns: int) -> None:
    url = f"sqlite:///{tmp_path / 'store.db'}"
    with Ledger.open(url) as ledger:
        ledger.import_messages(_history(turns), conversation_id="c")
    originals = (SqlStore.records, snapshot.build_units, budget.unit_turn_costs, assembler.unit_turn_costs, gc.collect)
    with timed_phases() as spent, Ledger.open(url) as fresh:
        assert SqlStore.records is not originals[0] and assembler.unit_turn_costs is not originals[3]
        fresh.assemble("c", model="gpt-4o", window_tokens=8_000, output_tokens=1_000, persist=False)
    assert (SqlStore.records, snapshot.build_units, budget.unit_turn_costs, assembler.unit_turn_costs, gc.collect) == (
        originals
    )
    assert set(spent) == {label for label, _, _ in PHASES}
    for label in (SNAPSHOT, "snapshot: records read and decoded", "snapshot: units built", "turn costs of every unit"):
        assert spent[label] > 0, label
    subs = sum(v for k, v in spent.items() if k.startswith("snapshot: "))
    assert subs <= spent[SNAPSHOT] + 1e-3  # the sub-phases run within the build
    shown = phase_ms(spent, call_cpu_s=sum(spent.values()) + 1.0)
    assert SNAPSHOT not in shown and shown["rest"] >= 1000.0 - 1e-6
    assert shown["snapshot: other"] == pytest.approx((spent[SNAPSHOT] - subs) * 1000.0, abs=0.1)
