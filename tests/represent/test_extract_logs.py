"""The logs extractor on real shell and build output: errors, warnings, exit status, locators."""

from __future__ import annotations

from pathlib import Path

from represent_helpers import (
    OBSERVED,
    artifact_for,
    mini_swe_output,
    read_json,
    swe_agent_observation,
    tau_tool_outputs,
)

from ctxledger.records import Freshness, ToolStatus, Trust
from ctxledger.represent import extract, rehydrate
from ctxledger.testing import MemoryBlobStore


def test_traceback_becomes_one_error_with_its_frame(data_dir: Path, blobs: MemoryBlobStore):
    """A real failed import (pyvista) reports exit 1, the ImportError, its innermost frame and the pip warning."""
    data = mini_swe_output(data_dir, "pyvista__pyvista-4315", 27)
    blobs.put(data)
    memory = extract(artifact_for(data), data, memory_id="mem-1", observed_at=OBSERVED)
    assert memory is not None
    fields = memory.fields
    assert fields["extractor"] == "logs"
    assert fields["exit_status"] == 1
    (error,) = fields["errors"]
    assert error["kind"] == "exception"
    assert error["text"].startswith("ImportError: cannot import name 'vtkCompositePolyDataMapper2'")
    assert (error["file"], error["file_line"]) == ("/testbed/pyvista/_vtk.py", 524)
    assert fields["warnings"][0]["text"].startswith("WARNING: Running pip as the 'root' user")
    assert "exited with status 1" in memory.summary and "ImportError" in memory.summary
    traceback = rehydrate(blobs, memory.locators[1]).decode()
    assert traceback.startswith("Traceback (most recent call last):")
    assert traceback.rstrip().endswith("vtkRenderingOpenGL2.cpython-311-x86_64-linux-gnu.so)")


def test_b13_build_log_errors_and_warning(cases_dir: Path, blobs: MemoryBlobStore):
    """The B13 build log yields the fatal submodule error, the summary line and the deprecation warning."""
    case = read_json(cases_dir / "B13.json")
    data = next(m for m in case["messages"] if m["id"] == "m4")["content"].encode()
    blobs.put(data)
    memory = extract(artifact_for(data, name="run_shell"), data, memory_id="mem-b13", observed_at=OBSERVED)
    assert memory is not None
    texts = [e["text"] for e in memory.fields["errors"]]
    assert texts == [
        "[0242] fatal: could not read submodule 'third_party/zlib-ng': remote host unreachable",
        "[0243] build stopped: 1 error, 1 warning",
    ]
    assert [w["line"] for w in memory.fields["warnings"]] == [121]
    located = [rehydrate(blobs, loc).decode() for loc in memory.locators[1:3]]
    assert located[0] == "[0242] fatal: could not read submodule 'third_party/zlib-ng': remote host unreachable\n"


def test_memory_envelope_provenance_and_freshness(data_dir: Path):
    """The memory carries the artifact's envelope, tool-result trust, session freshness and provenance."""
    data = mini_swe_output(data_dir, "marshmallow-code__marshmallow-1343", 9)
    artifact = artifact_for(data, artifact_id="art-9", source_version="git:1343")
    memory = extract(artifact, data, memory_id="mem-9", observed_at=OBSERVED)
    assert memory is not None
    assert (memory.tenant_id, memory.conversation_id, memory.branch_id) == ("t1", "c1", "c1/main")
    assert memory.trust == Trust.TOOL_RESULT and memory.trust_source == "tool_result:bash"
    assert memory.freshness == Freshness.SESSION and memory.stale_after is None
    assert memory.source_artifact_ids == ("art-9",) and memory.source_version == "git:1343"
    assert memory.observed_at == memory.created_at == OBSERVED
    assert all(loc["artifact_id"] == "art-9" and loc["source_version"] == "git:1343" for loc in memory.locators)
    assert memory.fields["errors"][0]["text"] == "ModuleNotFoundError: No module named 'marshmallow'"


def test_tau_bench_error_result(data_dir: Path):
    """A tau-bench ``Error: …`` tool result is an error line; the failed status is carried along."""
    content = next(c for c in tau_tool_outputs(data_dir, "book_reservation") if c.startswith("Error:"))
    data = content.encode()
    memory = extract(
        artifact_for(data, name="book_reservation", status=ToolStatus.FAILED),
        data,
        memory_id="m",
        observed_at=OBSERVED,
    )
    assert memory is not None
    assert memory.fields["error_count"] == 1 and memory.fields["tool_status"] == "failed"
    assert memory.fields["errors"][0]["text"] == content


def test_clean_output_has_no_errors(data_dir: Path):
    """A real successful ``pip install -e .`` has exit 0, no error lines, and its root warning."""
    data = mini_swe_output(data_dir, "sqlfluff__sqlfluff-1733", 19)
    memory = extract(artifact_for(data), data, memory_id="m", observed_at=OBSERVED)
    assert memory is not None
    assert memory.fields["exit_status"] == 0 and memory.fields["error_count"] == 0
    assert memory.fields["warning_count"] == 1
    assert "no error lines" in memory.summary


def test_editor_lint_errors_but_not_code_that_mentions_errors(data_dir: Path):
    """SWE-agent demo: the editor's lint failure is reported; a file view with ``raise ValueError`` is not."""
    demo = "marshmallow-1867__function_calling__install-1"
    lint = swe_agent_observation(data_dir, demo, 6)
    memory = extract(artifact_for(lint, name="str_replace_editor"), lint, memory_id="m", observed_at=OBSERVED)
    assert memory is not None
    assert [e["text"] for e in memory.fields["errors"]] == [
        "Your proposed edit has introduced new syntax error(s). Please read this error message carefully and then "
        "retry editing the file.",
        "ERRORS:",
        "- E999 IndentationError: unexpected indent",
        "DO NOT re-run the same failed edit command. Running it again will lead to the same error.",
    ]
    view = swe_agent_observation(data_dir, demo, 5)
    assert b"raise ValueError(msg)" in view
    memory = extract(artifact_for(view, name="str_replace_editor"), view, memory_id="m", observed_at=OBSERVED)
    assert memory is not None and memory.fields["error_count"] == 0
