"""``assemble`` reports the question/answer pairs left split for budget once, on one line with their count.

A long history can leave many pairs split on every call; each is kept in the manifest's warnings, and
``--show warnings`` (or ``--show all``) prints them one by one.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from hypothesis import given
from hypothesis import strategies as st
from typer.testing import CliRunner

from ctxledger.assemble.pairs import NAMED_SPLITS
from ctxledger.cli import app
from ctxledger.cli._render import _warning_lines
from ctxledger.ledger import Ledger

ONE_LINE = "question/answer pairs stayed split for budget"


def _split(i: int) -> dict[str, str]:
    code = "answer_left_out" if i % 2 else "question_left_out"
    return {"code": code, "input": "budget", "value": f"c/{i}", "detail": f"question c/{i} and its answer were split"}


@given(
    named=st.integers(min_value=0, max_value=NAMED_SPLITS),
    more=st.integers(min_value=0, max_value=40),
    others=st.lists(st.sampled_from(["now is earlier than the newest record", "no participant p"]), max_size=3),
)
def test_split_pairs_take_one_line_with_their_count_and_every_other_warning_stays(
    named: int, more: int, others: list[str]
) -> None:
    splits = [_split(i) for i in range(named)]
    total = named + (more if named == NAMED_SPLITS else 0)
    if total > named:
        splits.append({"code": "pairs_split", "input": "budget", "value": str(total), "detail": f"{total} pairs"})
    warnings: list[Any] = [{"code": "other", "detail": o} for o in others] + splits
    manifest = {"warnings": warnings}
    short = _warning_lines(manifest, every=False)
    assert short[: len(others)] == others
    if named + (total > named) <= 1:
        assert short == [w["detail"] for w in warnings]
    else:
        (line,) = short[len(others) :]
        assert line.startswith(f"{total} {ONE_LINE}") and splits[named - 1]["detail"] in line
    assert _warning_lines(manifest, every=True) == [w["detail"] for w in warnings]


def test_assemble_prints_one_line_for_the_split_pairs_and_show_warnings_prints_each(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'split.db'}"
    messages = [{"role": "system", "content": "Be brief."}]
    for i in range(60):
        messages.append({"role": "user", "content": f"What about release {i}?"})
        messages.append({"role": "assistant", "content": " ".join(f"w{i}x{j}" for j in range(900))})
    messages.append({"role": "user", "content": "And releases 3, 7 and 12?"})
    with Ledger.open(url) as ledger:
        ledger.import_messages(messages, conversation_id="split")
    runner = CliRunner()
    args = ["--db", url, "assemble", "split", "--window", "3000", "--output", "200", "--margin", "50"]
    short = runner.invoke(app, [*args, "--out", str(tmp_path / "a.json")])
    assert short.exit_code == 0, short.output
    with Ledger.open(url) as ledger:
        (stored,) = ledger.store.list_assemblies("default")
        kept = [w for w in ledger.get_assembly(stored["id"])["warnings"] if w["code"].endswith("_left_out")]
    assert len(kept) > 1, "the history must leave several pairs split"
    lines = [line for line in short.stdout.splitlines() if "warning:" in line]
    assert sum(ONE_LINE in " ".join(line.split()) for line in lines) == 1
    assert f"{len(kept)} {ONE_LINE}" in " ".join(short.stdout.split())
    each = runner.invoke(app, [*args, "--out", str(tmp_path / "b.json"), "--show", "warnings"])
    assert each.exit_code == 0, each.output
    flat = " ".join(each.stdout.split())
    assert ONE_LINE not in flat and all(w["detail"] in flat for w in kept)
