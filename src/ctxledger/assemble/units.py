"""The unit vocabulary, re-exported where the assembler's modules have always found it.

The definitions live in :mod:`ctxledger.units`, below the policy package, so policies and the assembler
both import them downward.
"""

from __future__ import annotations

from ctxledger.units import *  # noqa: F403
