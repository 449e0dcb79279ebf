"""One BLAS thread while many small products are computed (the write path's semantic vectors).

A record's vector is pooled with one matrix-vector product per text (:mod:`ctxledger.assemble.semantic`), a
``(pieces, 256)`` float32 matrix. OpenBLAS runs a product of at least 9,216 elements on every core: each call
wakes the other threads, hands each a block of the 256 outputs and waits for the slowest. For products this
small the hand-off costs more than the arithmetic, and on a machine whose cores are busy the wait for a thread
to be scheduled dominates. :func:`one_thread` keeps the BLAS libraries on one thread within its block.

The values do not change: OpenBLAS splits a matrix-vector product by output element, so each element is the
same kernel's sum over the same terms in the same order whatever the number of threads
(``tests/facts/test_blas_threads.py`` checks the vectors bit for bit).

The limit is process-wide (that is how BLAS libraries hold it), and OpenBLAS honours a change of it reliably
only when the thread that made it also undoes it. So a block sets the limit and restores what was set before in
the thread that runs it, and blocks in different threads take turns (a lock) instead of overlapping; a block
nested in another changes nothing. Other threads' BLAS calls meanwhile run on one thread too. Without
``threadpoolctl`` (the ``semantic`` extra installs it) a block changes nothing.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from functools import cache
from typing import Any

import numpy  # noqa: F401  # loads the BLAS library whose threads are limited

_lock = threading.RLock()
_nested = threading.local()


@cache
def _controller() -> Any:
    """The BLAS libraries loaded when first asked (numpy's among them), or ``None`` without ``threadpoolctl``."""
    try:
        from threadpoolctl import ThreadpoolController
    except ImportError:
        return None
    return ThreadpoolController().select(user_api="blas")


@contextmanager
def one_thread() -> Iterator[None]:
    """Run the block with the loaded BLAS libraries on one thread; restore their settings after (module docstring)."""
    controller = _controller()
    if controller is None:
        yield
        return
    with _lock:
        depth = getattr(_nested, "depth", 0)
        limiter = controller.limit(limits=1) if depth == 0 else None
        _nested.depth = depth + 1
        try:
            yield
        finally:
            _nested.depth = depth
            if limiter is not None:
                limiter.restore_original_limits()
