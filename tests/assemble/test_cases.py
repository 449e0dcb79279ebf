"""The failure cases of ../shared/cases whose kinds the main job covers, each run as a real assembly."""

from __future__ import annotations

import pytest

from ctxledger.eval.cases import check_case, read_case_file, run_case
from ctxledger.ledger import Ledger
from ctxledger.testing import MemoryStore

MAIN_JOB_CASES = ["B01", "B02", "B04", "B06", "B08", "B10", "B15"]
"""orphan results, trailing results, system prompt, tool schemas in the budget, images, tool error state,
required blocks that do not fit."""


@pytest.mark.parametrize("case_id", MAIN_JOB_CASES)
def test_case_expectations_hold(cases_dir, case_id):
    """Every expectation of the case holds on the assembled payload and its manifest."""
    case = read_case_file(cases_dir / f"{case_id}.json")
    run = run_case(case, Ledger(MemoryStore()))
    assert check_case(run) == []
