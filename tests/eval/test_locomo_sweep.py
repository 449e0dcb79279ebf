"""The LoCoMo relevance sweep (``bench/locomo_relevance_sweep.py``) recomputes the default policy's relevance:
its empty variant must give the scores the assembler gave for the same question."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import numpy as np
import pytest

from ctxledger.assemble.semantic import default_embedder

ROOT = Path(__file__).resolve().parents[2]

# the sweep embeds every question (it refuses to run without the model); the README's test command installs it
pytestmark = pytest.mark.skipif(default_embedder() is None, reason="the semantic extra is not installed")


def _sweep():
    spec = importlib.util.spec_from_file_location(
        "locomo_relevance_sweep", ROOT / "bench" / "locomo_relevance_sweep.py"
    )
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def test_the_empty_variant_is_the_assembler_relevance(data_dir):
    sweep = _sweep()
    [conv] = sweep.load(data_dir / "locomo" / "locomo10_conv0-6.json", [0], False, check=12)
    checked = [q for q in conv["questions"] if q["assembled"] is not None]
    assert len(checked) == 12
    for q in checked:
        np.testing.assert_allclose(sweep.relevance(conv, q, {}), q["assembled"], atol=1e-5)
    # a variant is a different relevance, not the same one under another name
    assert any(not np.allclose(sweep.relevance(conv, q, {"window": 0}), q["assembled"]) for q in checked)
