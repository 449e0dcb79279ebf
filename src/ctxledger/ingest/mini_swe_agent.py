"""Importer for mini-swe-agent trajectories (format ``"mini-swe-agent"``).

Source: SWE-agent/mini-swe-agent ``*.traj.json`` (``trajectory_format: mini-swe-agent-1.1``):
``{info, messages, trajectory_format, instance_id}``. ``messages`` are OpenAI Chat Completions
messages with an ``extra`` object, plus a final non-standard ``role: "exit"`` message. Mapping, on
top of :mod:`ctxledger.ingest._chat`:

* each assistant message's ``extra.response`` (the raw chat.completion) → a ``ModelRun`` appended just
  before it (``provider`` from the configured model name's ``provider/`` prefix, ``model`` from the
  response, ``usage`` = the provider-reported ``prompt_tokens``, ``completion_tokens``, ``total_tokens``
  and ``cached_prompt_tokens``); the message's ``owner_model_run_id`` points to it. The bulky response
  itself is dropped; its id, creation time, finish reason and fingerprint go to the run's ``meta``;
* a ``tool`` result is ``failed`` when ``extra.returncode`` (else ``<returncode>`` in the text) is not 0;
  ``extra.raw_output`` (the untruncated output) is kept as its own blob, named by
  ``meta["raw_output_sha256"]``; other ``extra`` fields go to ``meta``;
* ``role: "exit"`` → ``Checkpoint(run_id=instance_id, state={"exit_status", "submission"})``;
* ``created_at`` from ``extra.timestamp`` / ``response.created`` (POSIX seconds, UTC).

The final submit call has no ``tool`` message and stays a pending ``ToolCall``. Errors name the
message index in ``messages``.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from datetime import datetime
from typing import Any

from ctxledger.ingest._batch import ImportBatch
from ctxledger.ingest._builder import ConversationBuilder, ParseOptions, epoch_time
from ctxledger.ingest._chat import ChatMapper
from ctxledger.ingest._fields import Loc, as_object, optional, require
from ctxledger.ingest._load import Loaded
from ctxledger.records import Checkpoint, ModelRun, ToolStatus, Trust

FORMAT = "mini-swe-agent"
_RETURNCODE = re.compile(r"<returncode>(-?\d+)</returncode>")
_DROPPED_EXTRA = frozenset({"response", "raw_output"})
_USAGE_KEYS = ("prompt_tokens", "completion_tokens", "total_tokens")


class MiniSweMapper(ChatMapper):
    """Chat mapping with mini-swe-agent's ``extra`` fields, model runs and exit message."""

    def __init__(self, builder: ConversationBuilder, *, instance_id: str, model_name: str) -> None:
        """Map one trajectory of ``instance_id`` run with ``model_name`` (``provider/model``)."""
        super().__init__(builder, assistant_model=model_name or None)
        self._instance_id = instance_id
        self._provider = model_name.split("/", 1)[0] if "/" in model_name else ""

    def timestamp(self, msg: Mapping[str, Any], loc: Loc) -> datetime | None:
        """``extra.timestamp`` (POSIX seconds), if present."""
        value = _extra(msg, loc).get("timestamp")
        return epoch_time(value) if isinstance(value, int | float) and not isinstance(value, bool) else None

    def extra_meta(self, role: str, msg: Mapping[str, Any], loc: Loc) -> dict[str, Any]:
        """Non-schema fields and ``extra`` (minus the raw response; ``raw_output`` becomes a blob)."""
        extra = _extra(msg, loc)
        meta = {k: v for k, v in super().extra_meta(role, msg, loc).items() if k != "extra"}
        meta.update({k: v for k, v in extra.items() if k not in _DROPPED_EXTRA})
        raw = optional(extra, "raw_output", str, loc.child("extra"), "a string")
        if raw is not None:
            data = raw.encode("utf-8")
            meta["raw_output_sha256"] = self.b.put_blob(data, "text/plain; charset=utf-8")
            meta["raw_output_bytes"] = len(data)
        return meta

    def model_run(self, msg: Mapping[str, Any], loc: Loc) -> str | None:
        """Append the ``ModelRun`` of ``extra.response`` and return its id (``None`` without one)."""
        rloc = loc.child("extra.response")
        response = optional(_extra(msg, loc), "response", dict, loc.child("extra"), "an object")
        if response is None:
            return None
        created = optional(response, "created", (int, float), rloc, "a number")
        run = self.b.add(
            ModelRun,
            rloc,
            owner=self.assistant,
            trust=Trust.VERIFIED_INTERNAL,
            at=None if created is None else epoch_time(created),
            meta=_response_meta(response, rloc),
            provider=self._provider,
            model=optional(response, "model", str, rloc, "a string", default=""),
            usage=_usage(response, rloc),
        )
        return run.id

    def result_status(self, msg: Mapping[str, Any], text: str, loc: Loc) -> ToolStatus:
        """``failed`` when the command's return code is not 0."""
        code = optional(_extra(msg, loc), "returncode", int, loc.child("extra"), "a number")
        if code is None:
            match = _RETURNCODE.search(text)
            code = int(match.group(1)) if match else 0
        return ToolStatus.SUCCEEDED if code == 0 else ToolStatus.FAILED

    def other_role(self, role: str, msg: Mapping[str, Any], loc: Loc) -> None:
        """``exit`` → a Checkpoint holding the exit status and the submission."""
        if role != "exit":
            super().other_role(role, msg, loc)
            return
        extra = _extra(msg, loc)
        state = {k: extra.get(k) for k in ("exit_status", "submission")}
        meta = {k: v for k, v in extra.items() if k not in state}
        self.b.add(
            Checkpoint,
            loc,
            owner=self.assistant,
            trust=Trust.VERIFIED_INTERNAL,
            at=self.timestamp(msg, loc),
            meta=meta,
            run_id=self._instance_id,
            state=state,
        )


def parse(loaded: Loaded, options: ParseOptions) -> ImportBatch:
    """Parse one mini-swe-agent trajectory file.

    Raises:
        InputError: bad input (names file, message index and field).
    """
    top = as_object(loaded.value, Loc(options.source), "a trajectory object")
    messages = require(top, "messages", list, Loc(options.source), "an array of messages")
    instance_id = optional(top, "instance_id", str, Loc(options.source), "a string", default=options.stem)
    info = optional(top, "info", dict, Loc(options.source), "an object", default={})
    model_name = _model_name(info)
    builder = ConversationBuilder(
        options.single_id(),
        options,
        FORMAT,
        title=instance_id,
        meta=_conversation_meta(top, info, model_name),
    )
    first = _first_time(messages)
    if first is not None:
        builder.start_clock(first)
    mapper = MiniSweMapper(builder, instance_id=instance_id, model_name=model_name)
    for j, msg in enumerate(messages):
        mapper.feed(msg, Loc(options.source, j))
        options.progress(j + 1, len(messages))
    mapper.close()
    return ImportBatch(source=options.source, format=FORMAT, conversations=[builder.finish()])


def _extra(msg: Mapping[str, Any], loc: Loc) -> Mapping[str, Any]:
    extra: Mapping[str, Any] = optional(msg, "extra", dict, loc, "an object", default={})
    return extra


def _usage(response: Mapping[str, Any], loc: Loc) -> dict[str, int]:
    usage = require(response, "usage", dict, loc, "an object")
    uloc = loc.child("usage")
    out = {key: require(usage, key, int, uloc, "an integer") for key in _USAGE_KEYS[:2]}
    total = optional(usage, "total_tokens", int, uloc, "an integer")
    if total is not None:
        out["total_tokens"] = total
    details = optional(usage, "prompt_tokens_details", dict, uloc, "an object", default={})
    cached = details.get("cached_tokens")
    if isinstance(cached, int) and not isinstance(cached, bool):
        out["cached_prompt_tokens"] = cached
    return out


def _response_meta(response: Mapping[str, Any], loc: Loc) -> dict[str, Any]:
    choices = optional(response, "choices", list, loc, "an array", default=[])
    finish = choices[0].get("finish_reason") if choices and isinstance(choices[0], dict) else None
    return {
        "response_id": response.get("id"),
        "created": response.get("created"),
        "finish_reason": finish,
        "system_fingerprint": response.get("system_fingerprint"),
    }


def _model_name(info: Mapping[str, Any]) -> str:
    config = info.get("config")
    model = config.get("model") if isinstance(config, dict) else None
    name = model.get("model_name") if isinstance(model, dict) else None
    return name if isinstance(name, str) else ""


def _conversation_meta(top: Mapping[str, Any], info: Mapping[str, Any], model_name: str) -> dict[str, Any]:
    kept = {k: v for k, v in info.items() if k not in ("config", "submission")}
    return {
        **kept,
        "instance_id": top.get("instance_id"),
        "trajectory_format": top.get("trajectory_format"),
        "model_name": model_name or None,
    }


def _first_time(messages: list[Any]) -> datetime | None:
    for msg in messages:
        extra = msg.get("extra") if isinstance(msg, dict) else None
        if not isinstance(extra, dict):
            continue
        response = extra.get("response")
        created = response.get("created") if isinstance(response, dict) else None
        for value in (created, extra.get("timestamp")):
            if isinstance(value, int | float) and not isinstance(value, bool):
                return epoch_time(value)
    return None
