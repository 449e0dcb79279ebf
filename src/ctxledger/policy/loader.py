"""Policies from TOML or YAML files, with custom stages loaded by import path.

A policy file is a versioned, declarative value users can write and review, in TOML::

    [policy]
    name = "support-desk"
    version = "7"
    # unsafe_without = ["secrets"]      # explicit opt-out of a safety stage (hashed, in every manifest)
    # order of the stages; built-in names or names declared in [stage_classes]
    stages = ["scope", "lineage", "visibility", "privacy", "validity", "trust",
              "working_set", "protection", "no_pii_in_routing", "secrets", "compaction", "memory_first"]

    [stage_classes]                     # the Python extension point: name = "module:Class"
    no_pii_in_routing = "acme.ctx:NoPiiInRouting"

    [stages.scope]                      # keyword arguments of each stage's constructor
    keys = ["app", "user_id"]

    [stages.privacy]
    allow = { "*" = ["public", "internal"], google = ["public", "internal", "confidential"] }
    routes = { google = ["vertex"] }

    [selection]                         # utility weights, class caps (fractions of B_dynamic)
    w_relevance = 0.5
    class_caps = { operational = 0.5 }

    [rehydration]
    max_bytes = 65536

    [[retention.rules]]                 # what is kept, how long, in what form (ctxledger.retention.rules)
    name = "raw-outputs-30d"
    kinds = ["tool_artifact"]
    after_days = 30
    action = "redact"

    [[contracts]]                       # working-set contracts (seed 001)
    agent = "router"
    call_type = "routing"
    sources = ["instructions", "latest_user_turn", "typed_request"]
    max_input_tokens = 2000
    tools = { investigation = ["search_orders"] }
    write_tools = ["issue_refund"]

or the same tables as YAML mappings (``.yaml`` / ``.yml``, read with PyYAML's safe loader)::

    policy:
      name: support-desk
      version: "7"
      stages: [scope, lineage, visibility, privacy, validity, trust, working_set, protection,
               no_pii_in_routing, secrets, compaction, memory_first]
    stage_classes:
      no_pii_in_routing: acme.ctx:NoPiiInRouting
    stages:
      privacy:
        allow: {"*": [public, internal], google: [public, internal, confidential]}
    selection:
      w_relevance: 0.5
      class_caps: {operational: 0.5}
    contracts:
      - agent: router
        call_type: routing
        sources: [instructions, latest_user_turn, typed_request]
        max_input_tokens: 2000

Both syntaxes go through the same schema and validation (:func:`policy_from_dict`), so equivalent TOML
and YAML files give the same policy and the same hash. YAML's extras are refused where TOML has none:
a key that is not a string, or the same key twice in one mapping (errors name the line); a document that
is not a mapping.

Without ``[policy].stages`` every built-in stage runs in the default order; a custom stage runs only where
``[policy].stages`` lists it, so declaring one in ``[stage_classes]`` without listing it is an error, and so
is a key that is a built-in stage's name or differs from the class's ``name``. The safety stages
(:data:`~ctxledger.policy.safety.SAFETY_STAGES`) must be listed unless ``[policy] unsafe_without`` names
them (hashed, and recorded in every manifest); a stage listed twice and two contracts for the same agent and
call type are errors. A custom stage class must have ``name`` and ``version`` class attributes, a
``config()`` method and ``__call__(ctx)`` (the :class:`~ctxledger.policy.base.Stage` protocol); its
configuration is part of the policy hash. ``[policy] name`` and ``version`` must be quoted strings
(``version = "1.10"``): a bare number is refused, because TOML and YAML read ``1.10`` as ``1.1``.
Settings are validated by the stages' constructors and the settings dataclasses
(:mod:`ctxledger.policy.checks`). Every problem raises :class:`~ctxledger.errors.PolicyFileError` naming the
file and the field (``stages.privacy.allow``).
"""

from __future__ import annotations

import dataclasses
import importlib
import re
import tomllib
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import yaml  # type: ignore[import-untyped]

from ctxledger.errors import InvalidSetting, PolicyError, PolicyFileError
from ctxledger.policy.base import Policy, RehydrationParams, SelectionParams, Stage
from ctxledger.policy.contracts import WorkingSetContract
from ctxledger.policy.safety import contracts_problem, stage_list_problem
from ctxledger.policy.stages import STAGES
from ctxledger.retention.rules import rules_from_table

_TOP_KEYS = {"policy", "stage_classes", "stages", "selection", "rehydration", "contracts", "retention"}
_POLICY_KEYS = {"name", "version", "stages", "unsafe_without"}

YAML_SUFFIXES = (".yaml", ".yml")
"""File suffixes read as YAML; every other policy file is read as TOML."""


def load_policy(path: str | Path, *, allow_modules: Iterable[str] = ()) -> Policy:
    """Read a policy file: YAML for ``.yaml`` / ``.yml``, TOML otherwise.

    Args:
        path: the file.
        allow_modules: modules ``[stage_classes]`` may import custom stages from (a name allows its
            submodules too: ``"acme"`` allows ``acme.ctx``). Nothing else is ever imported: a policy file
            naming another module is refused before any import (CLI: ``--allow-stage-module``).

    Raises:
        PolicyFileError: unreadable file, invalid TOML or YAML (YAML errors name the line), or an invalid
            policy (names file and field), including a custom stage from a module not allowed.
    """
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise PolicyFileError(f"cannot read policy file: {exc.strerror or exc}", source=str(path)) from exc
    except UnicodeDecodeError as exc:
        raise PolicyFileError(f"not UTF-8 text: {exc.reason} at byte {exc.start}", source=str(path)) from exc
    syntax = "yaml" if path.suffix.lower() in YAML_SUFFIXES else "toml"
    return loads_policy(text, source=str(path), syntax=syntax, allow_modules=allow_modules)


def loads_policy(
    text: str, *, source: str = "<string>", syntax: str = "toml", allow_modules: Iterable[str] = ()
) -> Policy:
    """Parse a policy from TOML or YAML text (``source`` names it in errors).

    Args:
        text: the file's text.
        source: the name used in errors (usually the file path).
        syntax: ``"toml"`` or ``"yaml"``.
        allow_modules: as for :func:`load_policy`.

    Raises:
        PolicyFileError: an unknown syntax, invalid TOML or YAML (also nesting deeper than
            :data:`MAX_DEPTH`, an integer too long to convert, a lone surrogate), or an invalid policy.
    """
    try:
        if syntax == "toml":
            try:
                data = tomllib.loads(text)
            except tomllib.TOMLDecodeError as exc:
                raise PolicyFileError(f"invalid TOML: {exc}", source=source) from exc
        elif syntax == "yaml":
            data = _parse_yaml(text, source)
        else:
            raise PolicyFileError(f"unknown policy syntax {syntax!r}; use 'toml' or 'yaml'", source=source)
    except RecursionError:
        raise PolicyFileError(f"nested more than {MAX_DEPTH} levels deep", source=source) from None
    except ValueError as exc:  # an integer beyond Python's digit limit (TOML and YAML alike)
        raise PolicyFileError(f"a value the policy cannot hold: {exc}", source=source) from None
    _check_plain(data, source)
    return policy_from_dict(data, source=source, allow_modules=allow_modules)


MAX_DEPTH = 32
"""Deepest nesting of tables and arrays a policy file may have (the schema needs four levels)."""


def _check_plain(data: Any, source: str) -> None:
    """Refuse nesting deeper than :data:`MAX_DEPTH` and strings (values or keys) holding a lone surrogate."""
    stack: list[tuple[Any, str, int]] = [(data, "", 0)]
    while stack:
        item, path, depth = stack.pop()
        if isinstance(item, str):
            try:
                item.encode("utf-8")
            except UnicodeEncodeError as exc:
                where = path.encode("utf-8", "backslashreplace").decode() or None
                code = ord(item[exc.start])
                raise PolicyFileError(
                    f"a lone surrogate (\\u{code:04x}) is not text", source=source, field=where
                ) from None
        elif isinstance(item, Mapping | list):
            if depth >= MAX_DEPTH:
                raise PolicyFileError(f"nested more than {MAX_DEPTH} levels deep", source=source, field=path or None)
            pairs = item.items() if isinstance(item, Mapping) else ((f"[{i}]", v) for i, v in enumerate(item))
            for key, child in pairs:
                name = str(key) if not path else f"{path}{key}" if str(key).startswith("[") else f"{path}.{key}"
                stack.append((key, name, depth + 1))
                stack.append((child, name, depth + 1))


class _StrictSafeLoader(yaml.SafeLoader):
    """PyYAML's safe loader, refusing what TOML cannot express: non-string and duplicate keys."""


def _construct_mapping(loader: _StrictSafeLoader, node: yaml.MappingNode) -> dict[Any, Any]:
    loader.flatten_mapping(node)
    seen: set[str] = set()
    for key_node, _ in node.value:
        key = loader.construct_object(key_node, deep=True)
        if not isinstance(key, str):
            raise yaml.constructor.ConstructorError(
                None, None, f"key {key!r} is not a string (quote it)", key_node.start_mark
            )
        if key in seen:
            raise yaml.constructor.ConstructorError(None, None, f"duplicate key {key!r}", key_node.start_mark)
        seen.add(key)
    return loader.construct_mapping(node, deep=True)


_StrictSafeLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _construct_mapping)


def _parse_yaml(text: str, source: str) -> Any:
    """The YAML document as Python data; syntax errors become ``PolicyFileError`` with their line."""
    try:
        data = yaml.load(text, Loader=_StrictSafeLoader)  # a SafeLoader subclass: plain data only
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        problem = ", ".join(p for p in (exc.context, exc.problem) if p) or str(exc)
        raise PolicyFileError(
            f"invalid YAML: {problem}", source=source, line=mark.line + 1 if mark is not None else None
        ) from exc
    except yaml.YAMLError as exc:
        raise PolicyFileError(f"invalid YAML: {exc}", source=source) from exc
    if data is None:
        data = {}
    if not isinstance(data, Mapping):
        raise PolicyFileError(
            f"the document must be a mapping of tables ({', '.join(sorted(_TOP_KEYS))}), not {type(data).__name__}",
            source=source,
        )
    return data


def policy_from_dict(data: Mapping[str, Any], *, source: str = "<dict>", allow_modules: Iterable[str] = ()) -> Policy:
    """Build a :class:`Policy` from the parsed form of a policy file.

    Args:
        data: the parsed tables.
        source: the name used in errors.
        allow_modules: as for :func:`load_policy`.

    Raises:
        PolicyFileError: a missing or invalid field (named in the error), or a custom stage from a module
            ``allow_modules`` does not allow (refused before anything is imported).
    """
    unknown = sorted(set(data) - _TOP_KEYS)
    if unknown:
        raise PolicyFileError(
            f"unknown table(s) {unknown}; expected {sorted(_TOP_KEYS)}", source=source, field=unknown[0]
        )
    head = _table(data, "policy", source, required=True)
    unknown = sorted(set(head) - _POLICY_KEYS)
    if unknown:
        raise PolicyFileError(
            f"unknown key {unknown[0]!r} in [policy]; expected {sorted(_POLICY_KEYS)}",
            source=source,
            field=f"policy.{unknown[0]}",
        )
    name = _string(head, "name", source, "policy.name")
    version = _string(head, "version", source, "policy.version")
    declared = _table(data, "stage_classes", source)
    classes = _stage_classes(declared, source, _module_names(allow_modules, source))
    configs = _table(data, "stages", source)
    order = _names(head, "stages", source) if "stages" in head else list(STAGES)
    unsafe_without = _names(head, "unsafe_without", source) if "unsafe_without" in head else []
    for key in declared:
        if key not in order:
            where = "add it to [policy].stages" if "stages" in head else "write [policy].stages with it"
            raise PolicyFileError(
                f"declares custom stage {key!r}, which never runs: {where} where it should run "
                f"(without [policy].stages only the built-in stages run, in order: {', '.join(STAGES)})",
                source=source,
                field=f"stage_classes.{key}",
            )
    extra = sorted(set(configs) - set(order))
    if extra:
        raise PolicyFileError(
            f"configures stage {extra[0]!r}, which policy.stages does not list",
            source=source,
            field=f"stages.{extra[0]}",
        )
    stages = tuple(_stage(n, classes, configs.get(n, {}), source) for n in order)
    problem = stage_list_problem(stages, unsafe_without)
    if problem is not None:
        raise PolicyFileError(problem[1], source=source, field=problem[0])
    contracts = _contracts(data.get("contracts", []), source)
    dup = contracts_problem(contracts)
    if dup is not None:
        raise PolicyFileError(dup[1], source=source, field=f"contracts[{dup[0]}]")
    return Policy(
        name=name,
        version=version,
        stages=stages,
        selection=_build(SelectionParams, _table(data, "selection", source), source, "selection"),
        rehydration=_build(RehydrationParams, _table(data, "rehydration", source), source, "rehydration"),
        contracts=contracts,
        unsafe_without=tuple(unsafe_without),
        retention=_build(rules_from_table, _table(data, "retention", source), source, "retention"),
    )


def _names(head: Mapping[str, Any], key: str, source: str) -> list[str]:
    value = head[key]
    if not isinstance(value, list) or not all(isinstance(s, str) and s for s in value):
        raise PolicyFileError(f"must be a list of stage names, got {value!r}", source=source, field=f"policy.{key}")
    return value


def _table(data: Mapping[str, Any], key: str, source: str, required: bool = False) -> Mapping[str, Any]:
    value = data.get(key)
    if value is None:
        if required:
            hint = ' (a policy file names itself: [policy] name = "…" and version = "…")' if key == "policy" else ""
            raise PolicyFileError(f"missing [{key}] table{hint}", source=source, field=key)
        return {}
    if not isinstance(value, Mapping):
        raise PolicyFileError("must be a table", source=source, field=key)
    return value


def _string(table: Mapping[str, Any], key: str, source: str, field: str) -> str:
    """A required non-empty string; a number is refused, since TOML and YAML would change it (1.10 → 1.1)."""
    value = table.get(key)
    if isinstance(value, int | float) and not isinstance(value, bool):
        raise PolicyFileError(
            f'must be a string; quote it ({key} = "…"): a bare number is read as a number and loses its '
            f"spelling (1.10 becomes 1.1); got the number {value!r}",
            source=source,
            field=field,
        )
    if not isinstance(value, str) or not value:
        raise PolicyFileError("must be a non-empty string", source=source, field=field)
    return value


_MODULE = re.compile(r"[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)*")


def _module_names(allow_modules: Iterable[str], source: str) -> tuple[str, ...]:
    if isinstance(allow_modules, str):
        allow_modules = (allow_modules,)
    names = tuple(allow_modules)
    for name in names:
        if not isinstance(name, str) or not _MODULE.fullmatch(name):
            raise PolicyFileError(f"allow_modules: {name!r} is not a module name such as 'acme.ctx'", source=source)
    return names


def _allowed(module_name: str, allowed: Sequence[str]) -> bool:
    return any(module_name == a or module_name.startswith(a + ".") for a in allowed)


def _stage_classes(table: Mapping[str, Any], source: str, allowed: Sequence[str] = ()) -> dict[str, type]:
    out: dict[str, type] = dict(STAGES)
    for name, target in table.items():
        field = f"stage_classes.{name}"
        if name in STAGES:
            raise PolicyFileError(
                f"{name!r} is a built-in stage; a custom stage needs a name of its own (built-in: {', '.join(STAGES)})",
                source=source,
                field=field,
            )
        if not isinstance(target, str) or ":" not in target:
            raise PolicyFileError("must be an import path 'module:Class'", source=source, field=field)
        module_name, _, attr = target.partition(":")
        if not _MODULE.fullmatch(module_name) or not attr.isidentifier():
            raise PolicyFileError(f"{target!r} is not an import path 'module:Class'", source=source, field=field)
        if not _allowed(module_name, allowed):
            raise PolicyFileError(
                f"custom stage module {module_name!r} is not allowed: a policy file imports code only from "
                f"modules the caller allows (allow_modules=[{module_name!r}] in the API, "
                f"--allow-stage-module {module_name} on the command line)",
                source=source,
                field=field,
            )
        try:
            cls = getattr(importlib.import_module(module_name), attr)
        except (ImportError, AttributeError) as exc:
            raise PolicyFileError(f"cannot import {target!r}: {exc}", source=source, field=field) from exc
        missing = [a for a in ("name", "version", "config", "__call__") if not hasattr(cls, a)]
        if missing:
            raise PolicyFileError(f"{target} is not a Stage (lacks {', '.join(missing)})", source=source, field=field)
        if cls.name != name:
            raise PolicyFileError(
                f"{target} is the stage {cls.name!r}; declare it under that name (the key is the stage's name, "
                "as in [policy].stages and in manifests)",
                source=source,
                field=field,
            )
        out[name] = cls
    return out


def _stage(name: str, classes: Mapping[str, type], config: Any, source: str) -> Stage:
    field = f"stages.{name}"
    cls = classes.get(name)
    if cls is None:
        known = ", ".join(sorted(classes))
        raise PolicyFileError(
            f"unknown stage {name!r}; known: {known} (or declare it in [stage_classes])",
            source=source,
            field="policy.stages",
        )
    if not isinstance(config, Mapping):
        raise PolicyFileError("must be a table of the stage's settings", source=source, field=field)
    stage: Stage = _build(cls, config, source, field)
    return stage


def _build(cls: type, config: Mapping[str, Any], source: str, field: str) -> Any:
    values = dict(config)
    if dataclasses.is_dataclass(cls):
        for f in dataclasses.fields(cls):
            if f.name in values:
                values[f.name] = _typed(values[f.name], f, source, f"{field}.{f.name}")
    try:
        return cls(**values)
    except InvalidSetting as exc:
        raise PolicyFileError(exc.problem, source=source, field=f"{field}.{exc.setting}") from exc
    except PolicyError as exc:
        raise PolicyFileError(str(exc), source=source, field=field) from exc
    except (TypeError, ValueError) as exc:
        raise PolicyFileError(f"invalid settings for {cls.__name__}: {exc}", source=source, field=field) from exc


def _typed(value: Any, f: dataclasses.Field[Any], source: str, field: str) -> Any:
    """Check a setting against the type of its default (bool, int, float, str, array, table)."""
    default = f.default_factory() if f.default_factory is not dataclasses.MISSING else f.default
    number = isinstance(value, int | float) and not isinstance(value, bool)
    expected = None
    if isinstance(default, bool) and not isinstance(value, bool):
        expected = "true or false"
    elif isinstance(default, int) and not isinstance(default, bool) and not (number and isinstance(value, int)):
        expected = "an integer"
    elif isinstance(default, float) and not number:
        expected = "a number"
    elif isinstance(default, str) and not isinstance(value, str):
        expected = "a string"
    elif isinstance(default, Mapping) and not isinstance(value, Mapping):
        expected = "a table"
    elif isinstance(default, tuple) and not isinstance(value, list | tuple):
        expected = "an array"
    if expected is not None:
        raise PolicyFileError(f"must be {expected}, got {value!r}", source=source, field=field)
    return tuple(value) if isinstance(default, tuple) else value


def _contracts(value: Any, source: str) -> tuple[WorkingSetContract, ...]:
    if not isinstance(value, list):
        raise PolicyFileError("must be an array of tables ([[contracts]])", source=source, field="contracts")
    out = []
    for i, raw in enumerate(value):
        field = f"contracts[{i}]"
        if not isinstance(raw, Mapping):
            raise PolicyFileError("must be a table", source=source, field=field)
        out.append(_build(WorkingSetContract, raw, source, field))
    return tuple(out)
