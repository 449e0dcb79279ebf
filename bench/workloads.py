"""Benchmark workloads: one long OpenAI Chat Completions conversation each, written to a JSON file.

* **synthetic** (``synthetic-<n>``): ``../shared/tools/gen_trace.py`` imported by path (never copied),
  ``generate(n, seed)`` → exactly ``n`` messages: one system prompt, user tasks, assistant turns with 1–4
  parallel tool calls, heavy-tailed tool outputs (50–20,000 tokens). Cached as JSON in the cache folder
  because generating 100,000 messages takes about a minute.
* **real, chained**: every trajectory of a real dataset in ``../shared/data``, one after another, as
  one agent session working through many tasks: the first trajectory's system prompt, then each
  trajectory's non-system turns. Tool-call ids are prefixed per trajectory (real logs reuse them), and
  calls that never got a result (mini-swe-agent's final ``submit``) and non-standard roles (its ``exit``
  message) are dropped so the conversation is well formed.

  - ``tau-bench``: ``tau-bench/gpt-4o-airline_tasks0-39.json`` (160 trajectories, MIT, Sierra 2024);
  - ``mini-swe-agent``: ``mini-swe-agent-deepseek/*.traj.json`` (19 trajectories, MIT).

An *event* is one provider message (system, user, assistant or tool).
"""

from __future__ import annotations

import importlib.util
import json
import os
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from types import ModuleType
from typing import Any

from ctxledger.errors import ConfigurationError

Message = dict[str, Any]

REPO_ROOT = Path(__file__).resolve().parents[1]


def shared_dir() -> Path:
    """``$CTXLEDGER_SHARED_DIR``, else ``../shared`` next to the repository (as ``tests/conftest.py``)."""
    env = os.environ.get("CTXLEDGER_SHARED_DIR")
    return Path(env) if env else REPO_ROOT.parent / "shared"


@dataclass(frozen=True, slots=True)
class Workload:
    """One conversation to benchmark.

    Attributes:
        name: table label (``synthetic-10000``, ``tau-bench``, ``mini-swe-agent``).
        kind: ``synthetic`` or ``real``.
        path: the OpenAI-format JSON file (a list of messages) to import.
        messages: the same messages in memory (for the peers, which never read the store).
        source: where the data came from (for the report).
    """

    name: str
    kind: str
    path: Path
    messages: list[Message]
    source: str

    @property
    def events(self) -> int:
        """Number of messages."""
        return len(self.messages)


@cache
def gen_trace_module(shared: Path) -> ModuleType:
    """Import ``<shared>/tools/gen_trace.py`` by path.

    Raises:
        ConfigurationError: the generator is not there.
    """
    path = shared / "tools" / "gen_trace.py"
    if not path.is_file():
        raise ConfigurationError(f"synthetic trace generator not found at {path}; set CTXLEDGER_SHARED_DIR")
    spec = importlib.util.spec_from_file_location("ctxledger_bench_gen_trace", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _write_json(path: Path, value: Any) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(value), encoding="utf-8")
    tmp.replace(path)


def synthetic(n: int, cache_dir: Path, *, seed: int = 0, shared: Path | None = None) -> Workload:
    """``n`` synthetic messages from ``gen_trace.generate(n, seed)``, checked well formed, cached as JSON."""
    shared = shared or shared_dir()
    path = cache_dir / f"gen_trace_n{n}_seed{seed}.json"
    if path.is_file():
        messages = json.loads(path.read_text(encoding="utf-8"))
    else:
        gen = gen_trace_module(shared)
        messages = gen.generate(n, seed=seed)
        gen.check_well_formed(messages)
        _write_json(path, messages)
    return Workload(f"synthetic-{n}", "synthetic", path, messages, f"gen_trace.py --n {n} --seed {seed}")


def _answered(messages: Sequence[Mapping[str, Any]]) -> set[str]:
    return {str(m["tool_call_id"]) for m in messages if m.get("role") == "tool" and m.get("tool_call_id")}


def _clean_turn(message: Mapping[str, Any], prefix: str, answered: set[str]) -> Message | None:
    """A provider-clean copy of one message (ids prefixed), or ``None`` to drop it."""
    role = message.get("role")
    if role not in ("user", "assistant", "tool"):
        return None
    out: Message = {"role": role, "content": message.get("content")}
    if role == "tool":
        if message.get("tool_call_id") not in answered:
            return None
        out["tool_call_id"] = prefix + str(message["tool_call_id"])
        if message.get("name"):
            out["name"] = message["name"]
        return out
    calls = [c for c in message.get("tool_calls") or () if c.get("id") in answered]
    if calls:
        out["tool_calls"] = [{**c, "id": prefix + str(c["id"])} for c in calls]
    elif role == "assistant" and not out["content"]:
        return None
    return out


def chain(trajectories: Iterable[Sequence[Mapping[str, Any]]]) -> list[Message]:
    """Chain trajectories into one conversation (see the module docstring).

    Raises:
        ConfigurationError: no trajectory, or the first has no system prompt.
    """
    out: list[Message] = []
    for k, traj in enumerate(trajectories):
        if not out:
            system = next((m for m in traj if m.get("role") == "system"), None)
            if system is None:
                raise ConfigurationError("the first trajectory has no system prompt")
            out.append({"role": "system", "content": system["content"]})
        answered = _answered(traj)
        for message in traj:
            turn = _clean_turn(message, f"t{k}_", answered)
            if turn is not None:
                out.append(turn)
    if not out:
        raise ConfigurationError("no trajectory to chain")
    return out


def tau_bench_trajectories(shared: Path) -> list[dict[str, Any]]:
    """The tau-bench records ``{task_id, trial, reward, info, traj}``, sorted by (task, trial)."""
    path = shared / "data" / "tau-bench" / "gpt-4o-airline_tasks0-39.json"
    records = json.loads(path.read_text(encoding="utf-8"))
    return sorted(records, key=lambda r: (r["task_id"], r["trial"]))


def tau_bench(cache_dir: Path, shared: Path | None = None) -> Workload:
    """All 160 tau-bench airline trajectories chained into one conversation."""
    shared = shared or shared_dir()
    messages = chain(r["traj"] for r in tau_bench_trajectories(shared))
    path = cache_dir / "tau_bench_chained.json"
    _write_json(path, messages)
    return Workload("tau-bench", "real", path, messages, "tau-bench gpt-4o airline, 160 trajectories chained")


def mini_swe_agent(cache_dir: Path, shared: Path | None = None) -> Workload:
    """All 19 mini-swe-agent (deepseek-chat) trajectories chained into one conversation."""
    shared = shared or shared_dir()
    files = sorted((shared / "data" / "mini-swe-agent-deepseek").glob("*.traj.json"))
    messages = chain(json.loads(f.read_text(encoding="utf-8"))["messages"] for f in files)
    path = cache_dir / "mini_swe_agent_chained.json"
    _write_json(path, messages)
    return Workload(
        "mini-swe-agent", "real", path, messages, f"mini-swe-agent deepseek-chat, {len(files)} trajectories chained"
    )
