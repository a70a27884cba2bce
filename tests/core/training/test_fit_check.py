"""A supplied model's fit of its own training nodes against a constant's (``bind_core.training.fit_check``)."""

from __future__ import annotations

import pytest
import torch

from bind_core.data.datasets import synthetic
from bind_core.training.fit_check import check_training_fit


def test_a_model_no_better_than_a_constant_is_told_from_one_that_fits() -> None:
    graph = synthetic(200, seed=1)
    y = graph.y.long()
    fits = torch.nn.functional.one_hot(y, 2).double() * 0.9 + 0.05  # right, confidently
    found = check_training_fit(fits, graph)
    assert not found.no_better and found.text is None
    assert found.loss is not None and found.constant is not None and found.loss < found.constant
    assert found.accuracy == 1.0 and found.nodes == graph.train_idx.numel()
    train = graph.train_idx
    shares = torch.bincount(y[train], minlength=2).double() / train.numel()
    constant = shares.expand(graph.num_nodes, 2).clone()  # the constant itself: no better, by definition
    same = check_training_fit(constant, graph)
    assert same.no_better and same.loss == pytest.approx(same.constant, rel=1e-12)
    assert same.majority == float(shares.max())
    inverted = check_training_fit(fits.flip(1), graph)  # every training node wrong, as on inputs it never saw
    assert inverted.no_better and inverted.text is not None and "no better than a constant" in inverted.text
    assert inverted.accuracy == 0.0
    overconfident = fits.clone()
    wrong = train[:3]
    overconfident[wrong] = torch.tensor([1e-12, 1 - 1e-12], dtype=torch.float64) * (y[wrong] == 0).unsqueeze(1) + (
        torch.tensor([1 - 1e-12, 1e-12], dtype=torch.float64) * (y[wrong] == 1).unsqueeze(1)
    )
    accurate = check_training_fit(overconfident, graph)  # a large loss but most nodes right: not flagged
    assert accurate.accuracy is not None and accurate.majority is not None and accurate.accuracy > accurate.majority
    assert not accurate.no_better
