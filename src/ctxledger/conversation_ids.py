"""Which conversation ids a tenant may create: never empty, never the id of a stored record, never nested.

The records of conversation ``a`` are named ``a/<name>`` (``a/main``, ``a/0``, ``a/participant/user``, a
Recorder's ``a/<name>``), and ``<conversation>/<ref>`` is how the CLI, ``explain`` and ``rehydrate`` complete a
short reference. So a conversation ``a/b`` beside a conversation ``a`` is ambiguous (is ``a/b`` the conversation
or ``a``'s record ``b``?) and collides as soon as ``a`` writes a record named ``b``. The rule:

* an id is a non-empty string of at most :data:`MAX_ID_CHARS` characters without surrounding whitespace, control
  characters, empty ``/`` segments or ``.``/``..`` segments (the service addresses a conversation by its id in
  the URL path, where such segments are resolved away), in Unicode NFC form: ``"café"`` typed as ``e`` +
  combining accent (NFD) looks exactly like the composed one but is another string, so it is refused naming both
  forms rather than becoming a second conversation that looks like the first (ids derived from file names are
  made NFC: :func:`nfc`);
* an id that is already some record's id is refused, naming that record's kind and conversation (``already
  imported`` only when it is that very conversation);
* an id ``X/…`` where ``X`` is a conversation of the tenant is refused, and so is ``X`` when a conversation
  ``X/…`` exists (ids in one tenant never nest).

:func:`check_new_conversations` applies it to the Conversation records of one append; ``Ledger.append``, the
importers' ``write_batch`` and the CLI call it before anything is written.
"""

from __future__ import annotations

import unicodedata
from collections.abc import Sequence
from typing import Any

from ctxledger.errors import InputError
from ctxledger.records import Conversation, Record
from ctxledger.store._rules import get_or_none

MAX_ID_CHARS = 256
"""The longest conversation id accepted, in characters (ids are repeated in every record id of the conversation)."""


def nfc(text: str) -> str:
    """``text`` in Unicode NFC form (composed characters), the form every conversation id has."""
    return unicodedata.normalize("NFC", text)


def id_problem(value: Any) -> str | None:
    """Why ``value`` cannot be a conversation id, or ``None`` when it can (the first rule above)."""
    if not isinstance(value, str):
        return f"must be a string, got {type(value).__name__}"
    if not value.strip():
        return f"must be a non-empty string, got {value!r}"
    if value != value.strip():
        return f"must not start or end with whitespace, got {value!r}"
    if any(unicodedata.category(ch) in ("Cc", "Cf", "Cs") for ch in value):
        return f"must not hold control or format characters, got {value!r}"
    if "" in value.split("/"):
        return f"must not start or end with '/' or hold '//', got {value!r}"
    if {".", ".."} & set(value.split("/")):
        return f"must not hold a '.' or '..' segment (a URL or file path would resolve it away), got {value!r}"
    if len(value) > MAX_ID_CHARS:
        return f"must be at most {MAX_ID_CHARS} characters long, got {len(value)}: {value[:40]!r}…"
    if not unicodedata.is_normalized("NFC", value):
        return (
            f"must be in Unicode NFC form (composed characters), got {value!r} {_escaped(value)}; "
            f"its NFC form is {nfc(value)!r} {_escaped(nfc(value))}, which looks the same"
        )
    return None


def _escaped(text: str) -> str:
    """``text``'s non-ASCII characters as Python escapes in parentheses (two forms that look alike read apart)."""
    return "(" + text.encode("ascii", "backslashreplace").decode("ascii") + ")"


def check_conversation_id(value: Any, *, source: str, field: str = "conversation_id", index: int | None = None) -> str:
    """Return ``value`` if it can be a conversation id.

    Raises:
        InputError: naming ``source``, ``index`` and ``field`` (empty, blank, padded, control characters, ``//``,
            a ``.`` or ``..`` segment, longer than :data:`MAX_ID_CHARS`, not in Unicode NFC form).
    """
    problem = id_problem(value)
    if problem is not None:
        raise InputError(problem, source=source, index=index, field=field)
    return value


def conflict(
    store: Any,
    tenant_id: str,
    conversation_id: str,
    *,
    known: Sequence[str] = (),
    stored: Sequence[str] | None = None,
) -> str | None:
    """Why the tenant cannot create ``conversation_id`` now, or ``None`` (the second and third rules above).

    Args:
        store: the ``GraphStore``.
        tenant_id: the tenant (other tenants' ids are never consulted).
        conversation_id: the id to create.
        known: conversation ids created earlier in the same append (a clash with one says so, not "exists").
        stored: the tenant's conversation ids if already read (``store.conversations``), else read here.
    """
    existing = get_or_none(store, tenant_id, conversation_id)
    if isinstance(existing, Conversation):
        return f"conversation {conversation_id!r} is already in tenant {tenant_id!r} (re-import of the same source)"
    if existing is not None:
        return (
            f"{conversation_id!r} is already the id of a {existing.kind.value} record of conversation "
            f"{existing.conversation_id!r}; a conversation id cannot be a record id"
        )
    parts = conversation_id.split("/")
    for k in range(1, len(parts)):
        outer = "/".join(parts[:k])
        if outer in known or isinstance(get_or_none(store, tenant_id, outer), Conversation):
            where = " (created by the same append)" if outer in known else ""
            return (
                f"{conversation_id!r} would nest inside conversation {outer!r}{where}, whose records are named "
                f"{outer}/<name>; conversation ids in one tenant never nest"
            )
    prefix = conversation_id + "/"
    listed = store.conversations(tenant_id) if stored is None else stored
    inner = next((c for c in known if c.startswith(prefix)), None)
    where = "is created by the same append" if inner is not None else "exists"
    inner = inner or next((c for c in listed if c.startswith(prefix)), None)
    if inner is not None:
        return (
            f"conversation {inner!r} {where}, so the records of {conversation_id!r} (named {conversation_id}/<name>) "
            "could collide with it; conversation ids in one tenant never nest"
        )
    return None


def check_new_conversations(store: Any, records: Sequence[Record], *, source: str, hint: str = "") -> None:
    """Refuse the append when a Conversation record of ``records`` breaks the rules above.

    Args:
        store: the ``GraphStore`` the records go to.
        records: one append's records.
        source: what the error names as its source (a file, ``"<api>"``).
        hint: a sentence added to a conflict (e.g. which option gives another id).

    Raises:
        InputError: names ``source``, the record index and ``conversation_id``; nothing was written.
    """
    created: dict[str, list[str]] = {}
    stored: dict[str, list[str]] = {}
    for index, record in enumerate(records):
        if not isinstance(record, Conversation):
            continue
        tenant = record.tenant_id
        check_conversation_id(record.conversation_id, source=source, index=index)
        if tenant not in stored:
            stored[tenant] = list(store.conversations(tenant))
        known = created.setdefault(tenant, [])
        problem = conflict(store, tenant, record.conversation_id, known=known, stored=stored[tenant])
        if problem is not None:
            text = f"{problem}; {hint}" if hint else problem
            raise InputError(text, source=source, index=index, field="conversation_id")
        known.append(record.conversation_id)
