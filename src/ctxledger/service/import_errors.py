"""Where in an uploaded file an import failed: every ``/v1/imports`` input problem names a ``field``.

Importers name the field of a bad record (``role``, with the record's ``index``), and so does the loader for
malformed JSON (the JSON path where parsing stopped, :mod:`ctxledger.ingest.json_paths`). A problem with no
path inside the file (the content is not JSON at its top, or is empty) names the request field that holds the
file, ``body.content``.
"""

from __future__ import annotations

from ctxledger.errors import InputError

CONTENT_FIELD = "body.content"
"""The request field holding the uploaded file."""


def located(exc: InputError) -> InputError:
    """``exc`` (a problem with the uploaded file) with a ``field``: unchanged when it has one.

    An :class:`InputError` without a field (the content is not JSON at its top, or is empty) gets
    :data:`CONTENT_FIELD`.
    """
    if exc.field is not None or type(exc) is not InputError:
        return exc
    return InputError(exc.problem, source=exc.source, index=exc.index, field=CONTENT_FIELD)
