"""The note an integration records in place of a content part it cannot record (an image, audio, a file).

Integrations record the text of each turn. A part that is not text (a user's image, an uploaded file, an audio
clip) is never dropped silently: the recorded turn holds a short note in its place, naming what it was (its media
type and size, or its URL, or its file name), so the ledger, ``explain`` and the model itself see that something
was there and was not recorded. The note never holds the part's bytes.
"""

from __future__ import annotations

import base64
import binascii
from typing import Any

DATA_URL = "data:"


def url_note(url: Any, kind: str = "image") -> str:
    """The note for a part given by URL: a ``data:`` URL by its media type and size, any other by the URL."""
    if not isinstance(url, str) or not url:
        return note(kind)
    if url.startswith(DATA_URL):
        head, _, data = url.partition(",")
        media = head.removeprefix(DATA_URL).split(";")[0] or kind
        size = _decoded_size(data) if head.endswith(";base64") else len(data)
        return note(f"{media}, {size:,} bytes")
    return note(f"{kind} {url}")


def note(what: str) -> str:
    """``[<what>: not recorded]``."""
    return f"[{what}: not recorded]"


def _decoded_size(data: str) -> int:
    try:
        return len(base64.b64decode(data, validate=False))
    except (binascii.Error, ValueError):
        return len(data)
