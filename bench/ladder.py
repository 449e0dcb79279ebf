"""Measured effect of the representation ladder: ladder on versus off.

A script, not a test. On the real trajectories of ``../shared/data`` (tau-bench airline, mini-swe-agent,
SWE-agent demonstrations, ToolBench), at input budgets of 4k, 8k and 16k tokens, each sampled model call
is assembled twice under the default policy: with the ladder (``selection.ladder = true``: excerpts,
extractions, memories, references, redundancy) and without it (every unit verbatim or not at all). The
request is the model call's own: the snapshot ``seq`` just before the assistant message, gpt-4o
(o200k_base), OpenAI Chat Completions, ``W`` = the budget and ``O`` = ``M`` = 0, so ``B_input`` is the
budget exactly.

Columns, per dataset and budget (means over the sampled calls):

* ``calls``: sampled model calls; ``ok``: assemblies that succeeded (the rest raised
  ``RequiredBlocksDoNotFit``: a required unit, e.g. the newest step, does not fit verbatim);
* ``tokens``: input tokens of the payload (exact count of the serialized request; failures count 0);
* ``req kept``: required units (those the policy's protection stage requires, instructions aside)
  included in any representation, over all required units (a failed assembly keeps none);
* ``units``: units included; ``non-verbatim``: of which in a cheaper representation;
* ``evidence``: for the SWE trajectories only, the *annotated evidence* kept (see below), as kept / total
  items summed over the calls.

**Annotated evidence** (SWE trajectories, defined on the raw history, independently of the ladder):
at a model call, the *latest failed tool result* is the newest tool result before the call that failed:
a ToolArtifact with status ``failed`` (mini-swe-agent: ``returncode`` ≠ 0), or a tool result or
SWE-agent observation message whose text holds a failure line. Its *error lines* are its last
:data:`MAX_ERROR_LINES` distinct lines matching :data:`FAILURE_LINE`: a Python exception line
(``ModuleNotFoundError: No module named 'numpy'``), a pytest ``E   …`` line, a test-runner failure
line (``FAILED tests/x.py::test_y``, ``FAIL: test_y (…)``, ``ERROR: …``) or a ``fatal:`` / ``error:``
line. The *latest failing test* is the last test id named failing (``path::test`` or unittest's
``FAIL: test_x``) in any tool result before the call. An item is kept when its exact text (stripped)
appears in the payload. Calls sampled for the SWE sets are those after at least one failed result.

Examples::

    python bench/ladder.py                             # every dataset, 4 calls per trajectory
    python bench/ladder.py --datasets mini-swe-agent --points 2 --json /tmp/ladder.json
"""

from __future__ import annotations

import argparse
import dataclasses
import glob
import json
import os
import re
import sys
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # run as a script: make ``ctxledger`` importable from src
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from ctxledger.errors import RequiredBlocksDoNotFit
from ctxledger.ledger import Ledger
from ctxledger.policy.base import Policy
from ctxledger.policy.default import default_policy
from ctxledger.records import Message, Record, Role, ToolArtifact, ToolStatus
from ctxledger.testing import MemoryStore
from ctxledger.units import content_text

DATA = Path(os.environ.get("CTXLEDGER_SHARED_DIR") or Path(__file__).resolve().parents[2] / "shared") / "data"
"""The shared datasets (``CTXLEDGER_SHARED_DIR``, as for the tests, else ``../shared`` beside the repo)."""
BUDGETS = (4000, 8000, 16000)
DATASETS = {
    "tau-bench": ("tau-bench/*.json", False),
    "mini-swe-agent": ("mini-swe-agent-deepseek/*.traj.json", True),
    "swe-agent": ("swe-agent-demos/**/*.traj", True),
    "toolbench": ("toolbench-examples/**/*.json", False),
}
"""Dataset name → (glob under the data folder, whether it is a SWE set with annotated evidence)."""

MAX_ERROR_LINES = 5
OFFSETS = (1, 2, 4, 8)
"""SWE calls are sampled 1, 2, 4 and 8 model calls after a failure (while it is still the latest)."""
FAILURE_LINE = re.compile(
    r"^(?:[A-Za-z_][\w.]*(?:Error|Exception)\b.*"  # Python exception line
    r"|E {2,}\S.*"  # pytest assertion detail
    r"|(?:FAILED|ERROR) \S.*|\S+::\S+ (?:FAILED|ERROR)\b.*|(?:FAIL|ERROR): \S.*"  # test runners
    r"|(?:fatal|error)(?:\[\w+\])?: .*)$",  # git, compilers
    re.MULTILINE,
)
"""A failure line (see the module docstring)."""
FAILING_TEST = re.compile(r"(?:^FAILED (\S+::\S+))|(?:^(\S+::\S+) FAILED\b)|(?:^FAIL: (test\w*))", re.MULTILINE)
"""A failing test id: pytest ``FAILED path::test`` / ``path::test FAILED``, unittest ``FAIL: test_x``."""


@dataclass(slots=True)
class Call:
    """One sampled model call: where to assemble and what evidence it should see."""

    conversation_id: str
    as_of_seq: int
    evidence: list[str] = field(default_factory=list)
    offset: int | None = None
    """For SWE calls: how many model calls after the failure whose evidence it should see."""


@dataclass(slots=True)
class Row:
    """Sums over the calls of one (dataset, budget, mode)."""

    calls: int = 0
    ok: int = 0
    tokens: int = 0
    required: int = 0
    required_kept: int = 0
    units: int = 0
    non_verbatim: int = 0
    evidence: int = 0
    evidence_kept: int = 0
    saved: dict[str, int] = field(default_factory=dict)
    seconds: float = 0.0


# -- annotated evidence ---------------------------------------------------------------------------------


def _text(rec: Record, blobs: Any) -> str | None:
    """The text of a tool result or of a SWE-agent observation message (``None`` for other records)."""
    if isinstance(rec, ToolArtifact):
        return blobs.get(rec.sha256).decode("utf-8", errors="replace")
    if isinstance(rec, Message) and rec.role is Role.USER and rec.meta.get("message_type") == "observation":
        return content_text(rec.content)
    return None


def error_lines(text: str) -> list[str]:
    """The last :data:`MAX_ERROR_LINES` distinct failure lines of a text (stripped)."""
    found = list(dict.fromkeys(m.group(0).strip() for m in FAILURE_LINE.finditer(text)))
    return [line for line in found if len(line) >= 8][-MAX_ERROR_LINES:]


def failing_test(text: str) -> str | None:
    """The last failing test id named in a text."""
    hits = [next(g for g in m.groups() if g) for m in FAILING_TEST.finditer(text)]
    return hits[-1] if hits else None


def latest_failure(results: Sequence[tuple[int, str, bool]], seq: int) -> int | None:
    """``seq`` of the latest failed tool result before ``seq`` (status failed, or a failure line)."""
    failed = [s for s, text, f in results if s < seq and (f or error_lines(text))]
    return failed[-1] if failed else None


def evidence_before(results: Sequence[tuple[int, str, bool]], seq: int) -> list[str]:
    """The annotated evidence of a call at ``seq``: latest failed result's error lines + latest failing test."""
    before = [(s, text) for s, text, _ in results if s < seq]
    failure = latest_failure(results, seq)
    items = error_lines(next(t for s, t in before if s == failure)) if failure is not None else []
    tests = [t for t in (failing_test(text) for _, text in before) if t]
    if tests and not any(tests[-1] in line for line in items):
        items.append(tests[-1])
    return items


# -- sampling calls ---------------------------------------------------------------------------------------


def _results(records: Sequence[Record], blobs: Any) -> list[tuple[int, str, bool]]:
    return [
        (r.seq, t, isinstance(r, ToolArtifact) and r.status is ToolStatus.FAILED)
        for r in records
        if (t := _text(r, blobs)) is not None
    ]


def _swe_calls(records: Sequence[Record], blobs: Any, points: int) -> list[Call]:
    """The calls :data:`OFFSETS` model calls after each of the last ``points`` failures (still the latest)."""
    results = _results(records, blobs)
    calls_at = [r.seq for r in records if isinstance(r, Message) and r.role is Role.ASSISTANT]
    failures = sorted({f for seq in calls_at if (f := latest_failure(results, seq)) is not None})
    out: dict[int, Call] = {}
    for failure in failures[-points:]:
        after = [seq for seq in calls_at if seq > failure]
        for offset in OFFSETS:
            if len(after) >= offset and latest_failure(results, after[offset - 1]) == failure:
                seq = after[offset - 1]
                evidence = evidence_before(results, seq)
                out.setdefault(seq, Call(records[0].conversation_id, seq - 1, evidence, offset))
    return [out[k] for k in sorted(out)]


def _spread_calls(records: Sequence[Record], points: int) -> list[Call]:
    """``points`` evenly spaced model calls (assistant messages) of one conversation."""
    calls = [Call(r.conversation_id, r.seq - 1) for r in records if isinstance(r, Message) and r.role is Role.ASSISTANT]
    if len(calls) <= points:
        return calls
    if points == 1:
        return calls[-1:]
    return [calls[round(i * (len(calls) - 1) / (points - 1))] for i in range(points)]


def load(ledger: Ledger, name: str, points: int, limit: int | None) -> list[Call]:
    """Import one dataset into ``ledger`` and sample its model calls."""
    pattern, swe = DATASETS[name]
    calls: list[Call] = []
    for path in sorted(glob.glob(str(DATA / pattern), recursive=True)):
        # one conversation per file, and file names repeat across folders: name each by its path
        cid = None if name == "tau-bench" else str(Path(path).relative_to(DATA))
        result = ledger.import_file(path, conversation_id=cid)
        for cid in result.conversation_ids[:limit]:
            records = ledger.store.records("default", cid)
            calls += _swe_calls(records, ledger.store.blobs, points) if swe else _spread_calls(records, points)
    return calls


# -- measuring --------------------------------------------------------------------------------------------


def payload_text(payload: dict[str, Any]) -> str:
    """Every message's text of an OpenAI Chat Completions payload, joined."""
    parts = []
    for m in payload.get("messages", []):
        content = m.get("content")
        parts.append(content if isinstance(content, str) else content_text(content))
    return "\n".join(parts)


def _required_units(manifest: dict[str, Any]) -> set[str]:
    return {d["ref"] for d in manifest["decisions"] if d["outcome"] == "require" and d["reason"] != "instruction"}


def measure(ledger: Ledger, call: Call, budget: int, policy: Policy, row: Row, required_hint: set[str]) -> set[str]:
    """Assemble one call at one budget under one policy and add its numbers to ``row``."""
    row.calls += 1
    row.evidence += len(call.evidence)
    started = time.perf_counter()
    try:
        asm = ledger.assemble(
            call.conversation_id,
            as_of_seq=call.as_of_seq,
            window_tokens=budget,
            output_tokens=0,
            margin_tokens=0,
            policy=policy,
            persist=False,
        )
    except RequiredBlocksDoNotFit as exc:
        row.seconds += time.perf_counter() - started
        names = {b.ref.split(" ")[0] for b in exc.blocks if b.what not in ("instruction", "reply priming")}
        row.required += len(required_hint or names)
        return required_hint
    row.seconds += time.perf_counter() - started
    manifest = asm.manifest
    required = _required_units(manifest)
    included_units = {e["unit"] for e in manifest["included"]}
    row.ok += 1
    row.tokens += asm.input_tokens
    row.required += len(required)
    row.required_kept += len(required & included_units)
    by_unit = {e["unit"]: e["representation"] for e in manifest["included"]}
    row.units += len(by_unit)
    row.non_verbatim += sum(1 for r in by_unit.values() if r != "verbatim")
    text = payload_text(asm.payload)
    row.evidence_kept += sum(1 for item in call.evidence if item in text)
    for name, tokens in manifest["ledger"]["saved_by_transform"].items():
        key = name.split("@")[0].split(":")[0]
        row.saved[key] = row.saved.get(key, 0) + tokens
    return required


def run(datasets: Iterable[str], budgets: Sequence[int], points: int, limit: int | None) -> list[dict[str, Any]]:
    """Measure every dataset at every budget, ladder on and off.

    Returns:
        One dict per (dataset, budget, mode) with the :class:`Row` sums, plus ``by_offset``: for SWE
        sets, offset → ``[evidence kept, evidence items]``.
    """
    on = default_policy()
    off = dataclasses.replace(on, selection=dataclasses.replace(on.selection, ladder=False))
    out = []
    for name in datasets:
        ledger = Ledger(MemoryStore())
        calls = load(ledger, name, points, limit)
        for budget in budgets:
            rows = {"on": Row(), "off": Row()}
            offsets: dict[str, dict[int, list[int]]] = {"on": {}, "off": {}}
            for call in calls:
                hint: set[str] = set()
                for mode, policy in (("on", on), ("off", off)):
                    before = rows[mode].evidence_kept
                    hint = measure(ledger, call, budget, policy, rows[mode], hint)
                    if call.offset is not None:
                        tally = offsets[mode].setdefault(call.offset, [0, 0])
                        tally[0] += rows[mode].evidence_kept - before
                        tally[1] += len(call.evidence)
            for mode, row in rows.items():
                out.append(
                    {
                        "dataset": name,
                        "budget": budget,
                        "ladder": mode,
                        **dataclasses.asdict(row),
                        "by_offset": dict(sorted(offsets[mode].items())),
                    }
                )
    return out


def _pct(a: int, b: int) -> str:
    return f"{100.0 * a / b:.1f}%" if b else "-"


def render(rows: Sequence[dict[str, Any]]) -> str:
    """The Markdown table: one row per dataset, budget and ladder setting."""
    head = (
        "| dataset | budget | ladder | calls | ok | tokens (mean) | req kept | units (mean) | non-verbatim "
        "| evidence kept | saved by transform (tokens) | s/call |"
    )
    lines = [head, "|" + "---|" * 12]
    for r in rows:
        n = max(1, r["calls"])
        evidence = (
            f"{r['evidence_kept']}/{r['evidence']} ({_pct(r['evidence_kept'], r['evidence'])})"
            if r["evidence"]
            else "-"
        )
        saved = ", ".join(f"{k} {v:,}" for k, v in sorted(r["saved"].items())) or "-"
        lines.append(
            f"| {r['dataset']} | {r['budget']:,} | {r['ladder']} | {r['calls']} | {r['ok']} | {r['tokens'] / n:,.0f} "
            f"| {_pct(r['required_kept'], r['required'])} | {r['units'] / n:.1f} | {r['non_verbatim'] / n:.1f} "
            f"| {evidence} | {saved} | {r['seconds'] / n:.3f} |"
        )
    return "\n".join(lines)


def render_offsets(rows: Sequence[dict[str, Any]]) -> str:
    """Evidence kept by model calls since the failure (SWE sets), ladder on versus off."""
    offsets = sorted({int(o) for r in rows for o in r["by_offset"]})
    head = (
        "| dataset | budget | ladder | " + " | ".join(f"{o} call{'s' if o > 1 else ''} after" for o in offsets) + " |"
    )
    lines = [head, "|" + "---|" * (3 + len(offsets))]
    for r in rows:
        if not r["by_offset"]:
            continue
        cells = []
        for o in offsets:
            kept, total = r["by_offset"].get(o, [0, 0])
            cells.append(f"{kept}/{total} ({_pct(kept, total)})")
        lines.append(f"| {r['dataset']} | {r['budget']:,} | {r['ladder']} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    """Parse arguments, measure, print the table (and write JSON with ``--json``)."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--datasets", nargs="+", default=list(DATASETS), choices=list(DATASETS))
    parser.add_argument("--budgets", nargs="+", type=int, default=list(BUDGETS))
    parser.add_argument(
        "--points", type=int, default=4, help="per trajectory: calls sampled (SWE sets: failures followed)"
    )
    parser.add_argument("--limit", type=int, default=None, help="trajectories per file (tau-bench has 160)")
    parser.add_argument("--json", type=Path, default=None, help="also write the rows here")
    args = parser.parse_args(argv)
    rows = run(args.datasets, args.budgets, args.points, args.limit)
    print(render(rows))
    if any(r["by_offset"] for r in rows):
        print()
        print(render_offsets(rows))
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1), encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
