"""The test-run extractor on real pytest output: counts, and each failure with its file and line."""

from __future__ import annotations

import glob
from pathlib import Path

from represent_helpers import OBSERVED, artifact_for, mini_swe_output, mini_swe_outputs

from ctxledger.represent import extract, rehydrate
from ctxledger.testing import MemoryBlobStore


def _memory(data: bytes):
    memory = extract(artifact_for(data), data, memory_id="mem", observed_at=OBSERVED)
    assert memory is not None and memory.fields["extractor"] == "testrun"
    return memory


def test_pytest_failure_with_file_line_and_message(data_dir: Path, blobs: MemoryBlobStore):
    """pydicom: 1 failed, 18 passed; the failure's node id, file:line 228 and AttributeError."""
    data = mini_swe_output(data_dir, "pydicom__pydicom-1139", 131)
    blobs.put(data)
    memory = _memory(data)
    assert memory.fields["counts"] == {"failed": 1, "passed": 18}
    assert memory.fields["exit_status"] == 1
    (failure,) = memory.fields["failures"]
    assert failure == {
        "test": "pydicom/tests/test_valuerep.py::TestBadValueRead::test_read_bad_value_in_VR_default",
        "file": "pydicom/tests/test_valuerep.py",
        "line": 228,
        "error": "AttributeError: 'TestBadValueRead' object has no attribute 'tag'",
        "outcome": "failed",
    }
    section = rehydrate(blobs, memory.locators[1]).decode()
    assert section.startswith("______________ TestBadValueRead.test_read_bad_value_in_VR_default")
    assert "pydicom/tests/test_valuerep.py:228: AttributeError" in section


def test_chained_exception_prefers_the_test_file_frame(data_dir: Path):
    """pvlib: the failure is located in the test file (line 52) and raised inside pandas."""
    memory = _memory(mini_swe_output(data_dir, "pvlib__pvlib-python-1072", 131))
    assert memory.fields["counts"] == {"failed": 1, "passed": 4, "warnings": 2}
    (failure,) = memory.fields["failures"]
    assert (failure["file"], failure["line"]) == ("pvlib/tests/test_temperature.py", 52)
    assert failure["raised_at"] == "pandas/_libs/tslibs/offsets.pyx:6137"
    assert failure["error"].startswith("ValueError: Invalid frequency: 12H.")
    assert "pvlib/tests/test_temperature.py:52" in memory.summary


def test_output_cut_by_tail_still_names_the_failure(data_dir: Path):
    """``pytest … | tail -50`` starts mid-section; the failure still gets its test-file line."""
    memory = _memory(mini_swe_output(data_dir, "pvlib__pvlib-python-1072", 107))
    (failure,) = memory.fields["failures"]
    assert failure["test"] == "pvlib/tests/test_temperature.py::test_fuentes[pvwatts_8760_rackmount.csv-45]"
    assert (failure["file"], failure["line"]) == ("pvlib/tests/test_temperature.py", 184)
    assert failure["error"] == "AssertionError: Series are different"


def test_passing_run_has_counts_and_no_failures(data_dir: Path):
    """A real all-green run yields its counts and an empty failure list."""
    memory = _memory(mini_swe_output(data_dir, "pvlib__pvlib-python-1072", 139))
    assert memory.fields["counts"] == {"passed": 17, "warnings": 2}
    assert memory.fields["failures"] == []


def test_every_real_failed_run_names_a_failure(data_dir: Path):
    """Across all mini-swe-agent pytest outputs, every ``N failed`` total comes with ≥ 1 named failure."""
    checked = 0
    for path in sorted(glob.glob(str(data_dir / "mini-swe-agent-deepseek" / "*.traj.json"))):
        for _, command, output in mini_swe_outputs(Path(path)):
            if "pytest" not in command:
                continue
            memory = extract(artifact_for(output.encode()), output.encode(), memory_id="m", observed_at=OBSERVED)
            assert memory is not None
            if memory.fields["extractor"] == "testrun" and memory.fields["counts"].get("failed"):
                checked += 1
                assert memory.fields["failures"], (path, command)
    assert checked >= 6
