"""Bounds of the HTTP service shared by ``create_app`` and ``ctxledger serve`` (no web framework imported here)."""

from __future__ import annotations

DEFAULT_MAX_BODY_BYTES = 32 * 1024 * 1024
"""32 MiB: about ten times the largest real file the import tests read (3 MB), a bound on what one request holds."""
