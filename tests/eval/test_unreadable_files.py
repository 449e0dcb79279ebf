"""Files of a dataset folder that are not one JSON document are counted and listed, never silently dropped."""

from __future__ import annotations

import json

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ctxledger.errors import InputError
from ctxledger.eval.datasets import UNREADABLE, load_path
from ctxledger.tokens import get_counter


@pytest.fixture(scope="module")
def trajectory(data_dir) -> str:
    """One real tau-bench record, as its file holds it."""
    return json.dumps(json.loads((data_dir / "tau-bench" / "gpt-4o-airline_tasks0-39.json").read_text())[:1])


@given(cut=st.floats(min_value=0.0, max_value=0.999), broken=st.integers(min_value=1, max_value=3))
@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
def test_cut_off_files_are_listed_with_the_dataset_of_their_folder(tmp_path_factory, trajectory, cut, broken) -> None:
    """Whatever the cut, each cut-off copy is listed with the parser's position; the whole file still loads."""
    folder = tmp_path_factory.mktemp("tb")
    (folder / "whole.json").write_text(trajectory)
    for k in range(broken):
        (folder / f"cut{k}.json").write_text(trajectory[: int(cut * len(trajectory))])
    (dataset,) = load_path(folder, get_counter("cl100k_base"), max_cases=1)
    assert dataset.name == "tau-bench" and dataset.quirks[UNREADABLE] == broken
    listed = dataset.listed[UNREADABLE]
    assert sorted(e.split(":", 1)[0] for e in listed) == [f"cut{k}.json" for k in range(broken)]
    assert all("not one JSON document" in e and ("line" in e or "empty" in e.lower()) for e in listed)
    with pytest.raises(InputError, match="not one JSON document"):
        load_path(folder / "cut0.json", get_counter("cl100k_base"))
