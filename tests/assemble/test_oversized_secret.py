"""A required output too large for verbatim that holds a secret enters as an exact excerpt, the secret withheld.

New-user report 4 item 5: a 40,000-line failed log whose error line held a GitHub token made every call fail
with RequiredBlocksDoNotFit, because the ladder would not excerpt a turn marked ``secret_redacted``.
"""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime

from ctxledger import Ledger
from ctxledger.represent import make_excerpt
from ctxledger.represent.excerpt import MAX_PIECE_BYTES
from ctxledger.tokens import get_counter

TOKEN = "ghp_" + "A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8"


def _fragments(text: str, secret: str = TOKEN, n: int = 6) -> list[str]:
    """Every piece of ``secret`` of ``n`` characters that appears in ``text``."""
    return [secret[i : i + n] for i in range(len(secret) - n + 1) if secret[i : i + n] in text]


def _failed_call(output: str):
    ledger = Ledger.open("memory://")
    rec = ledger.recorder("c", clock=datetime(2026, 9, 1, tzinfo=UTC))
    rec.system("sys")
    rec.user("deploy")
    x = rec.tool_call("deploy", {}, output, status="failed")
    rec.user("why?")
    asm = ledger.assemble("c", window_tokens=16000, output_tokens=500)
    (entry,) = [i for i in asm.manifest["included"] if i["ref"] == x.artifact]
    return ledger, asm, entry, output.encode()


def test_a_huge_failed_log_holding_a_key_enters_as_an_excerpt_without_it():
    """The report's shape: the excerpt enters, the error line's key is withheld, locators are raw byte ranges."""
    log = "\n".join(f"info line {i}" for i in range(40000)) + f"\nERROR: auth failed with key {TOKEN}\n"
    ledger, asm, entry, raw = _failed_call(log)
    text = json.dumps(asm.payload)
    assert entry["representation"] == "excerpt" and entry["transform"].endswith("+secret_redacted")
    assert not _fragments(text)
    assert "[withheld by policy: GitHub Token on line 40001]" in text
    assert "info line 39999" in text  # the lines around it are still exact
    last = entry["locators"][-1]
    assert raw[last["byte_start"] : last["byte_end"]].endswith(f"{TOKEN}\n".encode())  # exact raw range
    why = ledger.explain(asm.id, entry["ref"])
    assert why["status"] == "included" and not _fragments(json.dumps(why))


def test_a_few_line_output_cut_by_bytes_never_shows_a_key_cut_at_a_piece_boundary():
    """A 3-line output is cut into byte pieces; the key straddles a cut next to the error words."""
    pad = "x" * (MAX_PIECE_BYTES * 40 - len("ERROR: auth failed key=") - 10)
    middle = f"{pad}ERROR: auth failed key={TOKEN} " + "y" * 60000
    out = "head " + "h" * 30000 + "\n" + middle + "\ntail " + "t" * 30000 + "\n"
    _, asm, entry, _ = _failed_call(out)
    text = json.dumps(asm.payload)
    assert entry["representation"] == "excerpt"
    assert not _fragments(text)
    assert "[withheld by policy: GitHub Token on line 2]" in text
    assert "hhhh" in text and "tttt" in text  # the other lines are shown as exact bytes


def test_make_excerpt_replaces_every_run_touching_a_withheld_line_and_keeps_raw_locators():
    """Unit level: whatever part of a withheld line a run covers, the placeholder is shown once instead."""
    counter = get_counter("o200k_base")
    lines = [f"line {i} " + "z" * 40 for i in range(400)]
    lines[200] = f"ERROR: login failed token={TOKEN} " + "q" * 3000  # longer than a piece: cut inside
    data = ("\n".join(lines) + "\n").encode()
    ex = make_excerpt(
        data, artifact_id="a", sha256="0" * 64, max_tokens=600, counter=counter, withheld={201: "[WITHHELD 201]"}
    )
    assert not _fragments(ex.text) and "qqqq" not in ex.text
    assert ex.text.count("[WITHHELD 201]") == 1 and ex.tokens <= 600
    assert any(loc.byte_start <= data.index(b"ERROR") < loc.byte_end for loc in ex.locators)
    # every other shown run is still exactly its locator's bytes
    shown = re.sub(r"\[WITHHELD 201\]\n", "", ex.text)
    for loc in ex.locators:
        chunk = data[loc.byte_start : loc.byte_end].decode()
        if b"ERROR" not in data[loc.byte_start : loc.byte_end]:
            assert chunk in shown
