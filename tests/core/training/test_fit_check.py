"""A supplied model's fit of its own training nodes against a constant's (``bind_core.training.fit_check``)."""

from __future__ import annotations

import math

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
    accurate = check_training_fit(overconfident, graph)  # most nodes right, but worse than the guess by its loss
    assert accurate.accuracy is not None and accurate.majority is not None and accurate.accuracy > accurate.majority
    assert not accurate.no_better
    assert accurate.guess == pytest.approx(math.log(2)) and accurate.loss is not None and accurate.loss > accurate.guess
    assert accurate.worse_than_guess and accurate.suspect
    assert accurate.text is not None and "worse than guessing every class alike" in accurate.text
    assert "scale off" in accurate.text  # the same advice: check what it is fed
    assert not found.worse_than_guess and not found.suspect and not same.worse_than_guess  # the constant is no worse


def test_a_confident_model_with_a_few_training_nodes_wrong_is_not_flagged() -> None:
    """A fit model gets some training nodes wrong; only a loss above ln C (as no model trained with cross-entropy on
    these inputs ends with) is flagged, not a loss above the constant's alone."""
    graph = synthetic(200, seed=1)
    y = graph.y.long()
    proba = torch.nn.functional.one_hot(y, 2).double() * 0.98 + 0.01
    wrong = graph.train_idx[:5]
    proba[wrong] = proba[wrong].flip(1)  # five training nodes wrong at 0.99
    fit = check_training_fit(proba, graph)
    assert fit.loss is not None and fit.guess is not None and fit.loss < fit.guess
    assert not fit.suspect and fit.text is None
