"""Shared pytest fixtures."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="session")
def data_root() -> Path:
    """The folder of the paper's datasets: ``$BIND_DATA_ROOT``, else ``<repo>/../shared/datasets``.

    Tests that use it are skipped when the folder does not exist.
    """
    root = Path(os.environ.get("BIND_DATA_ROOT", REPO_ROOT.parent / "shared" / "datasets"))
    if not root.is_dir():
        pytest.skip(f"dataset folder {root} not found (set BIND_DATA_ROOT)")
    return root
