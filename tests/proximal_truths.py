"""The self-check's ground truth of one node's deletion, for the tests of the step estimate."""

from __future__ import annotations

import torch

from bind_core.debiasing.proximal_truth import proximal_reoptimize
from bind_core.debiasing.validation import gammas
from bind_core.influence.functional import FunctionalModel
from bind_core.influence.step import Stepper
from bind_core.training.fit import TrainedModel


def proximal_model(model: TrainedModel, fm: FunctionalModel, stepper: Stepper, position: int) -> TrainedModel:
    """The model re-optimised by the proximal objective without the training node at ``position``, on the rebuilt
    graph, in the stepper's curvature's coordinates (raises ``NonFiniteError`` where it has no minimum near θ̂)."""
    graph = fm.graph
    reduced, _ = graph.without_nodes(graph.train_idx[position : position + 1])
    return proximal_reoptimize(
        model,
        reduced,
        num_train=stepper.m,
        damping=stepper.mu,
        anchor=graph,
        coordinates=stepper.curvature.coordinates(),
        on_anchor=fm,
    )


def proximal_truth(model: TrainedModel, fm: FunctionalModel, stepper: Stepper, position: int) -> torch.Tensor:
    """``[ΔΓ_SP, ΔΓ_EO]`` of the proximal re-optimisation without the training node at ``position``
    (:func:`proximal_model`)."""
    graph = fm.graph
    reduced, _ = graph.without_nodes(graph.train_idx[position : position + 1])
    again = proximal_model(model, fm, stepper, position)
    before, after = gammas(model, graph), gammas(again, reduced)
    return torch.tensor([after[0] - before[0], after[1] - before[1]], dtype=torch.float64)
