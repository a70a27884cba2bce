"""The Newton finish's and the influence solver's Hessian by rows, formed a block of rows per backward pass
(issue 36, item 2): the same Hessian as one row at a time, for the message-passing models, with and without the
activations expanded to second order; one row at a time stays the CPU's default."""

from __future__ import annotations

from typing import Any

import pytest
import torch

from bind_core.data.datasets import synthetic
from bind_core.models.gnn import ModelConfig
from bind_core.training.fit import TrainConfig, train
from bind_core.training.hessian import dense_hessian_by_rows, row_batch
from bind_core.training.objective import flat_objective


@pytest.mark.parametrize("arch", ["gcn", "sage", "gin"])
@pytest.mark.parametrize("expand", [False, True])
def test_rows_in_blocks_equal_rows_one_by_one(arch: str, expand: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    graph = synthetic(300, seed=3)
    model = train(graph, TrainConfig(epochs=20, polish=False), ModelConfig(arch=arch, layers=2, hidden=6))
    model.module.double()
    model.module.expand_activations = expand
    objective, theta, _ = flat_objective(model.module, model.prepare(graph), graph, model.train_config.weight_decay)
    one = dense_hessian_by_rows(objective, theta, batch=1)
    seen: list[float] = []
    batched: list[bool] = []
    grad = torch.autograd.grad

    def counted(*args: Any, **kwargs: Any) -> Any:
        out = grad(*args, **kwargs)
        batched.append(bool(kwargs.get("is_grads_batched")))
        return out

    monkeypatch.setattr(torch.autograd, "grad", counted)
    blocks = dense_hessian_by_rows(objective, theta, batch=16, progress=seen.append)
    full, rest = divmod(theta.numel(), 16)
    assert len(seen) == full + (rest > 0)
    assert sum(batched) == full + (rest > 1)  # every block of 2 or more rows in one batched pass, none row by row
    assert torch.allclose(blocks, one, rtol=0.0, atol=1e-12 * float(one.abs().max()))
    assert blocks.shape == (theta.numel(), theta.numel()) and seen[-1] == 1.0


def test_one_row_at_a_time_is_the_cpus_default() -> None:
    assert row_batch(torch.device("cpu")) == 1 and row_batch(torch.device("cuda")) > 1
