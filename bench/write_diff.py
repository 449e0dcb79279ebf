"""Whether an import stores the same things as another revision: every table's rows, the facts byte for byte.

Imports each workload into a fresh SQLite store twice, once with this checkout's ``src`` and once with the
``src`` of ``--rev`` (``git archive``), each in its own process, then compares, table by table, every stored
row (records, write-path facts with their stamp and JSON body, links, protected state, token counts, conversation
heads) and the bytes of every blob the records reference, and the payload hash and included records of one
assembly of each conversation. ``--ignore-stamp`` compares the facts without their detector stamp (a revision
that changed detector code stamps the same facts differently). Run from the repository root::

    python bench/write_diff.py --rev main --sizes 10000 --real
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

TABLES = ("records", "record_facts", "record_links", "protected_state", "token_counts", "conversation_heads")
"""Tables compared row by row (a table a revision does not have is skipped)."""


def _dump(workload_path: str, fmt: str, out: str) -> None:
    """Import one file into a fresh store (with whatever ``ctxledger`` is importable) and write its rows."""
    import sqlite3

    from ctxledger.ledger import Ledger
    from ctxledger.store import open_store

    with tempfile.TemporaryDirectory() as tmp:
        url = f"sqlite:///{tmp}/d.db"
        ledger = Ledger(open_store(url, blobs_dir=f"{tmp}/blobs"))
        result = ledger.import_file(workload_path, fmt, conversation_id="diff", count_tokens_for="gpt-4o")
        dump: dict[str, object] = {}
        conn = sqlite3.connect(f"{tmp}/d.db")
        names = {row[0] for row in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        for table in TABLES:
            if table not in names:
                continue
            cols = [row[1] for row in conn.execute(f"PRAGMA table_info({table})")]
            rows = conn.execute(f"SELECT * FROM {table}").fetchall()
            dump[table] = {"cols": cols, "rows": sorted([list(map(_cell, row)) for row in rows], key=json.dumps)}
        conn.close()
        shas = sorted({getattr(r, "sha256", "") for r in result.records} - {""})
        dump["blobs"] = {sha: hashlib.sha256(ledger.store.blobs.get(sha)).hexdigest() for sha in shas}
        assemblies = {}
        for cid in result.conversation_ids:
            asm = ledger.assemble(cid, model="gpt-4o", window_tokens=128_000, output_tokens=4_096, persist=False)
            included = asm.manifest.get("included") or []
            assemblies[cid] = {"payload": asm.payload_hash, "included": [item.get("ref") for item in included]}
        dump["assemblies"] = assemblies
        ledger.close()
    Path(out).write_text(json.dumps(dump), encoding="utf-8")


def _cell(value: object) -> object:
    return value.hex() if isinstance(value, bytes | bytearray | memoryview) else value


def _run(src: Path, workload: Path, fmt: str, out: Path) -> dict:
    env = {**os.environ, "PYTHONPATH": str(src)}
    cmd = [sys.executable, __file__, "--dump", str(workload), fmt, str(out)]
    subprocess.run(cmd, env=env, check=True)
    return json.loads(out.read_text(encoding="utf-8"))


def _compare(name: str, ours: dict, theirs: dict, ignore_stamp: bool) -> bool:
    same = True
    for key in sorted(ours.keys() | theirs.keys()):
        a, b = ours.get(key), theirs.get(key)
        if key == "record_facts" and ignore_stamp and a and b:
            drop_a, drop_b = a["cols"].index("stamp"), b["cols"].index("stamp")
            a = [[c for i, c in enumerate(r) if i != drop_a] for r in a["rows"]]
            b = [[c for i, c in enumerate(r) if i != drop_b] for r in b["rows"]]
        if a == b:
            count = len(a["rows"]) if isinstance(a, dict) and "rows" in a else len(a or ())
            print(f"  {name} {key}: same ({count})")
        else:
            same = False
            print(f"  {name} {key}: DIFFERENT")
    return same


def main() -> None:
    """Compare each workload's stored rows under this checkout and under ``--rev``."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rev", default="main")
    parser.add_argument("--sizes", type=int, nargs="*", default=[2_000])
    parser.add_argument("--real", action="store_true", help="also the chained tau-bench and mini-swe-agent sessions")
    parser.add_argument("--ignore-stamp", action="store_true")
    parser.add_argument("--cache-dir", type=Path, default=Path(tempfile.gettempdir()) / "ctxledger-bench-cache")
    parser.add_argument("--dump", nargs=3, metavar=("FILE", "FORMAT", "OUT"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.dump:
        _dump(*args.dump)
        return
    from bench.workloads import mini_swe_agent, synthetic, tau_bench

    workloads = [synthetic(n, args.cache_dir) for n in args.sizes]
    if args.real:
        workloads += [tau_bench(args.cache_dir), mini_swe_agent(args.cache_dir)]
    same = True
    with tempfile.TemporaryDirectory() as tmp:
        other = Path(tmp) / "rev"
        other.mkdir()
        archive = subprocess.run(["git", "-C", str(ROOT), "archive", args.rev, "src"], check=True, capture_output=True)
        subprocess.run(["tar", "-x", "-C", str(other)], input=archive.stdout, check=True)
        for wl in workloads:
            ours = _run(ROOT / "src", wl.path, "openai-chat", Path(tmp) / "ours.json")
            theirs = _run(other / "src", wl.path, "openai-chat", Path(tmp) / "theirs.json")
            same = _compare(wl.name, ours, theirs, args.ignore_stamp) and same
    print("same" if same else "DIFFERENT")
    sys.exit(0 if same else 1)


if __name__ == "__main__":
    main()
