"""A rich progress bar to pass as ``on_progress`` while parsing large inputs."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from ctxledger.ingest._builder import ProgressCallback


@contextmanager
def rich_progress(
    description: str = "Importing", *, console: Console | None = None, transient: bool = True
) -> Iterator[ProgressCallback]:
    """Show a progress bar for the duration of the block and yield its ``on_progress(done, total)``.

    Example::

        with rich_progress("tau-bench") as on_progress:
            batch = parse_file(path, on_progress=on_progress)

    ``total`` may change between calls (it is the parser's count of records or trajectories).
    """
    columns = (TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn())
    with Progress(*columns, console=console, transient=transient) as progress:
        task = progress.add_task(description, total=None)

        def update(done: int, total: int) -> None:
            progress.update(task, completed=done, total=total)

        yield update
