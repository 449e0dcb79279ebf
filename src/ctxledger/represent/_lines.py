r"""Line and byte coordinates of a raw artifact, and the locators built from them.

Everything the representation layer shows the model about an artifact points back to exact bytes.
Coordinates follow one convention everywhere:

* lines are 1-based and inclusive; a line is the bytes up to and including its ``\\n`` (the last line
  may lack one); a trailing ``\\n`` does not start an extra empty line, and empty data has 0 lines;
* bytes are 0-based, ``[start, end)``, offsets into the artifact exactly as stored.
"""

from __future__ import annotations

import bisect
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from typing import Any

from ctxledger.errors import InputError

_LOCATOR_FIELDS = ("artifact_id", "sha256", "line_start", "line_end", "byte_start", "byte_end", "fetch")


def fetch_command(artifact_id: str, byte_start: int, byte_end: int) -> str:
    """The CLI command that rehydrates bytes ``[byte_start, byte_end)`` of an artifact.

    A locator's ``fetch`` is for operators (manifests, memories), whatever the policy: the model is told how to
    read more by the text it is shown (:mod:`ctxledger.fetch_hints`).
    """
    return f"ctxledger rehydrate {artifact_id} --bytes {byte_start}:{byte_end}"


@dataclass(frozen=True, slots=True)
class Locator:
    """Where a piece of a representation comes from (seed 002 "Provenance").

    Attributes:
        artifact_id: id of the :class:`~ctxledger.records.ToolArtifact`.
        sha256: bare-hex sha256 of the *whole* artifact (the blob name).
        line_start: first line, 1-based, inclusive.
        line_end: last line, 1-based, inclusive.
        byte_start: first byte, 0-based.
        byte_end: end byte, exclusive.
        source_version: version of the source the artifact observed (commit, ETag …), if known.
        fetch: how to get these bytes, e.g. ``ctxledger rehydrate a1 --bytes 0:512``.
    """

    artifact_id: str
    sha256: str
    line_start: int
    line_end: int
    byte_start: int
    byte_end: int
    source_version: str | None
    fetch: str

    def to_dict(self) -> dict[str, Any]:
        """Return the JSON-able form stored in ``ToolMemory.locators`` and manifests."""
        return asdict(self)

    @classmethod
    def from_dict(cls, value: Mapping[str, Any], *, source: str = "<api>") -> Locator:
        """Rebuild a locator from its dict form (extra keys such as ``json_pointer`` are ignored).

        Raises:
            InputError: a required field is missing or has the wrong type.
        """
        for name in _LOCATOR_FIELDS:
            if name not in value:
                raise InputError("locator field missing", source=source, field=name)
        for name in ("line_start", "line_end", "byte_start", "byte_end"):
            if not isinstance(value[name], int) or isinstance(value[name], bool):
                raise InputError("locator offsets must be integers", source=source, field=name)
        return cls(
            artifact_id=str(value["artifact_id"]),
            sha256=str(value["sha256"]),
            line_start=value["line_start"],
            line_end=value["line_end"],
            byte_start=value["byte_start"],
            byte_end=value["byte_end"],
            source_version=value.get("source_version"),
            fetch=str(value["fetch"]),
        )


class LineIndex:
    """Byte offsets of the lines of one artifact's bytes (see the module docstring).

    Args:
        data: the artifact's exact bytes.
    """

    def __init__(self, data: bytes) -> None:
        self.data = data
        starts = [0] if data else []
        pos = data.find(b"\n")
        while pos != -1 and pos + 1 < len(data):
            starts.append(pos + 1)
            pos = data.find(b"\n", pos + 1)
        self.starts: tuple[int, ...] = tuple(starts)

    @property
    def line_count(self) -> int:
        """Number of lines (0 for empty data)."""
        return len(self.starts)

    def line_span(self, first: int, last: int | None = None) -> tuple[int, int]:
        """Byte range ``[start, end)`` of lines ``first..last`` (1-based, inclusive; newline included)."""
        last = first if last is None else last
        end = self.starts[last] if last < len(self.starts) else len(self.data)
        return self.starts[first - 1], end

    def line_of(self, offset: int) -> int:
        """1-based line holding byte ``offset`` (clamped to the last line)."""
        return max(1, bisect.bisect_right(self.starts, offset))

    def line_text(self, line: int) -> str:
        """Text of one line without its line ending (UTF-8, undecodable bytes replaced)."""
        start, end = self.line_span(line)
        return self.data[start:end].decode("utf-8", errors="replace").rstrip("\r\n")

    def locator(
        self, artifact_id: str, sha256: str, byte_start: int, byte_end: int, source_version: str | None
    ) -> Locator:
        """The locator of bytes ``[byte_start, byte_end)``, with the lines they touch."""
        last_byte = max(byte_start, byte_end - 1)
        return Locator(
            artifact_id=artifact_id,
            sha256=sha256,
            line_start=self.line_of(byte_start),
            line_end=self.line_of(last_byte),
            byte_start=byte_start,
            byte_end=byte_end,
            source_version=source_version,
            fetch=fetch_command(artifact_id, byte_start, byte_end),
        )
