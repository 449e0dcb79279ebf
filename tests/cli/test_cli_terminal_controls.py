"""Record content never reaches the operator's terminal as control sequences (escape codes, bidi overrides)."""

from __future__ import annotations

import json
import re
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from ctxledger.cli import app
from ctxledger.cli._escape import visible

CONTROLS = [chr(c) for c in (*range(0x00, 0x09), *range(0x0B, 0x20), *range(0x7F, 0xA0))] + [
    "\u200e", "\u200f", "\u202a", "\u202b", "\u202c", "\u202d", "\u202e", "\u2066", "\u2067", "\u2068", "\u2069"
]  # fmt: skip
RAW = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u200e\u200f\u202a-\u202e\u2066-\u2069]")


@settings(max_examples=60, deadline=None)
@given(text=st.lists(st.one_of(st.sampled_from(CONTROLS), st.text(max_size=5)), max_size=12).map("".join))
def test_visible_leaves_no_control_and_keeps_the_rest(text: str) -> None:
    """Every control character becomes its printable escape; tab, newline and other text are unchanged."""
    shown = visible(text)
    assert not RAW.search(shown)
    assert shown == RAW.sub(lambda m: m.group().encode("unicode_escape").decode("ascii"), text)
    if not RAW.search(text):
        assert shown == text


@settings(max_examples=5, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(control=st.sampled_from(["\x1b[2J", "\x1b]0;PWNED\x07", "\x1b[1A\x1b[2K", "\u202e", "\x9b31m"]))
def test_assemble_and_explain_show_escape_sequences_as_text(tmp_path: Path, control: str) -> None:
    """A turn holding a terminal escape is previewed as its visible escape in every table the operator reads."""
    runner = CliRunner()
    db = f"sqlite:///{tmp_path}/s{abs(hash(control))}.db"
    src = tmp_path / "esc.json"
    turns = [
        {"role": "system", "content": "sys"},
        {"role": "user", "content": f"before{control}after [bold]x[/]"},
        {"role": "assistant", "content": "ok"},
        {"role": "user", "content": f"next{control}question"},
    ]
    src.write_text(json.dumps({"messages": turns}), encoding="utf-8")
    assert runner.invoke(app, ["--db", db, "import", str(src), "--conversation-id", "esc"]).exit_code == 0
    made = runner.invoke(app, ["--db", db, "assemble", "esc", "--show", "all", "--out", str(tmp_path / "p.json")])
    assert made.exit_code == 0, made.output
    asm = re.search(r"asm_[0-9a-f]+", made.output).group()
    outputs = [made.output]
    for ref in ([], ["1"], ["3"]):
        result = runner.invoke(app, ["--db", db, "explain", asm, *ref])
        assert result.exit_code == 0, result.output
        outputs.append(result.output)
    for out in outputs:
        assert not RAW.search(out), repr(out)
    assert visible(control) in made.output
