"""How a text shown instead of a record tells its reader to get more of it.

An excerpt, an extraction, a reference and an image left out of a tool result each end with a hint that names the
record and how to read it back. Two readers are meant:

* **the model**, when the policy exposes the ``recall`` tool (``[rehydration] recall_tool = true``): the hint is a
  call that tool accepts, written as the tool's name and its JSON arguments (``recall {"ref": "c/12"}``); a
  range adds ``"start"`` and ``"end"`` (bytes 0-based, end exclusive), or lines as the excerpt numbers them
  (1-based, inclusive) with ``"unit": "lines"``;
* **an operator** otherwise: the hint is the CLI command (``ctxledger rehydrate c/12``), which the model
  cannot run, for whoever reads the payload; the API's ``GET /v1/rehydrate/{ref}`` reads the same bytes.

Locators (in manifests and memories) always carry the CLI command: they are read by operators, and a memory's
locators are written once, before any policy is known. Every hint is part of the text it ends and is counted
with it in tokens.
"""

from __future__ import annotations

import json

RECALL_TOOL = "recall"
"""The name of the tool the model reads records back with (:mod:`ctxledger.assemble.recall`)."""


def recall_call(ref: str, start: int | None = None, end: int | None = None, *, unit: str = "bytes") -> str:
    """A ``recall`` call as the model is shown it: ``recall {"ref": …, "start": …, "end": …, "unit": …}``.

    ``start`` and ``end`` appear only when given; ``unit`` only when it is ``"lines"``.
    """
    arguments: dict[str, object] = {"ref": ref}
    if start is not None:
        arguments["start"] = start
    if end is not None:
        arguments["end"] = end
    if unit == "lines":
        arguments["unit"] = "lines"
    return f"{RECALL_TOOL} {json.dumps(arguments, ensure_ascii=False)}"


def rehydrate_command(ref: str) -> str:
    """The CLI command that prints a record's raw bytes: ``ctxledger rehydrate REF``."""
    return f"ctxledger rehydrate {ref}"


def whole(ref: str, *, recall: bool) -> str:
    """How to read all of record ``ref``: a ``recall`` call when ``recall``, else the CLI command."""
    return recall_call(ref) if recall else rehydrate_command(ref)


def more(ref: str, *, recall: bool) -> str:
    """An excerpt's last line: how to read all of ``ref``, and how to read a range of it."""
    if recall:
        return (
            f'[more: {recall_call(ref)}; a range: add "start" and "end" in bytes, '
            f'or lines as numbered here with "unit": "lines"]'
        )
    return f"[full output: {rehydrate_command(ref)}; a range: add --bytes START:END]"
