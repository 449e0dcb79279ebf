"""Helpers shared by the importer tests: selecting records of a parsed batch, writing small inputs."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, TypeVar

from ctxledger.ingest import ImportBatch, ParsedConversation
from ctxledger.records import Record

R = TypeVar("R", bound=Record)


def shared_dir() -> Path:
    """``../shared`` (or ``$CTXLEDGER_SHARED_DIR``), as in the root conftest; used for parametrizing."""
    env = os.environ.get("CTXLEDGER_SHARED_DIR")
    return Path(env) if env else Path(__file__).resolve().parents[2].parent / "shared"


def of_type(conv: ParsedConversation, cls: type[R]) -> list[R]:
    """The records of ``conv`` that are ``cls`` instances, in append order."""
    return [r for r in conv.records if isinstance(r, cls)]


def only(batch: ImportBatch) -> ParsedConversation:
    """The single conversation of a batch (fails if there are several)."""
    assert len(batch.conversations) == 1, [c.conversation_id for c in batch.conversations]
    return batch.conversations[0]


def write_json(path: Path, value: Any) -> Path:
    """Write ``value`` as a JSON document and return ``path``."""
    path.write_text(json.dumps(value), encoding="utf-8")
    return path


def write_lines(path: Path, lines: list[str]) -> Path:
    """Write raw text lines (a JSON Lines file, possibly broken) and return ``path``."""
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def load(path: Path) -> Any:
    """Read a JSON document."""
    return json.loads(path.read_text(encoding="utf-8"))
