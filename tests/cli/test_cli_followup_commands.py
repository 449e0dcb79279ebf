"""The follow-up commands `assemble` and `demo` print work as printed: same store, tenant and blob folder."""

from __future__ import annotations

import shlex
from pathlib import Path

from typer.testing import CliRunner

from ctxledger.cli import app


def _commands(output: str, verb: str) -> list[list[str]]:
    found = []
    for line in output.splitlines():
        line = line.strip().removeprefix("explain it:").replace("[REF]", "").strip()
        if line.startswith("ctxledger ") and f" {verb} " in f"{line} ":
            found.append(shlex.split(line)[1:])
    assert found, output
    return found


def test_demo_and_assemble_follow_ups_name_the_tenant_and_blob_folder(runner: CliRunner, tmp_path: Path) -> None:
    """Run in tenant t1 with blobs in their own folder, the printed explain commands answer as printed."""
    url, blobs = f"sqlite:///{tmp_path / 'f.db'}", str(tmp_path / "blob-folder")
    demo = runner.invoke(app, ["--db", url, "--tenant", "t1", "--blobs", blobs, "demo", "--out", str(tmp_path / "p")])
    assert demo.exit_code == 0, demo.output
    assert Path(blobs).is_dir() and not Path(f"{tmp_path / 'f.db'}.blobs").exists()
    for args in _commands(demo.stdout, "explain"):
        answer = runner.invoke(app, args)
        assert answer.exit_code == 0, (args, answer.output)
    conv = "tau-bench-airline-task2-trial1"
    assembled = runner.invoke(
        app, ["--db", url, "--tenant", "t1", "--blobs", blobs, "assemble", conv, "--out", str(tmp_path / "q")]
    )
    assert assembled.exit_code == 0, assembled.output
    (args,) = _commands(assembled.stdout, "explain")
    assert args[args.index("--tenant") + 1] == "t1" and args[args.index("--blobs") + 1] == blobs
    answer = runner.invoke(app, [*args, "17"])
    assert answer.exit_code == 0, (args, answer.output)
    assert "OMITTED" in answer.stdout or "INCLUDED" in answer.stdout


def test_follow_ups_of_the_default_tenant_do_not_name_it(runner: CliRunner, tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'g.db'}"
    demo = runner.invoke(app, ["--db", url, "demo", "--out", str(tmp_path / "p")])
    assert demo.exit_code == 0, demo.output
    assert all("--tenant" not in args for args in _commands(demo.stdout, "explain"))
