"""Which files of a cases folder are cases: every ``*.json`` directly in it, whatever its name; a JSON file that
is not a case is refused by name, never skipped."""

from __future__ import annotations

import json
import shutil

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ctxledger.errors import InputError
from ctxledger.eval.cases import load_cases, run_cases


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(stem=st.from_regex(r"[a-z0-9][a-z0-9_.-]{0,15}", fullmatch=True))
def test_a_case_file_runs_under_any_name_and_its_id_defaults_to_the_stem(cases_dir, tmp_path_factory, stem):
    folder = tmp_path_factory.mktemp("cases")
    case = json.loads((cases_dir / "B01.json").read_text())
    del case["id"]
    (folder / f"{stem}.json").write_text(json.dumps(case))
    (folder / "README.md").write_text("not read")
    (folder / "old").mkdir()
    (folder / "old" / "package.json").write_text("{}")  # subfolders are not read
    [loaded] = load_cases(folder)
    assert loaded["id"] == stem


def test_every_shared_case_is_read_and_runs(cases_dir):
    assert [c.case_id for c in run_cases(cases_dir)] == sorted(p.stem for p in cases_dir.glob("*.json"))


@pytest.mark.parametrize(
    ("content", "says"),
    [
        ('{"name": "ctxledger"}', "not a failure case: a case is a JSON object with 'messages' (a list)"),
        ('[{"messages": []}]', "not a failure case"),
        ('{"messages": [], "expect": []}', "not a failure case"),
        ('{"messages": [', "not one JSON document in UTF-8 (Expecting value: line 1"),
    ],
)
def test_a_json_file_that_is_not_a_case_is_refused_by_name(cases_dir, tmp_path, content, says):
    shutil.copy(cases_dir / "B01.json", tmp_path)
    (tmp_path / "package.json").write_text(content)
    with pytest.raises(InputError) as err:
        load_cases(tmp_path)
    assert str(err.value).startswith(f"{tmp_path / 'package.json'}: ") and says in str(err.value)


def test_two_files_with_one_case_id_are_refused_naming_both(cases_dir, tmp_path):
    shutil.copy(cases_dir / "B01.json", tmp_path / "B01.json")
    shutil.copy(cases_dir / "B01.json", tmp_path / "mine.json")
    with pytest.raises(InputError, match=r"mine\.json, field 'id': case id 'B01' is also the id of B01\.json"):
        load_cases(tmp_path)


def test_a_folder_without_json_files_is_refused(tmp_path):
    (tmp_path / "README.md").write_text("cases go here")
    with pytest.raises(InputError, match=r"no failure cases \(\*\.json files\) found"):
        load_cases(tmp_path)
