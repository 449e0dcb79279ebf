"""Snapshot of what the assembler sends: included records and payload hashes on every fixed input.

Run it before and after a change to the assembly pipeline and diff the two JSON files; "results unchanged"
means the same included records and the same payload hash for every entry. It covers:

* every scenario of the scenario suite (``ctxledger.scenarios.catalog.SCENARIOS``);
* every shared failure case (every ``../shared/cases/*.json``, read as ``ctxledger eval cases`` reads them);
* the real datasets through the evaluation harness's ctxledger selector (LoCoMo, tau-bench,
  mini-swe-agent, SWE-agent, ToolBench, BFCL memory at fixed budgets), with each row's payload hash and
  kept item count, plus LoCoMo recall and the trajectories' token reduction per budget.

Included records are named by external id where a record has one (ids assigned at import are stable
too, but external ids read better in a diff). Usage::

    python bench/results_snapshot.py --out bench/results/before.json
    python bench/results_snapshot.py --out bench/results/after.json --compare bench/results/before.json
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import os

SHARED = Path(os.environ.get("CTXLEDGER_SHARED_DIR") or Path(__file__).resolve().parents[2] / "shared")
"""The shared cases and datasets (``CTXLEDGER_SHARED_DIR``, as for the tests and the other benches, else ``../shared``
beside the repository)."""

DATASET_BUDGETS: Mapping[str, tuple[int, ...]] = {
    "locomo": (2_000, 8_000),
    "tau-bench": (4_000, 8_000),
    "mini-swe-agent": (4_000, 16_000),
    "swe-agent": (4_000, 16_000),
    "toolbench": (2_000, 8_000),
    "bfcl-memory": (2_000, 8_000),
}
"""Fixed budgets (tokens of ``B_input``) per real dataset."""


def scenarios() -> dict[str, Any]:
    """Per scenario: included records (external id or id), payload hash, tokens, budget used."""
    from ctxledger.scenarios.catalog import SCENARIOS
    from ctxledger.scenarios.runner import run_scenario

    out: dict[str, Any] = {}
    for scenario in SCENARIOS:
        result, asm, builder = run_scenario(scenario)
        if asm is None:
            out[scenario.name] = {"error": result.failures}
            continue
        ext = {r.id: r.external_id for r in builder.records.values()}
        out[scenario.name] = _summary(asm, ext) | {"passed": result.passed}
    return out


def cases() -> dict[str, Any]:
    """Per shared failure case: included records, payload hash, or the error it raised."""
    from ctxledger.eval.cases import check_case, load_cases, run_case
    from ctxledger.ledger import Ledger
    from ctxledger.testing import MemoryStore

    out: dict[str, Any] = {}
    for case in load_cases(SHARED / "cases"):
        run = run_case(case, Ledger(MemoryStore()))  # as run_case_file: the case's memories and scope are its own
        passed = not check_case(run)
        if run.assembly is None:
            out[case["id"]] = {"error": type(run.error).__name__, "passed": passed}
        else:
            out[case["id"]] = _summary(run.assembly, run.ext_by_record) | {"passed": passed}
    return out


def datasets(names: tuple[str, ...]) -> dict[str, Any]:
    """Per dataset and budget: every row's (case, payload hash, kept items), recall and reduction."""
    from ctxledger.eval import ours
    from ctxledger.eval.harness import run_named

    ours.register()
    out: dict[str, Any] = {}
    for name in names:
        budgets = DATASET_BUDGETS[name]
        res = run_named(
            [name],
            ["ctxledger-default"],
            list(budgets),
            None,
            data_dir=SHARED / "data",
            determinism_every=0,
            plots=False,
        )
        for budget in budgets:
            rows = [r for r in res.rows if r.budget == budget and r.selector == "ctxledger-default"]
            recalls = [r.recall for r in rows if r.recall is not None]
            replay = sum(r.replay_tokens for r in rows)
            sent = sum(r.payload_tokens for r in rows)
            out[f"{name}@{budget}"] = {
                "rows": {f"{r.case_id}": [r.payload_hash, r.included, r.payload_tokens] for r in rows},
                "recall": round(statistics.fmean(recalls), 4) if recalls else None,
                "reduction": round(1 - sent / replay, 4) if replay else None,
            }
    return out


def _summary(asm: Any, ext: Mapping[str, str | None]) -> dict[str, Any]:
    manifest = asm.manifest
    included = [ext.get(e["ref"]) or e["ref"] for e in manifest["included"]]
    ledger = manifest["ledger"]
    return {
        "payload_hash": asm.payload_hash,
        "input_tokens": asm.input_tokens,
        "included": included,
        "dynamic": ledger["dynamic_tokens"],
        "used": ledger["used_tokens"],
        "omitted_for_budget": manifest["omitted_by_reason"].get("budget", 0),
    }


def compare(before: Mapping[str, Any], after: Mapping[str, Any]) -> list[str]:
    """Sentences naming every entry whose included records or payload hash differ."""
    lines = []
    for section in ("scenarios", "cases"):
        for name, old in before.get(section, {}).items():
            new = after.get(section, {}).get(name)
            if new is None:
                lines.append(f"{section}/{name}: missing after")
            elif old.get("payload_hash") != new.get("payload_hash") or old.get("included") != new.get("included"):
                gained = sorted(set(new.get("included", [])) - set(old.get("included", [])))
                lost = sorted(set(old.get("included", [])) - set(new.get("included", [])))
                lines.append(
                    f"{section}/{name}: payload changed (+{gained} -{lost}; used {old.get('used')} -> "
                    f"{new.get('used')} of {new.get('dynamic')})"
                )
    for key, old in before.get("datasets", {}).items():
        new = after.get("datasets", {}).get(key)
        if new is None:
            lines.append(f"datasets/{key}: missing after")
            continue
        changed = [c for c, row in old["rows"].items() if new["rows"].get(c) != row]
        if changed:
            lines.append(
                f"datasets/{key}: {len(changed)} of {len(old['rows'])} rows changed; recall "
                f"{old['recall']} -> {new['recall']}, reduction {old['reduction']} -> {new['reduction']}"
            )
    return lines


def main(argv: list[str] | None = None) -> int:
    """Write the snapshot (and, with ``--compare``, print what changed against an earlier one)."""
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--out", type=Path, required=True)
    p.add_argument("--compare", type=Path, help="an earlier snapshot to diff against")
    p.add_argument("--datasets", nargs="*", default=list(DATASET_BUDGETS), help="real datasets to run")
    args = p.parse_args(argv)
    started = time.process_time()
    snap = {"scenarios": scenarios(), "cases": cases(), "datasets": datasets(tuple(args.datasets))}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(snap, indent=1, sort_keys=True))
    print(f"wrote {args.out} ({time.process_time() - started:.1f} s CPU)", file=sys.stderr)
    if args.compare:
        lines = compare(json.loads(args.compare.read_text()), snap)
        print("\n".join(lines) if lines else "unchanged: same included records and payload hashes everywhere")
        return 1 if lines else 0
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
