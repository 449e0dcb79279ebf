"""The exception tree of ctxledger.

Every error the library raises on purpose derives from :class:`CtxledgerError`, so callers can catch
one root. Errors carry structured attributes (not only a message) so that services and tests can act
on them::

    CtxledgerError
    ├── ConfigurationError          bad arguments, unknown model, missing optional extra
    ├── StoreError
    │   ├── MigrationError          the schema is not at the expected revision
    │   ├── StoreConnectionError    the database cannot be reached (names host and port, never the password)
    │   ├── RecordNotFound          no record with that id in that tenant
    │   │   └── BlobNotFound        no blob with that sha256 in the blob store
    │   └── TenantIsolationError    a request tried to read across tenants
    ├── InputError                  an import or API input is invalid (names file, record index, field)
    │   ├── DuplicateRecordId       an appended record's id is already stored in its tenant
    │   ├── UsageAlreadyRecorded    observed usage of an assembly exists and overwriting was not asked for
    │   └── FormatNotRecognised     an import's format cannot be told from its content (lists the formats)
    ├── BudgetError
    │   ├── NoRoomForInput          W − O − M leaves no input tokens (also a ConfigurationError)
    │   └── RequiredBlocksDoNotFit  required blocks exceed the input budget (itemised)
    ├── PolicyError                 a policy, a stage, or a stage's decision is invalid
    │   ├── InvalidSetting          one setting of a stage, selection, rehydration or contract is invalid
    │   └── PolicyFileError         a policy file is invalid (names file and field)
    ├── SerializationError
    │   └── ProviderContractError   a payload would break a provider's documented message rules
    ├── IntegrityError              stored bytes no longer match their content hash
    └── CompactionRefused           a compaction lost an invariant (or failed) and is not used
"""

from __future__ import annotations

import unicodedata
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any


class CtxledgerError(Exception):
    """Root of every error raised on purpose by ctxledger."""


class ConfigurationError(CtxledgerError):
    """Invalid configuration or arguments (developer misuse), or a missing optional extra."""


class UnknownTokenizer(ConfigurationError):
    """No offline tokenizer is known for a model, or a token counter's name is unknown.

    Attributes:
        field: the request field to change, ``"model"`` or ``"counter"``.
    """

    def __init__(self, message: str, *, field: str) -> None:
        super().__init__(message)
        self.field = field


class StoreError(CtxledgerError):
    """A storage backend failed or was used wrongly."""


class MigrationError(StoreError):
    """The database schema is missing or at an unexpected revision."""


class StoreConnectionError(StoreError):
    """The store's database cannot be reached or refused the connection (server down, wrong host, port or login).

    The message names the backend, host, port and database, never the password.

    Attributes:
        backend: ``"postgresql"`` or ``"sqlite"``.
        host, port: where the server was looked for (``None`` when the URL names none, or for SQLite).
        database: the database name (the file path for SQLite).
        reason: the driver's first line about it.
    """

    def __init__(self, backend: str, host: str | None, port: int | None, database: str | None, reason: str) -> None:
        if backend == "sqlite":
            where = f"the SQLite database {database}"
        else:
            where = f"PostgreSQL at {host or 'localhost'}:{port or 5432} (database {database or '<default>'})"
        super().__init__(f"cannot connect to {where}: {reason}; check the store URL (--db / CTXLEDGER_URL)")
        self.backend = backend
        self.host = host
        self.port = port
        self.database = database
        self.reason = reason


def _nfc_hint(record_id: Any) -> str:
    """For an id not in Unicode NFC form: that ids are NFC, and its NFC form (else ``""``)."""
    if not isinstance(record_id, str) or unicodedata.is_normalized("NFC", record_id):
        return ""
    composed = quoted(unicodedata.normalize("NFC", record_id))
    return f" (ids are in Unicode NFC form, this one is not: its NFC form is {composed})"


class RecordNotFound(StoreError):
    """No record with the given id exists in the given tenant.

    Attributes:
        tenant_id: the tenant searched.
        record_id: the id that was not found.
        what: what kind of thing was looked for (``record``, ``conversation``, ``assembly`` …).
        among: where it was looked for, when narrower than the tenant (e.g. ``the candidates of assembly asm_…``).
    """

    def __init__(self, tenant_id: str, record_id: str, what: str = "record", among: str | None = None) -> None:
        where = f" among {among}" if among else ""
        super().__init__(
            f"{what} {quoted(record_id)} not found{where} in tenant {quoted(tenant_id)}{_nfc_hint(record_id)}"
        )
        self.tenant_id = tenant_id
        self.record_id = record_id
        self.what = what
        self.among = among

    def untenanted(self) -> str:
        """The message without the tenant (a caller who names the tenant already knows it)."""
        among = f" among {self.among}" if self.among else ""
        return f"{self.what} {quoted(self.record_id)} was not found{among}{_nfc_hint(self.record_id)}"


class BlobNotFound(RecordNotFound):
    """No blob named ``sha256`` is in the blob store (blobs are not scoped by tenant).

    Attributes:
        sha256: the bare-hex digest that was not found (also ``record_id``; ``tenant_id`` is ``""``).
        where: the blob store searched (a folder path, or ``"memory"``).
        artifact_id: the tool artifact whose bytes were asked for, when known.
    """

    def __init__(self, sha256: str, where: str, artifact_id: str | None = None) -> None:
        owner = f" (the raw bytes of artifact {artifact_id!r})" if artifact_id else ""
        StoreError.__init__(self, f"blob {sha256!r}{owner} not found in {where}")
        self.artifact_id = artifact_id
        self.what = "blob"
        self.among = None
        self.tenant_id = ""
        self.record_id = sha256
        self.sha256 = sha256
        self.where = where


class ContentRetained(RecordNotFound):
    """The content asked for was redacted, reduced to its hash or deleted by a retention rule.

    Attributes:
        tenant_id, record_id: the record asked for.
        sentence: what happened ("redacted by retention rule R at T").
    """

    def __init__(self, tenant_id: str, record_id: str, sentence: str) -> None:
        StoreError.__init__(self, f"record {record_id!r} of tenant {tenant_id!r}: content {sentence}")
        self.tenant_id = tenant_id
        self.record_id = record_id
        self.what = "record"
        self.among = None
        self.sentence = sentence


class TenantIsolationError(StoreError):
    """A read or write tried to cross a tenant boundary."""


class InputError(CtxledgerError):
    """Invalid input to an importer or API call; nothing of that input was written.

    Attributes:
        source: the file name (or ``"<api>"``) the input came from.
        index: the 0-based index of the offending record in that input, if known.
        field: the dotted path of the offending field, if known.
        problem: what is wrong, in words.
    """

    def __init__(
        self, problem: str, *, source: str = "<input>", index: int | None = None, field: str | None = None
    ) -> None:
        where = source
        if index is not None:
            where += f", record {index}"
        if field is not None:
            where += f", field {field!r}"
        super().__init__(f"{where}: {problem}")
        self.source = source
        self.index = index
        self.field = field
        self.problem = problem


class DuplicateRecordId(InputError):
    """An append named a record id its tenant already holds (records are immutable); nothing was written.

    Raised by every store's ``append`` (also when a concurrent writer stored the id first).

    Attributes:
        record_id: the id that is taken.
        tenant_id: the tenant it is taken in.
    """

    def __init__(self, record_id: str, tenant_id: str, *, source: str, index: int | None) -> None:
        super().__init__(
            f"record id {record_id!r} already exists in tenant {tenant_id!r}; records are immutable",
            source=source,
            index=index,
            field="id",
        )
        self.record_id = record_id
        self.tenant_id = tenant_id


class UsageAlreadyRecorded(InputError):
    """An assembly already has observed usage and ``record_usage`` was not told to overwrite it.

    Attributes:
        assembly_id: the assembly (also ``source``).
        input_tokens, output_tokens: the usage already recorded, in tokens.
    """

    def __init__(self, assembly_id: str, input_tokens: int, output_tokens: int) -> None:
        self.assembly_id = assembly_id
        self.input_tokens = input_tokens
        self.output_tokens = output_tokens
        super().__init__(
            self.describe("pass overwrite=True (CLI: ctxledger usage --overwrite)"),
            source=f"assembly {assembly_id}",
            field="observed_usage",
        )

    def describe(self, fix: str) -> str:
        """The message with ``fix`` saying how to replace the usage (each interface names its own option)."""
        return (
            f"observed usage is already recorded for this assembly (input {self.input_tokens:,}, output "
            f"{self.output_tokens:,} tokens); {fix} to replace it"
        )


class FormatNotRecognised(InputError):
    """The format of an input cannot be told from its content (``fmt="auto"``); nothing was parsed.

    Attributes:
        formats: the format names that can be passed explicitly.
    """

    def __init__(self, source: str, formats: Sequence[str]) -> None:
        super().__init__(f"cannot tell the format of this input; pass fmt= one of {', '.join(formats)}", source=source)
        self.formats = tuple(formats)


class NothingToImport(InputError):
    """A well-formed input that holds no conversation to import; nothing was parsed.

    Raised for a ToolBench failed run (a search tree and no ``train_messages`` trajectory). A directory
    import skips such a file with a warning and imports the rest.
    """


class BudgetError(CtxledgerError):
    """The token budget cannot be satisfied."""


class BudgetOutOfBounds(BudgetError, ConfigurationError):
    """One budget field is outside its bounds (:data:`ctxledger.budget.TOKEN_BOUNDS`).

    Also a :class:`ConfigurationError`. Front ends name their own option from ``field`` (the CLI ``--window``,
    or ``--budget`` for ``ctxledger demo``).

    Attributes:
        field: the library argument name (``window_tokens``, ``output_tokens`` or ``margin_tokens``).
        value: the value asked, in tokens.
        least, most: the inclusive bounds, in tokens.
    """

    def __init__(self, field: str, value: int, least: int, most: int) -> None:
        self.field = field
        self.value = value
        self.least = least
        self.most = most
        super().__init__(self.describe({field: field}))

    def describe(self, names: dict[str, str]) -> str:
        """The message with the field called by ``names`` (library argument name → the front end's name)."""
        return f"{names[self.field]} must be between {self.least} and {self.most:,}, got {self.value}"


class NoRoomForInput(BudgetError, ConfigurationError):
    """The budget leaves no tokens for input: ``B_input = W − O − M <= 0``.

    Also a :class:`ConfigurationError` (a request that cannot be assembled at all). Front ends name their own
    fields from the attributes (the service ``body.window_tokens`` …, the CLI ``--window`` …).

    Attributes:
        window_tokens, output_tokens, margin_tokens: ``W``, ``O`` and ``M`` as asked, in tokens.
        input_tokens: ``W − O − M`` (``<= 0``).
        culprits: the fields at fault, as library argument names: ``window_tokens`` first (raising ``W`` always
            helps), then ``output_tokens`` and ``margin_tokens`` when they are not zero (lowering them helps).
    """

    def __init__(self, window_tokens: int, output_tokens: int, margin_tokens: int) -> None:
        self.window_tokens = window_tokens
        self.output_tokens = output_tokens
        self.margin_tokens = margin_tokens
        self.input_tokens = window_tokens - output_tokens - margin_tokens
        reserves = (("output_tokens", output_tokens), ("margin_tokens", margin_tokens))
        self.culprits = ("window_tokens", *(name for name, value in reserves if value))
        super().__init__(self.describe({name: name for name in ("window_tokens", "output_tokens", "margin_tokens")}))

    def describe(self, names: dict[str, str]) -> str:
        """The message with each field called by ``names`` (library argument name → the front end's name)."""
        symbol = {"output_tokens": "O", "margin_tokens": "M"}
        lower = " or ".join(f"{names[f]} ({symbol[f]})" for f in self.culprits[1:])
        return (
            f"no room for input: window {self.window_tokens} - output {self.output_tokens} - margin "
            f"{self.margin_tokens} = {self.input_tokens} tokens; raise {names['window_tokens']} (W)"
            + (f", or lower {lower}" if lower else "")
        )


@dataclass(frozen=True, slots=True)
class BudgetItem:
    """One required block and its cost in tokens, as listed by :class:`RequiredBlocksDoNotFit`."""

    ref: str
    what: str
    tokens: int


class RequiredBlocksDoNotFit(BudgetError):
    """Required blocks (instructions, tool schemas, the latest user turn, open tool calls) exceed the budget.

    Assembly never drops a required block silently (seed 000 "Tokens y presupuesto").

    Attributes:
        blocks: every required block with its tokens, in payload order.
        required_tokens: their sum.
        budget_tokens: ``B_input`` (tokens available for input).
    """

    def __init__(self, blocks: Sequence[BudgetItem], budget_tokens: int) -> None:
        self.blocks = tuple(blocks)
        self.required_tokens = sum(b.tokens for b in self.blocks)
        self.budget_tokens = budget_tokens
        listing = "; ".join(f"{b.ref} ({b.what}): {b.tokens}" for b in self.blocks)
        releases = [RELEASED_BY[w] for w in dict.fromkeys(b.what for b in self.blocks) if w in RELEASED_BY]
        super().__init__(
            f"required blocks need {self.required_tokens} tokens but the input budget is "
            f"{budget_tokens} tokens: {listing}. The input budget is W - O - M: raise window_tokens, or lower "
            "output_tokens or margin_tokens, or make the largest block smaller" + "".join(f"; {r}" for r in releases)
        )


RELEASED_BY = {
    "unresolved_tool_error": "a failed call stays required until a later call of the same tool succeeds (record it)",
    "unresolved_tool_call": "a call with no result stays required until its result is recorded (tool_result)",
}
"""Protection reasons a caller can end by recording something, and what: named by :class:`RequiredBlocksDoNotFit`."""


class PolicyError(CtxledgerError):
    """A policy definition or stage is invalid, or a stage failed or decided something it may not."""


class InvalidSetting(PolicyError, ValueError):
    """One setting of a policy part is invalid (raised by stage constructors and the settings dataclasses).

    Also a ``ValueError``: an invalid argument value, for callers that build stages in Python.

    The policy loader turns it into a :class:`PolicyFileError` whose field is ``<table>.<setting>``
    (e.g. ``stages.privacy.allow``).

    Attributes:
        owner: what the setting belongs to (a stage name, ``"selection"``, ``"rehydration"``, ``"contract"``).
        setting: the setting's key, dotted for nested keys (e.g. ``"class_caps.nonsense"``).
        problem: what is wrong, in words.
    """

    def __init__(self, owner: str, setting: str, problem: str) -> None:
        super().__init__(f"{owner}.{setting}: {problem}")
        self.owner = owner
        self.setting = setting
        self.problem = problem


class PolicyFileError(PolicyError):
    """A policy file (TOML or YAML) is invalid; nothing of it is used.

    Attributes:
        source: the file name (or ``"<string>"``).
        field: the dotted path of the offending key, if known (e.g. ``"stages.privacy.allow"``).
        line: the 1-based line of the problem, when the parser reports one (YAML syntax errors).
        problem: what is wrong, in words.
    """

    def __init__(
        self, problem: str, *, source: str = "<string>", field: str | None = None, line: int | None = None
    ) -> None:
        where = source if line is None else f"{source}, line {line}"
        if field is not None:
            where += f", field {field!r}"
        super().__init__(f"{where}: {problem}")
        self.source = source
        self.field = field
        self.line = line
        self.problem = problem


class SerializationError(CtxledgerError):
    """A selection could not be serialized into a provider payload."""


class ProviderContractError(SerializationError):
    """A payload would break a provider's documented message rules (pairing, role order …).

    Attributes:
        rule: short name of the broken rule (e.g. ``"tool_result_after_call"``), if known.
        index: 0-based index of the offending payload message (``validate``) or turn (``build``).
        refs: refs of the turns involved, so the error names the graph records.
    """

    def __init__(
        self, message: str, *, rule: str | None = None, index: int | None = None, refs: Sequence[str] = ()
    ) -> None:
        super().__init__(message)
        self.rule = rule
        self.index = index
        self.refs = tuple(refs)


NOTHING_TO_SEND = (
    "nothing to send: the context has no user or assistant turn (the conversation has none yet, or every turn "
    "was left out or is empty)"
)
"""The message of :class:`NothingToSend`."""


class NothingToSend(ProviderContractError):
    """The assembled context holds no user or assistant turn, so no provider accepts it; nothing was sent.

    Raised for a conversation with no turn yet (or only empty ones, which assembly leaves out) and when every
    turn was withheld. A user error: the CLI exits with code 2 and the service answers 422.
    """


class IntegrityError(CtxledgerError):
    """Stored bytes do not match the content hash that names them."""


class CompactionRefused(CtxledgerError):
    """A compaction lost an invariant, or could not be produced, so it must not become the summary.

    A refused compaction never becomes summary text (seed 001 "Compactación").

    Attributes:
        compaction_id: id of the compaction that was refused.
        reason: ``"lost_invariants"`` (the fidelity check failed) or ``"compactor_failed"`` (the
            compactor raised or returned nothing).
        missing: the invariant items that did not survive (objects with ``kind``, ``record_id``,
            ``text``); empty when ``reason`` is ``"compactor_failed"``.
    """

    def __init__(
        self, compaction_id: str, *, reason: str = "lost_invariants", missing: Sequence[Any] = (), detail: str = ""
    ) -> None:
        self.compaction_id = compaction_id
        self.reason = reason
        self.missing = tuple(missing)
        lost = "; ".join(f"{m.kind} [{m.record_id}]: {m.text!r}" for m in self.missing)
        message = f"compaction {compaction_id!r} refused ({reason})"
        if lost:
            message += f": lost {lost}"
        if detail:
            message += f": {detail}"
        super().__init__(message)


_quote: Callable[[Any], str] = repr
"""How an error names a caller's value; :mod:`ctxledger.policy.message_redaction` sets one that withholds secrets."""


def quote_values_with(quote: Callable[[Any], str]) -> None:
    """Make the errors built here name a caller's value (an id …) with ``quote`` instead of ``repr``.

    :mod:`ctxledger.policy.message_redaction` sets its :func:`~ctxledger.policy.message_redaction.shown` when it is
    imported (``import ctxledger`` does), so a message never repeats a secret; this module imports nothing of the
    scanner, which itself raises these errors.
    """
    global _quote
    _quote = quote


def quoted(value: Any) -> str:
    """``value`` as an error message names it.

    ``repr(value)``, or ``[withheld by policy: <type>]`` when it holds a secret (once :func:`quote_values_with` is
    set, which importing ``ctxledger`` does).
    """
    return _quote(value)
