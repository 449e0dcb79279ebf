"""The types of a failure case's values, and the case ids its expectations name.

``shared/cases/README.md`` fixes what each field holds: a budget of three integers, messages and memories
with a unique string ``id`` and integer ``tokens``, tools priced by ``tokens``, a ``request`` of scope
labels, and expectations whose values are flags, ids, lists of ids, groups of ids or rules. A value of
another type would otherwise be read as something else (a string as a list of its characters, a
``request`` string ignored, a typo'd id as a vacuous pass) or crash a checker; :func:`check_case_shape`
refuses it by name before anything runs, and :func:`check_case_ids` refuses an expectation naming an id
that is no message or memory of the case.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

from ctxledger.errors import InputError
from ctxledger.policy.decisions import ReasonCode

FLAG_KEYS = frozenset(
    {
        "order_preserved",
        "system_preserved",
        "tool_pairs_intact",
        "tools_counted",
        "no_synthetic_messages",
        "must_not_return_empty",
    }
)
"""Expectations that are ``true`` or ``false``."""
ID_LIST_KEYS = frozenset(
    {
        "must_include_ids",
        "must_not_include_ids",
        "verbatim_ids",
        "content_parts_preserved_ids",
        "untrusted_ids",
        "role_unchanged_ids",
        "conservative_estimate_ids",
        "error_names_ids",
    }
)
"""Expectations that are a list of case ids."""
MESSAGE_ONLY_KEYS = frozenset(
    {"verbatim_ids", "content_parts_preserved_ids", "role_unchanged_ids", "conservative_estimate_ids"}
)
"""Expectations about a message's content, role or cost: their ids must name messages, not memories."""
CASE_REASONS = frozenset({"budget", "role_order", "summarized", "scope"})
"""Reason codes of the case format (``scope`` = ``out_of_scope``); the manifest's own codes are accepted too."""
ROLES = frozenset({"system", "developer", "user", "assistant", "tool"})


def _refuse(case: Mapping[str, Any], where: str, message: str) -> InputError:
    return InputError(message, source=f"case {case.get('id', '?')}", field=where)


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _ints(case: Mapping[str, Any], obj: Mapping[str, Any], where: str, keys: Sequence[str]) -> None:
    for key in keys:
        if key not in obj:
            raise _refuse(case, f"{where}{key}", "is required")
        if not _is_int(obj[key]):
            raise _refuse(case, f"{where}{key}", f"must be an integer, got {type(obj[key]).__name__} {obj[key]!r}")


def _object(case: Mapping[str, Any], value: Any, where: str) -> Mapping[str, Any]:
    if not isinstance(value, Mapping):
        raise _refuse(case, where, f"must be a JSON object, got {type(value).__name__} {value!r}")
    return value


def _list(case: Mapping[str, Any], value: Any, where: str) -> list[Any]:
    if not isinstance(value, list):
        raise _refuse(case, where, f"must be a JSON list, got {type(value).__name__} {value!r}")
    return value


def _strings(case: Mapping[str, Any], value: Any, where: str) -> list[str]:
    items = _list(case, value, where)
    for k, item in enumerate(items):
        if not isinstance(item, str) or not item:
            raise _refuse(case, f"{where}[{k}]", f"must be a non-empty string, got {item!r}")
    return items


def _groups(case: Mapping[str, Any], value: Any, where: str) -> None:
    for k, group in enumerate(_list(case, value, where)):
        _strings(case, group, f"{where}[{k}]")


def _string(case: Mapping[str, Any], obj: Mapping[str, Any], key: str, where: str, *, empty: bool = True) -> None:
    if key in obj and (not isinstance(obj[key], str) or (not empty and not obj[key])):
        what = "a string" if empty else "a non-empty string"
        raise _refuse(case, f"{where}{key}", f"must be {what}, got {type(obj[key]).__name__} {obj[key]!r}")


def _tool_calls(case: Mapping[str, Any], calls: Any, where: str) -> None:
    for k, call in enumerate(_list(case, calls, where)):
        _object(case, call, f"{where}[{k}]")
        _string(case, call, "id", f"{where}[{k}].", empty=False)
        _string(case, call, "type", f"{where}[{k}].")
        function = _object(case, call.get("function"), f"{where}[{k}].function")
        _string(case, function, "name", f"{where}[{k}].function.", empty=False)
        _string(case, function, "arguments", f"{where}[{k}].function.")


def _message(case: Mapping[str, Any], item: Mapping[str, Any], where: str) -> None:
    if not isinstance(item.get("role"), str) or item["role"] not in ROLES:
        raise _refuse(case, f"{where}role", f"must be one of {', '.join(sorted(ROLES))}, got {item.get('role')!r}")
    content = item.get("content")
    if content is not None and not isinstance(content, str):
        for k, part in enumerate(_list(case, content, f"{where}content")):
            _object(case, part, f"{where}content[{k}]")
    if "tool_calls" in item and item["tool_calls"] is not None:
        _tool_calls(case, item["tool_calls"], f"{where}tool_calls")
    _string(case, item, "tool_call_id", where, empty=False)
    for key in ("name", "kind", "artifact_ref", "note"):
        _string(case, item, key, where)
    for key in ("tags", "covers"):
        if key in item:
            _strings(case, item[key], f"{where}{key}")
    size = item.get("artifact_bytes", 0)
    if not (_is_int(size) and size >= 0):
        raise _refuse(case, f"{where}artifact_bytes", f"must be a whole number of bytes, got {size!r}")
    if "provenance" in item and not isinstance(item["provenance"], str | Mapping):
        raise _refuse(case, f"{where}provenance", f"must be a string or a JSON object, got {item['provenance']!r}")


def _memory(case: Mapping[str, Any], item: Mapping[str, Any], where: str) -> None:
    if not isinstance(item.get("text"), str):
        raise _refuse(case, f"{where}text", f"must be a string, got {item.get('text')!r}")
    for label, value in _object(case, item.get("scope", {}), f"{where}scope").items():
        if not isinstance(value, str):
            raise _refuse(case, f"{where}scope.{label}", f"must be a string scope label, got {value!r}")
    score = item.get("score", 0.0)
    if isinstance(score, bool) or not isinstance(score, int | float) or score != score:
        raise _refuse(case, f"{where}score", f"must be a number, got {type(score).__name__} {score!r}")
    if "created_at" in item and item["created_at"] is not None:
        when = item["created_at"]
        try:
            datetime.fromisoformat(when.replace("Z", "+00:00"))
        except (AttributeError, ValueError):
            raise _refuse(case, f"{where}created_at", f"must be an ISO 8601 time, got {when!r}") from None
    olds = item.get("supersedes")
    if olds is None:
        return
    if not ((isinstance(olds, str) and olds) or isinstance(olds, list)):
        raise _refuse(case, f"{where}supersedes", f"must be a memory id or a list of them, got {olds!r}")
    if isinstance(olds, list):
        _strings(case, olds, f"{where}supersedes")


def _supersedes(case: Mapping[str, Any]) -> None:
    known = {m["id"] for m in case.get("memories", [])}
    for i, item in enumerate(case.get("memories", [])):
        olds = item.get("supersedes") or ()
        for old in [olds] if isinstance(olds, str) else olds:
            if old not in known:
                raise _refuse(case, f"memories[{i}].supersedes", f"names no memory of the case: {old!r}")


def _records(case: Mapping[str, Any], key: str, seen: dict[str, str]) -> None:
    for i, item in enumerate(_list(case, case.get(key, []), key)):
        where = f"{key}[{i}]."
        _object(case, item, f"{key}[{i}]")
        ref = item.get("id")
        if not isinstance(ref, str) or not ref:
            raise _refuse(case, f"{where}id", f"must be a non-empty string, got {ref!r}")
        if ref in seen:
            raise _refuse(case, f"{where}id", f"{ref!r} is also the id of {seen[ref]}")
        seen[ref] = f"{key}[{i}]"
        _ints(case, item, where, ["tokens"])
        if key == "memories":
            _memory(case, item, where)
        else:
            _message(case, item, where)


def _descriptive(case: Mapping[str, Any]) -> None:
    for key in ("id", "kind", "source", "title"):
        _string(case, case, key, "", empty=key != "id")
    _string(case, case, "target_provider", "", empty=False)
    if "holdout" in case and not isinstance(case["holdout"], bool):
        raise _refuse(case, "holdout", f"must be true or false, got {case['holdout']!r}")
    if "naive_fails" in case:
        _strings(case, case["naive_fails"], "naive_fails")
    if "example_selection" in case and not isinstance(case["example_selection"], list | Mapping):
        raise _refuse(case, "example_selection", f"must be a JSON list or object, got {case['example_selection']!r}")


def _tools(case: Mapping[str, Any]) -> None:
    for i, tool in enumerate(_list(case, case.get("tools", []), "tools")):
        _object(case, tool, f"tools[{i}]")
        _ints(case, tool, f"tools[{i}].", ["tokens"])
        _string(case, tool, "type", f"tools[{i}].")
        name = _object(case, tool.get("function"), f"tools[{i}].function").get("name")
        if not isinstance(name, str) or not name:
            raise _refuse(case, f"tools[{i}].function.name", f"must be a non-empty string, got {name!r}")


def _request(case: Mapping[str, Any]) -> None:
    if "request" not in case:
        return
    for key, value in _object(case, case["request"], "request").items():
        if not isinstance(value, str):
            raise _refuse(case, f"request.{key}", f"must be a string scope label, got {value!r}")


def _reason(case: Mapping[str, Any], where: str, reason: Any) -> None:
    known = CASE_REASONS | {r.value for r in ReasonCode}
    if not isinstance(reason, str) or not (reason in known or reason.startswith("custom:")):
        raise _refuse(case, where, f"unknown reason code {reason!r} (known: {', '.join(sorted(known))})")


def _expect_value(case: Mapping[str, Any], key: str, value: Any) -> None:
    where = f"expect.{key}"
    if key in FLAG_KEYS and not isinstance(value, bool):
        raise _refuse(case, where, f"must be true or false, got {value!r}")
    if key in ID_LIST_KEYS or key == "must_not_contain_text":
        _strings(case, value, where)
    elif key in ("omitted_together",):
        _groups(case, value, where)
    elif key == "omitted_reason_for":
        for ref, reason in _object(case, value, where).items():
            _reason(case, f"{where}.{ref}", reason)
    elif key == "max_input_tokens" and not _is_int(value):
        raise _refuse(case, where, f"must be an integer, got {type(value).__name__} {value!r}")
    elif key in ("last_included_id", "error") and (not isinstance(value, str) or not value):
        raise _refuse(case, where, f"must be a non-empty string, got {value!r}")
    elif key == "first_non_system_role" and (not isinstance(value, str) or value not in ROLES):
        raise _refuse(case, where, f"must be one of {', '.join(sorted(ROLES))}, got {value!r}")
    elif key == "excerpted":
        for ref, rule in _object(case, value, where).items():
            rule = _object(case, rule, f"{where}.{ref}")
            if "max_tokens" in rule and not _is_int(rule["max_tokens"]):
                raise _refuse(case, f"{where}.{ref}.max_tokens", f"must be an integer, got {rule['max_tokens']!r}")
            _strings(case, rule.get("must_contain", []), f"{where}.{ref}.must_contain")
            if not isinstance(rule.get("must_reference", ""), str):
                raise _refuse(case, f"{where}.{ref}.must_reference", "must be a string")
    elif key == "serialize_anthropic":
        groups = _object(case, value, where).get("tool_results_in_one_user_message", [])
        _groups(case, groups, f"{where}.tool_results_in_one_user_message")


def check_case_shape(case: Mapping[str, Any]) -> None:
    """Refuse a case value of the wrong type (the field names are checked by ``validate_case``).

    Every documented field is checked before anything runs: the descriptive fields (``id``, ``kind``,
    ``source``, ``title`` strings, ``holdout`` a flag, ``naive_fails`` a list of strings), ``target_provider``
    (a string; its value is checked by ``validate_case``), each message's ``role``, ``content`` (a string,
    ``null`` or a list of part objects), ``tool_calls``, the string fields ``tool_call_id``, ``name``,
    ``kind``, ``artifact_ref``, ``note``, the string lists ``tags`` and ``covers``, ``artifact_bytes``;
    each memory's ``text``, ``scope`` (an object of string labels), ``score`` (a number), ``created_at``
    (ISO 8601), ``supersedes`` (an id or a list of ids, each a memory of the case); each tool's ``type`` and
    ``function.name``.

    Raises:
        InputError: names the case (``source``) and the value's path (``field``, e.g. ``budget.window_tokens``,
            ``messages[2].id``, ``memories[0].supersedes``, ``expect.omitted_together[0]``): a missing or
            non-integer budget field or ``tokens``; a message or memory without a string ``id``, or one whose
            id another message or memory already has; any documented field of the wrong type; a ``request``
            that is not an object of strings; an expectation value of the wrong type; an
            ``omitted_reason_for`` reason that is no reason code.
    """
    _descriptive(case)
    if "budget" not in case:
        raise _refuse(case, "budget", "is required")
    budget = _object(case, case["budget"], "budget")
    _ints(case, budget, "budget.", ["window_tokens", "reserved_output_tokens", "margin_tokens"])
    seen: dict[str, str] = {}
    _records(case, "messages", seen)
    _records(case, "memories", seen)
    _supersedes(case)
    _tools(case)
    _request(case)
    for key, value in _object(case, case.get("expect"), "expect").items():
        _expect_value(case, key, value)


def expectation_ids(expect: Mapping[str, Any]) -> list[tuple[str, str]]:
    """Every ``(field path, case id)`` an expectation names (after :func:`check_case_shape`)."""
    out: list[tuple[str, str]] = []
    for key, value in expect.items():
        if key in ID_LIST_KEYS:
            out += [(f"expect.{key}", ref) for ref in value]
        elif key == "omitted_together":
            out += [(f"expect.{key}", ref) for group in value for ref in group]
        elif key in ("omitted_reason_for", "excerpted"):
            out += [(f"expect.{key}", ref) for ref in value]
        elif key == "last_included_id":
            out.append((f"expect.{key}", value))
        elif key == "serialize_anthropic":
            groups = value.get("tool_results_in_one_user_message", [])
            out += [(f"expect.{key}.tool_results_in_one_user_message", ref) for g in groups for ref in g]
    return out


def check_case_ids(case: Mapping[str, Any]) -> None:
    """Refuse an expectation naming an id that is no message or memory of the case (a typo would pass vacuously).

    Expectations about a message's content, role or cost (:data:`MESSAGE_ONLY_KEYS`) must name messages.

    Raises:
        InputError: names the case, the expectation and the id.
    """
    messages = {m["id"] for m in case.get("messages", [])}
    memories = {m["id"] for m in case.get("memories", [])}
    for where, ref in expectation_ids(case.get("expect", {})):
        if ref not in messages | memories:
            raise _refuse(case, where, f"names no message or memory of the case: {ref!r}")
        if ref in memories and where.removeprefix("expect.") in MESSAGE_ONLY_KEYS:
            raise _refuse(case, where, f"{ref!r} is a memory; this expectation checks messages")
