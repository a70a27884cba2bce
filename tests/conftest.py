"""Shared pytest fixtures."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[1]
TESTS = Path(__file__).resolve().parent
SERVICE_DIRS = (("app", "api"), ("deploy",), ("integration",), ("security",), ("worker",))
"""Tests that talk to Postgres or Redis, start service processes or restart the servers (the fault tests): marked
``integration`` and kept on one xdist worker (``--dist loadgroup``), so that a restarted Redis or a stopped Postgres
never pulls the ground from under another test."""


@pytest.hookimpl(tryfirst=True)  # before xdist reads the groups (its own hook of this name)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        parts = item.path.relative_to(TESTS).parts
        if any(parts[: len(top)] == top for top in SERVICE_DIRS):
            item.add_marker(pytest.mark.integration)
            item.add_marker(pytest.mark.xdist_group("services"))


@pytest.fixture(scope="session", autouse=True)
def _one_torch_thread() -> None:
    """The tests' graphs are tiny: one thread is faster and does not fight the worker processes for cores."""
    import torch

    torch.set_num_threads(1)


@pytest.fixture(scope="session")
def data_root() -> Path:
    """The folder of the paper's datasets: ``$BIND_DATA_ROOT``, else ``<repo>/../shared/datasets``.

    Tests that use it are skipped when the folder does not exist.
    """
    root = Path(os.environ.get("BIND_DATA_ROOT", REPO_ROOT.parent / "shared" / "datasets"))
    if not root.is_dir():
        pytest.skip(f"dataset folder {root} not found (set BIND_DATA_ROOT)")
    return root


@pytest.fixture(scope="session")
def small_graph():  # type: ignore[no-untyped-def]
    """An 800-node synthetic biased graph split like the paper (100 training nodes per class, 25% test)."""
    from bind_core.data.datasets import synthetic

    return synthetic(800, seed=3, train_per_class=100)


@pytest.fixture(scope="session")
def small_model(small_graph):  # type: ignore[no-untyped-def]
    """The paper's one-layer GCN trained (200 epochs, then polished) on ``small_graph``."""
    from bind_core.training.fit import TrainConfig, train

    return train(small_graph, TrainConfig(epochs=200, seed=0))
