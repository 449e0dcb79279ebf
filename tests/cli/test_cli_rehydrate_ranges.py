"""``ctxledger rehydrate --bytes``: any range typed gives the slice, or exit 2 naming ``--bytes`` (the option the
user typed) in the library's words, never the library's parameter ``byte_range``."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from ctxledger.cli import app
from ctxledger.ledger import Ledger
from ctxledger.records import ToolArtifact

BOUND = st.none() | st.integers(0, 5) | st.integers(900, 100_000)


def test_a_bad_range_names_the_option_typed(runner: CliRunner, demo_store) -> None:
    with Ledger.open(demo_store.url) as ledger:
        artifact = next(
            r for c in ledger.store.conversations("default") for r in ledger.store.records("default", c)
            if isinstance(r, ToolArtifact)
        )  # fmt: skip
        whole = ledger.rehydrate(artifact.id)

    @settings(max_examples=25, deadline=None)
    @given(start=BOUND, end=BOUND, junk=st.sampled_from(["", "", "", "x", ":", " "]))
    def check(start: int | None, end: int | None, junk: str) -> None:
        typed = f"{'' if start is None else start}:{'' if end is None else end}{junk}"
        answer = runner.invoke(app, ["--db", demo_store.url, "rehydrate", artifact.id, "--bytes", typed])
        a, b = 0 if start is None else start, len(whole) if end is None else end
        if junk.strip() == "" and (start, end) != (None, None) and a <= b <= len(whole):
            assert answer.exit_code == 0, answer.output
            assert answer.stdout_bytes == whole[a:b]
            return
        assert answer.exit_code == 2, (typed, answer.output)
        assert answer.stderr.startswith("error: --bytes: "), answer.stderr
        assert "byte_range" not in answer.stderr

    check()
