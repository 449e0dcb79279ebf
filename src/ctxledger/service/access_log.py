"""A logging filter that keeps secrets out of the server's logs (request paths, query strings, error lines).

uvicorn's access log prints each request's path and query, which may carry an id or a query text holding a
secret (``GET /v1/records/ghp_…``). The filter rewrites a record's message and arguments with
:func:`~ctxledger.policy.message_redaction.redact_message` before any handler formats it.
"""

from __future__ import annotations

import logging

from ctxledger.policy.message_redaction import redact_message

LOGGERS = ("uvicorn.access", "uvicorn.error")
"""The server's loggers the filter is installed on."""


class WithholdSecrets(logging.Filter):
    """Rewrites each record's ``msg`` and string ``args`` so that no secret the scanner finds is logged."""

    def filter(self, record: logging.LogRecord) -> bool:
        """Redact the record in place; never drops it."""
        if isinstance(record.msg, str):
            record.msg = redact_message(record.msg)
        if isinstance(record.args, tuple):
            record.args = tuple(redact_message(a) if isinstance(a, str) else a for a in record.args)
        return True


def install() -> None:
    """Add :class:`WithholdSecrets` to the server's loggers (once each)."""
    for name in LOGGERS:
        logger = logging.getLogger(name)
        if not any(isinstance(f, WithholdSecrets) for f in logger.filters):
            logger.addFilter(WithholdSecrets())
