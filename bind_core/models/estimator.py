"""Which estimate an audit runs for a model by default, from the model's shape alone, and so whether the model it
trains ends with the polish.

The two estimates answer questions with different needs (docs/METHOD.md, "The model as given"):

* ``"linear"``, the paper's influence function ``(1/m)·∇Γᵀ·H⁻¹·∇c_v`` with the exact Hessian, answers "retrain
  without v" at a stationary point of the training objective: the model the audit trains for it ends with the
  polish (float64 L-BFGS, then Newton), as the paper's one-layer recipe does;
* ``"step"``, damped Newton steps towards the proximal Bregman response, is defined at any weights: the model the
  audit trains for it is left as Adam leaves it (its best validation epoch), as a user trains. Polishing a two-layer
  model moves it to another model altogether (on Income it changed 19–33% of the test predictions and took the
  two-layer GCN's test accuracy from 72.9% to 61.4%, SAGE's from 78.7% to 74.6%; docs/METHOD.md).

By default one-layer GCN, GIN and GraphSAGE (row-separable: their rows depend only on the aggregated features) get
the linear estimate at a stationary point (the model the audit trains for it is polished), and so do models too
large for the step estimate's dense curvature; every other model (deeper GCN, GIN and SAGE, GAT) gets the step
estimate, and so does a one-layer model whose weights are not stationary (a model as given, or one trained with
``polish`` false): there the question is the proximal Bregman response, which the steps answer exactly and the linear
estimate only to its first Newton step (the paper's GCN supplied as trained with Adam on Income: self-check Pearson
0.9983 linear, 1.0000 stepped; on a graph of 50 training nodes 0.75 and 1.0000). Both choices can be overridden
(``InfluenceArguments.method``, ``TrainConfig.polish``).
"""

from __future__ import annotations

DENSE_MAX_PARAMETERS = 5000
"""The largest model whose ``[p, p]`` curvature is formed densely and eigendecomposed: the exact solver's bound
(:data:`bind_core.influence.solvers.EXACT_MAX_PARAMETERS` is this value) and so the step estimate's. Above it the
default estimate is the linear one even for a message-passing model: the step estimate's dense curvature would cost
more than the estimate it serves."""


def default_estimator(*, row_separable: bool, num_parameters: int, stationary: bool = True) -> str:
    """The estimate an audit runs by default (module docstring).

    Args:
        row_separable: whether the model is a one-layer GCN, GIN or SAGE
            (:attr:`bind_core.models.gnn.GNN.row_separable`).
        num_parameters: its number of weights.
        stationary: whether its weights are (or, for a model the audit is about to train and polish, will be) a
            stationary point of the training objective.

    Returns:
        ``"linear"`` or ``"step"``.
    """
    if num_parameters > DENSE_MAX_PARAMETERS:
        return "linear"
    return "linear" if row_separable and stationary else "step"


def polishes_by_default(*, estimator: str, row_separable: bool, num_parameters: int) -> bool:
    """Whether a model the audit trains ends with the polish when the recipe leaves it open
    (``TrainConfig.polish=None``): where the estimate is the linear one, which needs a stationary point.

    Args:
        estimator: the audit's ``"auto"``, ``"linear"`` or ``"step"``.
        row_separable: as for :func:`default_estimator`.
        num_parameters: as for :func:`default_estimator`.

    Returns:
        ``True`` for the linear estimate.
    """
    if estimator == "auto":
        estimator = default_estimator(row_separable=row_separable, num_parameters=num_parameters)
    return estimator == "linear"
