"""Fixtures for the importer tests: the real datasets, parsed once per session."""

from __future__ import annotations

from pathlib import Path

import pytest

from ctxledger.ingest import ImportBatch, parse_file


@pytest.fixture(scope="session")
def tau_path(data_dir: Path) -> Path:
    """The tau-bench airline trajectories (160 trajectories)."""
    return data_dir / "tau-bench" / "gpt-4o-airline_tasks0-39.json"


@pytest.fixture(scope="session")
def tau_batch(tau_path: Path) -> ImportBatch:
    """The tau-bench file, parsed."""
    return parse_file(tau_path, "tau-bench")


@pytest.fixture(scope="session")
def locomo_path(data_dir: Path) -> Path:
    """The LoCoMo development subset (7 samples)."""
    return data_dir / "locomo" / "locomo10_conv0-6.json"


@pytest.fixture(scope="session")
def locomo_batch(locomo_path: Path) -> ImportBatch:
    """The LoCoMo file, parsed."""
    return parse_file(locomo_path, "locomo")


@pytest.fixture(scope="session")
def mini_swe_paths(data_dir: Path) -> list[Path]:
    """Every mini-swe-agent trajectory (19 files)."""
    return sorted((data_dir / "mini-swe-agent-deepseek").glob("*.traj.json"))


@pytest.fixture(scope="session")
def swe_agent_paths(data_dir: Path) -> list[Path]:
    """Every SWE-agent ``.traj`` file (18 files)."""
    return sorted((data_dir / "swe-agent-demos").rglob("*.traj"))


@pytest.fixture(scope="session")
def toolbench_paths(data_dir: Path) -> list[Path]:
    """Every ToolBench answer file (12 files)."""
    return sorted((data_dir / "toolbench-examples" / "answer").rglob("*.json"))


@pytest.fixture(scope="session")
def bfcl_paths(data_dir: Path) -> list[Path]:
    """Every BFCL memory prerequisite-conversation file (4 scenarios)."""
    return sorted((data_dir / "bfcl-memory" / "memory_prereq_conversation").glob("*.json"))
