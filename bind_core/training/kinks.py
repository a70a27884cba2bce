"""Minima on ReLU kinks: where a non-smooth model's polish stalls, and whether the weights can still be audited.

With ReLU between layers (or in GIN's MLPs, or GAT's leaky-ReLU attention scores) the training objective is smooth
inside each region of fixed activation pattern and has kinks on the surfaces ``z_ik(θ) = 0``. Its Hessian exists
almost everywhere, but a minimum often lies *on* such surfaces: a pre-activation pinned at 0 because moving it
either way raises the objective. PyTorch differentiates ReLU with slope 0 there (1 just above 0), so the gradient
the polish reads does not vanish and L-BFGS's line search stalls (a two-layer GraphSAGE on ``synthetic(300)``:
largest gradient entry 1.1e-4, with 4 of 4800 hidden pre-activations within 1e-8 of 0).

:func:`kink_stall` tells such a point from one the polish merely left early: a fresh L-BFGS run from the weights
(the polish's own, without the Newton finish) finds no descent. The audit's stationarity check
(:mod:`bind_core.training.stationarity`) then accepts the weights as a minimum on the kinks, with a warning, instead of
refusing them; weights from which the objective still descends are refused as before.
"""

from __future__ import annotations

import copy

import torch
from torch import Tensor

from bind_core.data.graph import Graph
from bind_core.models.gnn import GNN, ModelConfig
from bind_core.models.propagation import GraphInputs
from bind_core.training.fit import TrainedModel
from bind_core.training.polish import polish
from bind_core.training.records import KinkStall

PINNED = 1e-6
"""A pre-activation with ``|z| ≤ PINNED·max(1, max|z| of its layer)`` counts as pinned at the kink."""

NO_DESCENT = 1e-12
"""A restarted L-BFGS that lowers the objective by at most ``NO_DESCENT·max(1, |L|)`` found no descent."""

RESTART_ITERATIONS = 200


def has_kinks(config: ModelConfig) -> bool:
    """Whether the model's function has kinks a minimum can sit on (ReLU between layers, before an activated head or
    in GIN's MLPs, GAT's
    leaky-ReLU scores); ELU's first derivative is continuous, so its minima are ordinary stationary points."""
    relu = config.activation == "relu" and (config.layers > 1 or config.head_activation or config.arch == "gin")
    leaky = config.arch == "gat" and (config.attention == "leaky_relu" or config.activation == "relu")
    return relu or leaky


def pinned_count(module: GNN, inputs: GraphInputs) -> int:
    """How many hidden pre-activations (between layers) are pinned at ReLU's kink."""
    if module.config.activation != "relu":
        return 0
    count, h = 0, inputs.x
    with torch.no_grad():
        for i in range(len(module.convs) - 1):
            out: Tensor = module.layer(i, h, inputs)
            z = module.pre_activation(i, out)
            count += int((z.abs() <= PINNED * max(1.0, float(z.abs().max()))).sum())
            h = module.activate(i, out)
    return count


def kink_stall(trained: TrainedModel, graph: Graph) -> KinkStall | None:
    """For a model with kinks: whether its weights are a minimum on the kinks (no descent from them).

    Args:
        trained: the trained model (not changed).
        graph: the graph it was trained on.

    Returns:
        ``None`` for a smooth model; else a :class:`~bind_core.training.records.KinkStall`: whether a restarted
        L-BFGS (:data:`RESTART_ITERATIONS` iterations) lowered the objective by at most :data:`NO_DESCENT`
        relative, by how much it did, and the pre-activations pinned at the kink between layers.
    """
    if not has_kinks(trained.model_config):
        return None
    clone = TrainedModel(copy.deepcopy(trained.module).double(), trained.model_config, trained.train_config)
    before = clone.objective(graph)
    polish(clone, graph, max_iter=RESTART_ITERATIONS, tol=trained.train_config.polish_tol, newton=False)
    decrease = before - clone.objective(graph)
    module = clone.module.double().eval()
    return KinkStall(
        no_descent=bool(decrease <= NO_DESCENT * max(1.0, abs(before))),
        objective_decrease=float(decrease),
        pinned=pinned_count(module, module.prepare(graph, torch.float64, next(module.parameters()).device)),
    )
