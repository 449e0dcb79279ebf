"""The README's "Recording a live agent" example, taken from README.md itself, runs and prints what it says."""

from __future__ import annotations

import contextlib
import io
import re

from ctxledger import Ledger


def test_readme_recorder_example_runs_as_written(tmp_path, monkeypatch, readme_block):
    """The block writes a parent, a subagent, a tool call, a memory, a scratch note and a checkpoint, then explains."""
    code = readme_block("python", "ledger.recorder(")
    assert len(code.splitlines()) <= 40
    monkeypatch.chdir(tmp_path)  # the example opens sqlite:///agent.db in the working directory
    prints = [line for line in code.splitlines() if line.startswith("print(")]
    comments = [re.search(r"#\s*(\w+)", line).group(1) for line in prints]
    runs = []
    for _ in range(2):  # a reader runs it again in the same folder: agent.db persists, the example still runs
        out = io.StringIO()
        scope: dict = {}
        with contextlib.redirect_stdout(out):
            exec(compile(code, "README.md", "exec"), scope)  # the README's own example
        scope["ledger"].close()
        runs.append(scope["conv"])
        assert out.getvalue().splitlines() == ["included", "not_promoted", "rehydrated"] == comments
    assert runs[0] != runs[1]

    with Ledger.open(f"sqlite:///{tmp_path}/agent.db") as ledger:  # what it wrote is in the store for later calls
        assert set(runs) <= set(ledger.store.conversations("default"))
        asm = ledger.get_assembly(scope["asm"].id)
        included = {i["ref"] for i in asm["included"]}
        assert scope["fact"] in included and scope["report"] in included and scope["scratch"] not in included
        art = ledger.store.get("default", scope["logs"].artifact)
        assert ledger.rehydrate(art.id).startswith(b'{"job": "export"')
        assert (art.media_type, art.owner_participant_id) == ("application/json", scope["scout"])
        memory = ledger.store.get("default", scope["fact"])
        assert memory.source_version == "logs@2026-09-01" and memory.source_artifact_ids == (art.id,)
        assert asm["warnings"] == []
