"""A supplied model's fit of its own training nodes against a constant's (``bind_core.training.fit_check``)."""

from __future__ import annotations

import dataclasses
import math

import pytest
import torch

from bind_core.data.datasets import synthetic
from bind_core.pipeline.output_order import supplied_model_doubt, supplied_model_warnings
from bind_core.pipeline.results import SuppliedModel
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
    # its outputs carry the labels: overconfident, told apart, not a doubt of its inputs
    assert accurate.worse_than_guess and accurate.overconfident and not accurate.suspect
    assert accurate.text is not None and "worse than guessing every class alike" in accurate.text
    assert "classifies them clearly better than the commonest label" in accurate.text
    assert not found.worse_than_guess and not found.suspect and not same.worse_than_guess  # the constant is no worse
    assert not found.overconfident and not same.overconfident and not inverted.overconfident
    # on features the reader scaled, the same outputs keep the doubt of the inputs (the scaling may be what differs)
    scaled = dataclasses.replace(graph, feature_ranges=((0.0, 1.0),) * graph.num_features)
    doubted = check_training_fit(overconfident, scaled)
    assert doubted.worse_than_guess and not doubted.overconfident and doubted.suspect


def test_worse_than_the_guess_and_barely_above_the_constant_is_suspect() -> None:
    """Worse than the guess by cross-entropy, with an accuracy within 3 standard errors of the commonest label's share
    (as a model fed inputs scaled otherwise gives: 78.7% against 78.6%): its inputs are doubted, as before."""
    graph = synthetic(200, seed=1)
    train, y = graph.train_idx, graph.y.long()
    count = train.numel()
    shares = torch.bincount(y[train], minlength=2).double() / count
    majority = int(shares.argmax())
    proba = torch.full((graph.num_nodes, 2), 1e-9, dtype=torch.float64)
    proba[:, majority] = 1 - 1e-9  # every node the commonest label, confidently
    right = train[y[train] != majority][:2]  # and two more right: just above the constant's accuracy
    proba[right] = proba[right].flip(1)
    found = check_training_fit(proba, graph)
    assert found.accuracy is not None and found.majority is not None and found.accuracy > found.majority
    sigma = math.sqrt(found.majority * (1 - found.majority) / count)
    assert found.accuracy - found.majority < 3 * sigma
    assert found.worse_than_guess and not found.no_better and not found.overconfident and found.suspect
    assert found.text is not None and "scale off" in found.text  # the advice: check what it is fed


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


def test_an_overconfident_model_warns_apart_and_keeps_its_verdict() -> None:
    """The audit's reading of the record: ``overconfident`` is its own warning code and no doubt of the inputs (no
    verdict withheld); worse than the guess without it is ``training_fit`` and withholds the verdict."""
    graph = synthetic(200, seed=1)
    y = graph.y.long()
    proba = torch.nn.functional.one_hot(y, 2).double() * 0.9 + 0.05
    wrong = graph.train_idx[:3]
    proba[wrong] = torch.where(torch.nn.functional.one_hot(y[wrong], 2).bool(), 1e-12, 1 - 1e-12).double()
    fit = check_training_fit(proba, graph)
    assert fit.overconfident
    record = SuppliedModel(polished_by_service=False, training_fit=fit)
    (warned,) = supplied_model_warnings(record)
    assert warned.code == "overconfident" and supplied_model_doubt(record) is None
    doubted = SuppliedModel(
        polished_by_service=False, training_fit=dataclasses.replace(fit, overconfident=False, text="fits badly")
    )
    assert [w.code for w in supplied_model_warnings(doubted)] == ["training_fit"]
    assert "does no better than guessing every class alike" in str(supplied_model_doubt(doubted))
