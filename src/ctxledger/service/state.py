"""The service's one ledger per process, and the lock that serialises its use across request threads."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import TypeVar

from ctxledger.ledger import Ledger

T = TypeVar("T")


@dataclass
class Service:
    """An open :class:`~ctxledger.Ledger` and its lock (the ledger's snapshot caches are not thread-safe).

    Several processes (or hosts) share one PostgreSQL store; within one process, calls take turns.
    """

    ledger: Ledger
    lock: threading.Lock = field(default_factory=threading.Lock)

    @contextmanager
    def use(self) -> Iterator[Ledger]:
        """The ledger, held for the duration of the ``with`` block."""
        with self.lock:
            yield self.ledger

    def call(self, fn: Callable[[Ledger], T]) -> T:
        """``fn(ledger)`` under the lock."""
        with self.use() as ledger:
            return fn(ledger)
