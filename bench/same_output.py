"""What a run of append-one calls sends and stores, written down so two revisions can be compared (a script).

A change meant only to make assembly cheaper must leave every payload and every stored manifest as they were. This
script copies a store built by the bench (``bench/run.py --work-dir``; the copy is removed after, so the store is
left as it was), assembles its conversation twice, then ``--appends`` times appends one user turn (fixed ids,
times and text) and assembles, and once more without an append after every third. For each assembly it writes two
lines to ``OUT``: the payload's hash with the stored row's ``payload_hash`` and ``snapshot_seq``, then the stored
manifest (the row's ``manifest`` column: the columnar form the store keeps) without ``id``, ``created_at`` and
``timings``, the assembly ids it names replaced by their order (``A0``, ``A1`` …). Run it once per revision on the
same store and compare the files (``cmp``)::

    PYTHONPATH=src python bench/same_output.py sqlite:////tmp/bw/sqlite-synthetic-1000/bench.db \\
        /tmp/bw/sqlite-synthetic-1000/blobs bench-synthetic-1000 /tmp/new.txt
"""

from __future__ import annotations

import argparse
import json
import shutil
import sqlite3
import tempfile
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from ctxledger.hashing import content_hash
from ctxledger.ledger import Ledger
from ctxledger.records import Message, Role, Trust
from ctxledger.store import codec, open_store

TENANT = "default"
NOW = datetime(2030, 1, 1, tzinfo=UTC)
"""The requests' clock and the appended turns' times (fixed, so two runs write the same manifests)."""


def copy_store(db: Path, blobs: Path, into: Path) -> Path:
    """Copy the SQLite file (by SQLite's backup, which reads a consistent state) and the blob folder into ``into``."""
    shutil.copytree(blobs, into / "blobs")
    source = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    target = sqlite3.connect(into / "bench.db")
    try:
        source.backup(target)
    finally:
        target.close()
        source.close()
    return into / "bench.db"


def turn(ledger: Ledger, conversation: str, k: int) -> Message:
    """The ``k``-th appended user turn (the same id, time and text on every run)."""
    return Message(
        id=f"{conversation}/same-output-{k}",
        tenant_id=TENANT,
        conversation_id=conversation,
        branch_id=ledger.store.get(TENANT, conversation).branch_id,
        owner_participant_id=f"{conversation}/participant/user",
        role=Role.USER,
        trust=Trust.USER,
        created_at=NOW - timedelta(minutes=100 - k),
        content=f"Follow-up {k}: re-run the failing tests and summarize the database timeout errors.",
    )


def record(ledger: Ledger, conversation: str, appends: int, request: dict[str, Any]) -> list[str]:
    """The lines of every assembly of the run (two per assembly, see the module docstring)."""
    rows: list[dict[str, Any]] = []
    hashes: list[str] = []
    put = ledger.store.put_assembly

    def keep(manifest: Any) -> None:
        rows.append(codec.assembly_row(manifest))
        put(manifest)

    ledger.store.put_assembly = keep  # type: ignore[method-assign]

    def assemble() -> None:
        hashes.append(content_hash(ledger.assemble(conversation, tenant_id=TENANT, now=NOW, **request).payload))

    assemble()
    assemble()
    for k in range(appends):
        ledger.append([turn(ledger, conversation, k)])
        assemble()
        if k % 3 == 2:
            assemble()
    names = {row["id"]: f"A{n}" for n, row in enumerate(rows)}
    lines = []
    for row, payload in zip(rows, hashes, strict=True):
        stored = json.loads(row["manifest"])
        for key in ("id", "created_at", "timings"):
            stored.pop(key, None)
        text = json.dumps(stored, sort_keys=True)
        for asm_id, name in names.items():
            text = text.replace(asm_id, name)
        head = {"payload": payload, "payload_hash": row["payload_hash"], "snapshot_seq": row["snapshot_seq"]}
        lines += [json.dumps(head, sort_keys=True), text]
    return lines


def main() -> None:
    """Parse the arguments, run the calls on a copy of the store, write the lines."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("url", help="the bench's SQLite store (sqlite:////path/bench.db); it is copied, not changed")
    parser.add_argument("blobs", help="the store's blob folder")
    parser.add_argument("conversation", help="conversation id")
    parser.add_argument("out", type=Path, help="file the lines are written to")
    parser.add_argument("--appends", type=int, default=12, help="append-one rounds (default 12)")
    parser.add_argument("--model", default="gpt-4o")
    parser.add_argument("--window", type=int, default=128_000, help="W in tokens (O = 4,096, M = 512)")
    args = parser.parse_args()
    if not args.url.startswith("sqlite:///"):
        parser.error("the store must be a SQLite file (sqlite:///…): it is copied before anything is appended")
    request = {"model": args.model, "window_tokens": args.window, "output_tokens": 4_096, "margin_tokens": 512}
    with tempfile.TemporaryDirectory(prefix="same-output-") as work:
        db = copy_store(Path(args.url.removeprefix("sqlite:///")), Path(args.blobs), Path(work))
        ledger = Ledger(open_store(f"sqlite:///{db}", blobs_dir=str(Path(work) / "blobs")))
        lines = record(ledger, args.conversation, args.appends, request)
    args.out.write_text("\n".join(lines) + "\n", encoding="utf-8")
    print(f"{len(lines) // 2} assemblies written to {args.out}")


if __name__ == "__main__":
    main()
