r"""Text from records and inputs, made safe to print on the operator's terminal.

Record content is untrusted (a tool's output, a user's turn): printed as it is, an escape sequence in it
(``ESC [2J`` clears the screen, ``ESC [1A ESC [2K`` erases the row above, an OSC sets the window title) or a
bidirectional override would let the data rewrite the very tables an operator reads to learn why the model
saw it. :func:`escape` shows such characters as visible Python-style escapes (``\x1b``, ``\u202e``) and then
escapes rich markup, so every value printed by the CLI goes through one function.
"""

from __future__ import annotations

import re

from rich.markup import escape as _markup_escape

_CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u200e\u200f\u202a-\u202e\u2066-\u2069]")
"""C0 controls but tab and newline, DEL, C1 controls, and the bidirectional marks, embeddings, overrides and
isolates."""


def visible(text: str) -> str:
    """``text`` with every terminal control or bidirectional control character written as its escape."""
    return _CONTROL.sub(lambda m: m.group().encode("unicode_escape").decode("ascii"), text)


def escape(text: str) -> str:
    """``text`` ready for a rich console: controls made visible (:func:`visible`), then markup escaped."""
    return _markup_escape(visible(text))
