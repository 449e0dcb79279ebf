"""The README's Benchmarks section builds the store ``bench/warm_append.py`` and ``bench/first_call.py`` read."""

from __future__ import annotations

import ast
import re
import shlex
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _recipe() -> list[list[str]]:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    section = readme.split("\n## Benchmarks\n", 1)[1].split("\n## ", 1)[0]
    blocks = re.findall(r"```bash\n(.*?)```", section, flags=re.S)
    block = next(b for b in blocks if "warm_append.py" in b)
    return [shlex.split(line) for line in block.replace("\\\n", " ").splitlines() if line.strip()]


def _options(script: str) -> set[str]:
    tree = ast.parse((ROOT / "bench" / script).read_text(encoding="utf-8"))
    return {
        arg.value
        for node in ast.walk(tree)
        if isinstance(node, ast.Call) and getattr(node.func, "attr", None) == "add_argument"
        for arg in node.args
        if isinstance(arg, ast.Constant) and isinstance(arg.value, str) and arg.value.startswith("--")
    }


def test_the_readme_builds_the_10k_store_as_the_scripts_help_says() -> None:
    build, warm, first = _recipe()
    assert build[:2] == ["python", "bench/run.py"] and {"--sizes", "--work-dir"} <= set(build)
    assert {a for a in build if a.startswith("--")} <= _options("run.py")
    work = Path(build[build.index("--work-dir") + 1])
    store = work / f"sqlite-synthetic-{build[build.index('--sizes') + 1]}"
    for command, script in ((warm, "warm_append.py"), (first, "first_call.py")):
        start = next(i for i, a in enumerate(command) if Path(script).stem in a) + 1
        positional = [a for a in command[start:] if not a.startswith("--") and not a.isdigit() and a != "gpt-4o"]
        assert positional == [f"sqlite:///{store / 'bench.db'}", str(store / "blobs"), f"bench-{store.name[7:]}"]
        assert {a for a in command if a.startswith("--")} <= _options(script)
    helped = " ".join((ROOT / "bench" / "warm_append.py").read_text(encoding="utf-8").split())
    assert " ".join(build) in helped  # the same recipe as the script's --help
