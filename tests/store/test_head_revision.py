"""The schema revision a store is checked against without Alembic is the shipped history's head."""

from __future__ import annotations

import subprocess
import sys

from ctxledger.store._migrate import HEAD_REVISION, head_revision


def test_head_revision_constant_is_the_history_head() -> None:
    assert head_revision() == HEAD_REVISION


def test_opening_a_current_store_does_not_load_alembic(tmp_path) -> None:
    url = f"sqlite:///{tmp_path / 'store.db'}"
    code = (
        "import sys\n"
        "from ctxledger.store import open_store\n"
        f"open_store({url!r}).close()\n"  # creates and migrates: Alembic runs
        "before = 'alembic' in sys.modules\n"
        "for name in [m for m in sys.modules if m == 'alembic' or m.startswith('alembic.')]:\n"
        "    del sys.modules[name]\n"
        f"open_store({url!r}).close()\n"
        "print(before, 'alembic' in sys.modules)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.split() == ["True", "False"]
