"""The package's import graph: no cycles (imports inside functions count) and no policy → assembler imports.

Every ``import``/``from … import`` of a ``ctxledger`` module anywhere in a module's source (top level, inside
functions, under ``TYPE_CHECKING``) is an edge; a strongly connected component of more than one module is a
cycle and fails the test with its members named.
"""

from __future__ import annotations

import ast
from pathlib import Path

import ctxledger

ROOT = Path(ctxledger.__file__).resolve().parent


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _modules() -> dict[str, Path]:
    return {_module_name(p): p for p in ROOT.rglob("*.py")}


def _resolve(name: str, modules: dict[str, Path]) -> str | None:
    while name and name not in modules:
        name = name.rpartition(".")[0]
    return name or None


def _edges(modules: dict[str, Path]) -> dict[str, set[str]]:
    graph: dict[str, set[str]] = {m: set() for m in modules}
    for mod, path in modules.items():
        package = mod if path.name == "__init__.py" else mod.rpartition(".")[0]
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            targets: list[str] = []
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                    base = ".".join([*anchor, base] if base else anchor)
                targets = [f"{base}.{a.name}" for a in node.names] + [base]
            for target in targets:
                if not target.startswith("ctxledger"):
                    continue
                found = _resolve(target, modules)
                if found and found != mod and not mod.startswith(found + ".") and found != "ctxledger":
                    graph[mod].add(found)
    return graph


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    out: list[list[str]] = []
    counter = [0]

    def visit(v: str) -> None:
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


LAYERED = ("ctxledger.assemble", "ctxledger.policy", "ctxledger.manifest", "ctxledger.budget", "ctxledger.units")
"""The assembly pipeline, the policies, the manifest record and the vocabulary below them."""


def test_the_pipeline_and_the_policies_are_in_no_import_cycle() -> None:
    graph = _edges(_modules())
    mine = [c for c in _cycles(graph) if any(m.startswith(LAYERED) for m in c)]
    assert mine == []


def test_the_package_has_no_import_cycle_at_all() -> None:
    assert _cycles(_edges(_modules())) == []


def test_the_cycle_finder_finds_a_cycle() -> None:
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


def test_policies_and_the_manifest_import_nothing_of_the_assembler() -> None:
    graph = _edges(_modules())
    upward = {
        (mod, dep)
        for mod, deps in graph.items()
        if mod.startswith("ctxledger.policy") or mod == "ctxledger.manifest" or mod == "ctxledger.units"
        for dep in deps
        if dep.startswith("ctxledger.assemble")
    }
    assert upward == set()
