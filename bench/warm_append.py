"""Warm and append-one assembly CPU time on an existing store, in one process (a script, not a test).

Opens the store, assembles the conversation once (the snapshot is built and cached), then times ``--warm``
assemblies of the unchanged conversation and ``--appends`` rounds of "append one user turn, then assemble"
(only the assembly is timed). Prints the median CPU milliseconds of each, and the mean time the cyclic garbage
collector ran per call (``gc.callbacks``). Each run appends ``--appends`` user turns to the conversation, so
alternate the revisions you compare on the same store::

    python bench/run.py --sizes 10000 --backends sqlite --no-real --no-quality --no-trim --work-dir /tmp/bw
    python bench/warm_append.py sqlite:////tmp/bw/sqlite-synthetic-10000/bench.db \\
        /tmp/bw/sqlite-synthetic-10000/blobs bench-synthetic-10000
"""

from __future__ import annotations

import argparse
import gc
import os
import statistics
import time
from typing import Any

from ctxledger.ledger import Ledger
from ctxledger.records import Message, Role, Trust
from ctxledger.store import open_store

TENANT = "default"


class _CollectorClock:
    """CPU seconds the garbage collector ran, summed over every collection while installed."""

    def __init__(self) -> None:
        self.seconds = 0.0
        self._started = 0.0

    def __call__(self, phase: str, info: dict[str, Any]) -> None:
        if phase == "start":
            self._started = time.process_time()
        else:
            self.seconds += time.process_time() - self._started


def _timed(run: Any) -> float:
    started = time.process_time()
    run()
    return (time.process_time() - started) * 1000


def _unseen_word(pid: int, k: int, j: int) -> str:
    """A word of letters only that no trace holds (digits would be split off by the tokenizer)."""
    letters = "bcdfghjklmnpqrstvwxz"
    number, word = pid * 1_000_000 + k * 100 + j, ""
    while number:
        number, digit = divmod(number, len(letters))
        word += letters[digit]
    return "qx" + word


def main() -> None:
    """Parse the arguments, run the calls, print the medians."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("url", help="store URL (sqlite:///… or postgresql+psycopg://…)")
    parser.add_argument("blobs", help="the store's blob folder")
    parser.add_argument("conversation", help="conversation id")
    parser.add_argument("--warm", type=int, default=20, help="warm calls to time (default 20)")
    parser.add_argument("--appends", type=int, default=15, help="append-one rounds to time (default 15)")
    parser.add_argument("--model", default="gpt-4o")
    parser.add_argument("--window", type=int, default=128_000, help="W in tokens (O = 4,096, M = 512)")
    parser.add_argument(
        "--new-words",
        type=int,
        default=0,
        help="words no earlier turn holds, added to each appended turn (their postings are built on that call)",
    )
    parser.add_argument("--freeze", action="store_true", help="gc.freeze() after the first assembly")
    args = parser.parse_args()
    request = {"model": args.model, "window_tokens": args.window, "output_tokens": 4_096, "margin_tokens": 512}
    ledger = Ledger(open_store(args.url, blobs_dir=args.blobs))

    def assemble() -> None:
        ledger.assemble(args.conversation, tenant_id=TENANT, **request)

    assemble()
    if args.freeze:
        gc.freeze()
    clock = _CollectorClock()
    gc.callbacks.append(clock)
    warm = [_timed(assemble) for _ in range(args.warm)]
    warm_gc = clock.seconds
    branch = ledger.store.get(TENANT, args.conversation).branch_id
    appended = []
    for k in range(args.appends):
        ledger.append(
            [
                Message(
                    id=f"{args.conversation}/warm-append-{os.getpid()}-{k}",
                    tenant_id=TENANT,
                    conversation_id=args.conversation,
                    branch_id=branch,
                    owner_participant_id=f"{args.conversation}/participant/user",
                    role=Role.USER,
                    trust=Trust.USER,
                    content=f"Follow-up {k}: re-run the failing tests and summarize the database timeout errors."
                    + "".join(f" {_unseen_word(os.getpid(), k, j)}" for j in range(args.new_words)),
                )
            ]
        )
        appended.append(_timed(assemble))
    gc.callbacks.remove(clock)
    print(
        f"warm median {statistics.median(warm):.1f} ms (collector {1000 * warm_gc / max(len(warm), 1):.1f} ms/call); "
        f"append-one median {statistics.median(appended):.1f} ms"
    )


if __name__ == "__main__":
    main()
