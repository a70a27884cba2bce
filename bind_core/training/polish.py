"""The stationary-point polish of a trained model: float64 full-batch L-BFGS on the training objective without
dropout, finished by a Newton method where L-BFGS stops short, and the gradient sizes that say how stationary the
weights are (:func:`bind_core.training.fit.train` runs it after the Adam epochs; the ground truths re-run it on a
reduced graph)."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import replace
from typing import Protocol, TypeVar

from torch import Tensor

from bind_core.data.graph import Graph
from bind_core.models.gnn import GNN
from bind_core.models.propagation import GraphInputs
from bind_core.training.compgraph import objective_inputs
from bind_core.training.newton import NEWTON_MAX_PARAMETERS, newton_finish
from bind_core.training.objective import (
    FROZEN_STEPS_PER_HESSIAN,
    LabelledRows,
    flat_objective,
    gradient_size,
    largest_gradient_entry,
    lbfgs,
    message_passing_finish,
    objective_gradient,
)
from bind_core.training.records import NewtonRecord, Stationarity


class _Settings(Protocol):
    @property
    def weight_decay(self) -> float: ...


class Polishable(Protocol):
    """What the polish reads and writes of a trained model (:class:`bind_core.training.fit.TrainedModel`, which
    imports this module: the protocol keeps the import one way)."""

    module: GNN
    stationarity: Stationarity

    @property
    def train_config(self) -> _Settings: ...

    @property
    def num_parameters(self) -> int: ...

    def prepare(self, graph: Graph) -> GraphInputs: ...


Model = TypeVar("Model", bound=Polishable)


def gradient_norm(trained: Polishable, graph: Graph) -> float:
    """Euclidean norm of the gradient of the training objective (no dropout) at the current weights."""
    module = trained.module
    module.eval()
    inputs, rows = objective_inputs(module, trained.prepare(graph), graph)
    return gradient_size(objective_gradient(module, inputs, rows, trained.train_config.weight_decay))


def max_abs_gradient(trained: Polishable, graph: Graph) -> float:
    """``max|∂L/∂θ|`` of the training objective (no dropout) at the current weights: what ``polish_tol`` bounds."""
    module = trained.module
    module.eval()
    inputs, rows = objective_inputs(module, trained.prepare(graph), graph)
    return largest_gradient_entry(module, inputs, rows, trained.train_config.weight_decay)


def polish(
    trained: Model,
    graph: Graph,
    *,
    max_iter: int = 1000,
    tol: float = 1e-7,
    progress: Callable[[float], None] | None = None,
    newton: bool | None = None,
    newton_max_iter: int = 200,
    newton_max_seconds: float | None = None,
    threads: int = 1,
) -> Model:
    """Re-optimise ``trained`` in place to a stationary point: float64 full-batch L-BFGS, no dropout.

    The model is converted to float64. When L-BFGS stops with a gradient entry above ``tol`` and the model has
    at most :data:`~bind_core.training.newton.NEWTON_MAX_PARAMETERS` parameters, a trust-region Newton finish with the
    exact Hessian (:func:`bind_core.training.newton.newton_finish`, at most ``newton_max_iter`` Hessians,
    ``newton_max_seconds`` bounds its time) takes over; models that L-BFGS converges never form a Hessian.
    ``newton=None`` (default) or ``True`` does this for every model: row-separable ones (one-layer GCN, GIN, SAGE),
    whose Hessian runs over the training rows alone, form the exact Hessian at every step; message-passing models,
    where each Hessian is ``p`` full-graph backward passes, take frozen-Hessian steps (one eigendecomposition at
    the L-BFGS end point, a fresh one only when :data:`FROZEN_REFRESH` steps in a row have not halved the
    gradient, the wait doubled by each refresh up to ``p`` steps; each step costs one gradient), at most
    ``newton_max_iter·FROZEN_STEPS_PER_HESSIAN`` of them.
    ``newton=False`` never runs it. Records ``grad_norm``, ``iterations`` (L-BFGS), ``seconds``, ``converged``
    (the largest gradient entry is at most ``tol``) and, when it ran, ``newton`` (its record) in
    ``trained.stationarity``.
    A multi-layer GCN, GIN or SAGE evaluates the objective on its training nodes' computation graph
    (:mod:`bind_core.training.compgraph`: the same objective, gradient and Hessian, exactly) when that holds at most
    :data:`~bind_core.training.compgraph.MAX_FRACTION` of the graph's nodes.
    Used after training and, warm-started, as the ground truth of a deletion. ``progress(fraction)`` is called
    at every objective evaluation, after each Newton step and while a Hessian is formed; it may raise.
    ``threads``: CPU threads forming a message-passing model's Hessian rows (:mod:`bind_core.threads`; the same
    Hessians, bit for bit); L-BFGS runs on the caller's torch threads, whatever ``threads`` is, so that the polished
    weights do not depend on it (:func:`~bind_core.threads.intra_op_times`).
    """
    module = trained.module.double()
    module.eval()
    inputs, rows = objective_inputs(module, trained.prepare(graph), graph)  # the training nodes' part, if smaller
    wd = trained.train_config.weight_decay
    run_newton = newton is not False and newton_max_iter > 0 and trained.num_parameters <= NEWTON_MAX_PARAMETERS
    lbfgs_share = 0.9 if run_newton else 1.0  # of the progress; a Newton finish reports the rest
    start = time.perf_counter()
    lbfgs_progress = None if progress is None else (lambda f: progress(lbfgs_share * f))
    iterations = lbfgs(module, inputs, rows, wd, tol=tol, max_iter=max_iter, progress=lbfgs_progress)
    record: NewtonRecord | None = None
    if run_newton and largest_gradient_entry(module, inputs, rows, wd) > tol:
        report = None if progress is None else (lambda f: progress(lbfgs_share + (1 - lbfgs_share) * f))
        record = _newton(
            module,
            inputs,
            rows,
            wd,
            tol=tol,
            max_iter=newton_max_iter,
            lbfgs_iter=max(max_iter, 1000),
            max_seconds=newton_max_seconds,
            progress=report,
            threads=threads,
        )
    if progress is not None:
        progress(1.0)
    grads = objective_gradient(module, inputs, rows, wd)
    _note(trained, grads, tol=tol, iterations=iterations, seconds=time.perf_counter() - start, newton=record)
    return trained


def _newton(
    module: GNN,
    inputs: GraphInputs,
    rows: LabelledRows,
    wd: float,
    *,
    tol: float,
    max_iter: int,
    lbfgs_iter: int,
    max_seconds: float | None,
    progress: Callable[[float], None] | None,
    threads: int = 1,
) -> NewtonRecord:
    """The Newton finish where L-BFGS stopped short (see :func:`polish`): the exact Hessian at every step for a
    row-separable model, frozen-Hessian rounds otherwise; its record."""
    if module.row_separable:
        objective, theta, write_back = flat_objective(module, inputs, rows, wd)
        theta, record = newton_finish(
            objective, theta, tol=tol, max_iter=max_iter, max_seconds=max_seconds, progress=progress
        )
        write_back(theta)
        return record
    return message_passing_finish(
        module,
        inputs,
        rows,
        wd,
        tol=tol,
        lbfgs_iter=lbfgs_iter,
        max_steps=max_iter * FROZEN_STEPS_PER_HESSIAN,
        max_seconds=max_seconds,
        progress=progress,
        threads=threads,
    )


def _note(
    trained: Polishable,
    grads: list[Tensor],
    *,
    tol: float,
    iterations: int,
    seconds: float,
    newton: NewtonRecord | None,
) -> None:
    """Record in ``trained.stationarity`` how stationary the polish left the weights (``grads``: the objective's
    gradient there) and the Newton finish's record (``None``, dropping an earlier one, when it did not run)."""
    trained.stationarity = replace(
        trained.stationarity,
        grad_norm=gradient_size(grads),
        polished=True,
        iterations=iterations,
        converged=max(float(g.abs().max()) for g in grads) <= tol,
        seconds=seconds,
        newton=newton,
    )
