"""Worker processes that run the write-path fact detectors of a large batch on the other cores.

:func:`ctxledger.facts.compute_facts` cuts a batch into chunks; for a large one, :func:`run` has this process
and ``workers`` worker processes take the chunks in turn and puts each chunk's result at its index, so the
result is the one this process alone would compute, in the same order.

A worker is a fresh interpreter started with this process's ``sys.path``, never a fork of this process (which
may hold threads and locks), and it does not run the calling program's main module. It imports
:mod:`ctxledger.facts` and the detector modules only: the packages above them are registered without running
their ``__init__`` (which imports the whole library), so a worker starts in about a second. It reads chunks of
texts from its standard input and writes the detections to its standard output (length-prefixed pickles; both
ends are this library's own code). A detector error in a worker is raised here; a worker that dies or cannot
start leaves its chunks to this process. Every worker is stopped before :func:`run` returns.
"""

from __future__ import annotations

import contextlib
import os
import pickle
import struct
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, BinaryIO

WORKERS_ENV = "CTXLEDGER_FACT_WORKERS"
"""Environment variable: how many processes, this one included, compute a large batch's facts (default: this
one plus one per idle core, :func:`usable_workers`; ``1``: this process alone)."""

_HEADER = struct.Struct("!Q")
_STOP = -1
_CPU = [0.0]

_BOOT = """
import os, sys, types
sys.path[:] = {paths!r}
for name in ("ctxledger", "ctxledger.policy", "ctxledger.assemble"):
    module = types.ModuleType(name)
    module.__path__ = [os.path.join({root!r}, *name.split(".")[1:])]
    sys.modules[name] = module
from ctxledger import facts
facts.serve_worker()
"""
"""What a worker runs: the package skeleton without its ``__init__`` modules, then the facts' worker loop."""


def usable_workers() -> int:
    """How many processes compute a large batch: :data:`WORKERS_ENV`, else this one plus one per idle core.

    Idle cores are measured over :data:`IDLE_SAMPLE_SECONDS` (``/proc/stat``; elsewhere the one-minute load
    average stands in): on cores other programs keep busy a worker only competes with them, and its start-up
    and its own caches make the batch cost more CPU than one process spends on it.
    """
    configured = os.environ.get(WORKERS_ENV, "").strip()
    if configured.isdigit():
        return max(int(configured), 1)
    try:
        cores = len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        cores = os.cpu_count() or 1
    if cores < 2:
        return 1
    idle = idle_cores(cores)
    # this process keeps one of the idle cores busy; a worker takes another that is at least half idle
    return 1 + max(0, min(cores - 1, int(idle - 1 + 0.5)))


IDLE_SAMPLE_SECONDS = 0.1
"""How long :func:`idle_cores` watches the processors."""


def idle_cores(cores: int) -> float:
    """How many of ``cores`` were idle just now (``/proc/stat`` over :data:`IDLE_SAMPLE_SECONDS`, else the load)."""

    def sample() -> tuple[int, int]:
        with open("/proc/stat", encoding="ascii") as stat:
            fields = [int(v) for v in stat.readline().split()[1:]]
        return fields[3] + (fields[4] if len(fields) > 4 else 0), sum(fields[:8])

    try:
        idle0, total0 = sample()
        time.sleep(IDLE_SAMPLE_SECONDS)
        idle1, total1 = sample()
        if total1 > total0:
            return cores * (idle1 - idle0) / (total1 - total0)
    except (OSError, ValueError, IndexError):
        pass
    try:
        return max(cores - os.getloadavg()[0], 0.0)
    except OSError:  # no load average either
        return 0.0


def worker_cpu_seconds() -> float:
    """CPU seconds the worker processes of this process have used so far, start-up included (for benchmarks)."""
    return _CPU[0]


def _send(stream: BinaryIO, value: Any) -> None:
    data = pickle.dumps(value, protocol=pickle.HIGHEST_PROTOCOL)
    stream.write(_HEADER.pack(len(data)))
    stream.write(data)
    stream.flush()


def _receive(stream: BinaryIO) -> Any:
    head = stream.read(_HEADER.size)
    if len(head) < _HEADER.size:
        raise EOFError("the other end closed")
    (size,) = _HEADER.unpack(head)
    data = stream.read(size)
    if len(data) < size:
        raise EOFError("the other end closed mid-message")
    return pickle.loads(data)  # both ends are this module


def serve(detect: Callable[[Any], Any]) -> None:
    """A worker's loop: ``(index, texts)`` in, ``(index, detections, error)`` out; at the end its CPU seconds."""
    source = sys.stdin.buffer
    sys.stdout.flush()
    sink = os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)  # nothing else (a library printing) may write into the result stream
    while True:
        try:
            index, texts = _receive(source)
        except EOFError:
            break
        if index == _STOP:
            break
        try:
            _send(sink, (index, detect(texts), None))
        except Exception as exc:  # handed to the caller, which raises it
            _send(sink, (index, None, _portable(exc)))
    _send(sink, (_STOP, time.process_time(), None))


def _portable(exc: Exception) -> Exception:
    try:
        pickle.dumps(exc)
    except Exception:  # one that does not pickle goes as text
        return RuntimeError(f"{type(exc).__name__}: {exc}")
    return exc


class _Worker:
    def __init__(self) -> None:
        root = str(Path(__file__).resolve().parent)
        boot = _BOOT.format(paths=[p for p in sys.path if p], root=root)
        self.proc = subprocess.Popen([sys.executable, "-c", boot], stdin=subprocess.PIPE, stdout=subprocess.PIPE)

    def detect(self, index: int, texts: Any) -> Any:
        assert self.proc.stdin is not None and self.proc.stdout is not None
        _send(self.proc.stdin, (index, texts))
        got, found, error = _receive(self.proc.stdout)
        if got != index:
            raise EOFError(f"a fact worker answered chunk {got} for chunk {index}")
        if error is not None:
            raise _DetectorError(error)
        return found

    def stop(self) -> None:
        try:
            assert self.proc.stdin is not None and self.proc.stdout is not None
            _send(self.proc.stdin, (_STOP, None))
            got, spent, _ = _receive(self.proc.stdout)
            if got == _STOP:
                _CPU[0] += float(spent)
        except (OSError, EOFError, ValueError, pickle.UnpicklingError):
            pass
        finally:
            for stream in (self.proc.stdin, self.proc.stdout):
                if stream is not None:
                    with contextlib.suppress(OSError):  # unsent bytes of a worker that died
                        stream.close()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


class _DetectorError(Exception):
    """A detector raised in a worker (the original exception is ``args[0]``)."""


def run(count: int, texts: Callable[[int], Any], detect: Callable[[Any], Any], workers: int) -> list[Any]:
    """``[detect(texts(i)) for i in range(count)]``, the chunks shared between this process and ``workers`` others.

    ``texts`` is called in this process only (it may read the store's blobs); ``detect`` runs here or in a worker.

    Raises:
        Exception: whatever ``detect`` raised for a chunk (the first one, by chunk order of discovery).
    """
    results: list[Any] = [None] * count
    done = [False] * count
    lock = threading.Lock()
    pending = iter(range(count))
    errors: list[BaseException] = []

    def take() -> int | None:
        with lock:
            if errors:
                return None
            return next(pending, None)

    def feed(worker: _Worker) -> None:
        try:
            while (index := take()) is not None:
                chunk = texts(index)
                try:
                    results[index] = worker.detect(index, chunk)
                except _DetectorError as exc:
                    with lock:
                        errors.append(exc.args[0])
                    return
                except (OSError, EOFError, ValueError, pickle.UnpicklingError):
                    return  # the worker died: its chunk is left to the calling process
                done[index] = True
        except BaseException as exc:  # reading the texts failed: raised by the caller
            with lock:
                errors.append(exc)
        finally:
            worker.stop()

    threads: list[threading.Thread] = []
    for _ in range(workers):
        try:
            worker = _Worker()
        except OSError:
            break
        thread = threading.Thread(target=feed, args=(worker,), name="ctxledger-fact-worker", daemon=True)
        thread.start()
        threads.append(thread)
    try:
        while (index := take()) is not None:
            results[index] = detect(texts(index))
            done[index] = True
    except BaseException:
        with lock:
            errors.append(_Stopped())
        raise
    finally:
        for thread in threads:
            thread.join()
    if errors:
        raise errors[0]
    for index in range(count):  # chunks of a worker that died
        if not done[index]:
            results[index] = detect(texts(index))
    return results


class _Stopped(Exception):
    """The calling process stopped (its own detector raised): workers take no further chunk."""
