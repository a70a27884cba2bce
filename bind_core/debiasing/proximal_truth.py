"""The proximal ground truth: a model re-optimised on ``G − S`` by the proximal Bregman objective, to a gradient of
10⁻¹⁰ (:mod:`bind_core.debiasing.validation`, ``mode="proximal"``).

The objective (the module docstring of :mod:`~bind_core.debiasing.validation`) is evaluated on the rebuilt graph
``G − S``, by the model's own forward pass: nothing of the estimate's reduced graphs or reused layers. It is minimised
by float64 L-BFGS from the given weights ``θ̂``, in one of two sets of coordinates:

* the weights themselves, or
* the damped curvature's :class:`~bind_core.influence.curvature.Coordinates` (``θ = θ̂ + V·(s ⊙ u)``, or the
  Lanczos operator's square root), where the
  objective's curvature near ``θ̂`` is close to the identity. There L-BFGS takes Newton-sized steps from the first:
  on Recidivism's two-layer GCN a deletion's truth took 3–8 evaluations instead of 78–5108, and reached the
  tolerance, which in the weights' coordinates it did not (it stopped at gradients of 3.5·10⁻¹⁰ to 1.1·10⁻⁸;
  ``bench/bench_truth.py``, docs/SCALE.md).

The change of variables is invertible, so both seek the same minimum; the stop is the same test, the largest entry of
the gradient in ``θ``. The coordinates only choose the path. L-BFGS is restarted from its best point, with a fresh
history, when it stops short of the tolerance (a line search that cannot resolve the objective's last digits), while
restarting still lowers the gradient and within the evaluations allowed.

For a model with kinks (:meth:`~bind_core.models.gnn.ModelConfig.kinks`) no gradient vanishes at the minimum: the
truth is the lowest objective L-BFGS finds (``by_value`` in :func:`~bind_core.influence.lbfgs.minimise`), not the
smallest gradient. On a two-layer ReLU GCN the smallest gradient's point lay above the estimate's own in the objective
for 5 of 8 deletions, and the search ran on to its 7500 evaluations; by the objective it lies below them in 7 of 8 and
ends in 95–681 (docs/METHOD.md, "Models with kinks").
"""

from __future__ import annotations

import copy
from collections.abc import Callable

import torch
from torch import Tensor
from torch.func import functional_call

from bind_core.data.graph import Graph
from bind_core.errors import NonFiniteError
from bind_core.influence.curvature import Coordinates
from bind_core.influence.functional import FunctionalModel
from bind_core.influence.lbfgs import minimise
from bind_core.models.gnn import flat_parameters, node_losses, unflatten_parameters
from bind_core.models.norms import held
from bind_core.training.compgraph import objective_inputs
from bind_core.training.fit import TrainedModel
from bind_core.training.records import Stationarity


def proximal_reoptimize(
    model: TrainedModel,
    reduced: Graph,
    *,
    num_train: int,
    damping: float,
    anchor: Graph | None,
    tol: float = 1e-10,
    max_iter: int = 5000,
    progress: Callable[[float], None] | None = None,
    coordinates: Coordinates | None = None,
    on_anchor: FunctionalModel | None = None,
) -> TrainedModel:
    """A copy of ``model`` re-optimised on ``reduced`` (``G − S``) by the proximal Bregman objective
    (:mod:`bind_core.debiasing.validation`): float64 L-BFGS from the trained weights until ``max|∇| ≤ tol``.

    Args:
        model: the model as given.
        reduced: ``G − S``.
        num_train: ``m``, the training set's size on ``G``.
        damping: ``μ``.
        anchor: the graph ``G`` the model was trained on, whose Bregman tilt is added (``None``: the plain proximal
            objective, without it).
        tol: the largest gradient entry to stop at.
        max_iter: L-BFGS iterations at most in one run (its evaluations at most 1.5 times that, over all runs).
        progress: ``progress(fraction of the evaluations allowed)`` at every evaluation; may raise to abort.
        coordinates: the damped curvature's coordinates to run in (module docstring); ``None``: the weights'.
        on_anchor: ``FunctionalModel.from_trained(model, anchor)``, whose tilt is read, when the caller keeps one for
            many re-optimisations (one per thread); made here otherwise.

    Returns:
        The re-optimised copy; its ``stationarity`` records ``converged``, ``max_abs_grad`` and ``iterations``
        (``converged`` false for a model with kinks unless a gradient happened to vanish: its best point is the
        lowest objective found).

    Raises:
        NonFiniteError: the weights went :func:`~bind_core.influence.proximal.beyond_reach` of ``θ̂`` (no minimum
            near them).
    """
    clone = TrainedModel(held(copy.deepcopy(model.module).double().eval()), model.model_config, model.train_config)
    names, shapes, theta_hat = flat_parameters(clone.module)
    # the training nodes' computation graph where it is smaller (a GAT's always): the same objective exactly, cheaper
    inputs, rows = objective_inputs(clone.module, clone.prepare(reduced), reduced, attention=True)
    train = rows.train_idx.to(clone.device)
    y = rows.y[rows.train_idx].to(clone.device)
    wd = model.train_config.weight_decay
    if anchor is not None and on_anchor is None:
        on_anchor = FunctionalModel.from_trained(model, anchor)
    tilt = None if anchor is None or on_anchor is None else on_anchor.tilt

    def objective(f: Tensor) -> Tensor:
        logits = functional_call(
            clone.module, unflatten_parameters(f, names, shapes), (inputs, train), tie_weights=False
        )
        prox = f - theta_hat
        value = node_losses(logits, y).sum() / num_train + 0.5 * wd * (f * f).sum()
        value = value + 0.5 * damping * (prox * prox).sum()
        return value if tilt is None else value + tilt(f)

    def evaluate(f: Tensor) -> tuple[Tensor, Tensor]:
        flat = f.detach().requires_grad_(True)
        value = objective(flat)
        (grad,) = torch.autograd.grad(value, flat)
        return value, grad

    found = minimise(
        evaluate,
        theta_hat,
        coordinates,
        anchor=theta_hat,
        tol=tol,
        max_iter=max_iter,
        budget=int(max_iter * 1.5),
        progress=progress,
        by_value=bool(model.model_config.kinks()),
    )
    if found.far is not None:
        raise NonFiniteError(f"{found.far}: the objective has no minimum near them")
    with torch.no_grad():
        for name, value in unflatten_parameters(found.weights, names, shapes).items():
            dict(clone.module.named_parameters())[name].copy_(value)
    clone.stationarity = Stationarity(
        converged=found.largest <= tol,
        max_abs_grad=found.largest,
        iterations=found.iterations,
        extra={"damping": damping, "evaluations": found.evaluations, "runs": found.runs},
    )
    return clone
