"""The training objective and the pieces of the polish that work on it directly: its gradient, a flat-parameter
view for ``torch.func``, full-batch L-BFGS and the message-passing Newton finish
(:func:`bind_core.training.polish.polish` puts them together)."""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import replace
from typing import Any, Protocol, cast

import torch
from torch import Tensor
from torch.func import functional_call

from bind_core.models.gnn import GNN, flat_parameters, node_losses, unflatten_parameters
from bind_core.models.propagation import GraphInputs
from bind_core.training.hessian import HessianForm, dense_hessian_by_rows
from bind_core.training.newton import newton_finish
from bind_core.training.records import NewtonRecord

FROZEN_REFRESH = 20
"""A message-passing model's Newton finish forms a fresh Hessian when this many frozen steps have not halved the
gradient norm (see :func:`polish`); each refresh doubles the steps the next Hessian waits for, up to the number of
parameters (a Hessian's cost in backward passes), and a window that halves the gradient resets it to this."""
FINISH_ROUNDS = 6
"""Frozen-Hessian Newton rounds for a message-passing model, an L-BFGS restart between them: where the frozen steps
crawl (a two-layer GCN left at 3.9e-4 after 1000 steps), 2000 L-BFGS iterations then reached 1.4e-6 and 8 more
frozen steps converged. Since the wait between refreshes doubles, a round forms 14–37% as many Hessians as it did
and crawls further before it converges: on Income (two layers, seeds 10 and 11) GCN took 3 and 4 rounds where it took
2, and SAGE 3 where it took 1, and still 8–33% less time (docs/SCALE.md)."""
FROZEN_STEPS_PER_HESSIAN = 5
"""Frozen-Hessian steps allowed per Hessian step of ``newton_max_iter`` (a frozen step costs one gradient)."""


class LabelledRows(Protocol):
    """What the objective reads of a graph: its training nodes and labels (a :class:`Graph`, or the training nodes'
    computation graph, :class:`bind_core.training.compgraph.ComputationGraph`, whose rows are its own)."""

    @property
    def train_idx(self) -> Tensor: ...

    @property
    def y(self) -> Tensor: ...


def l2_penalty(params: Any) -> Tensor:
    """``Σ ‖p‖²`` over a module's parameters or an iterable/dict of tensors."""
    values = params.values() if isinstance(params, dict) else params
    return cast(Tensor, sum((p * p).sum() for p in values))


def training_objective(module: GNN, inputs: GraphInputs, graph: LabelledRows, weight_decay: float) -> Tensor:
    """``L(θ) = (1/m)·Σ_{j∈train} ℓ_j(θ) + (λ/2)·‖θ‖²`` in the module's current mode."""
    train = graph.train_idx.to(inputs.x.device)
    losses = node_losses(module(inputs, train), graph.y.to(inputs.x.device)[train])
    return losses.mean() + 0.5 * weight_decay * l2_penalty(module.parameters())


# ---------------------------------------------------------------------- training
def message_passing_finish(
    module: GNN,
    inputs: GraphInputs,
    graph: LabelledRows,
    wd: float,
    *,
    tol: float,
    lbfgs_iter: int,
    max_steps: int,
    max_seconds: float | None,
    progress: Callable[[float], None] | None,
    threads: int = 1,
) -> NewtonRecord:
    """Frozen-Hessian Newton rounds, with an L-BFGS restart between rounds (see :func:`polish`); the record sums
    the rounds' ``iterations``, ``accepted`` steps and ``hessians`` and keeps the last round's state (no round when
    ``max_seconds`` has run out before the first: zero counts, the gradient as it is). ``threads``: CPU threads forming
    each Hessian's rows (:func:`expanded_hessian`; the same Hessians)."""
    start = time.perf_counter()
    record: NewtonRecord | None = None
    totals = {"iterations": 0, "accepted": 0, "hessians": 0}

    def hold(_fraction: float) -> None:  # an L-BFGS restart or a Hessian between Newton steps: no progress
        if progress is not None:
            progress(0.0)

    for done in range(FINISH_ROUNDS):
        if record is not None:  # the frozen steps stalled: L-BFGS rebuilds its curvature pairs from here
            lbfgs(module, inputs, graph, wd, tol=tol, max_iter=lbfgs_iter, progress=hold)
            worst = largest_gradient_entry(module, inputs, graph, wd)
            if worst <= tol:
                record = replace(record, converged=True, reason="converged", max_abs_grad=worst)
                break
        left = None if max_seconds is None else max_seconds - (time.perf_counter() - start)
        if left is not None and left <= 0:
            record = None if record is None else replace(record, reason="max_seconds")
            break
        found = _newton_round(module, inputs, graph, wd, tol, max_steps, left, progress, hold, threads)
        record = replace(found, hessians=found.hessians + 1, rounds=done + 1)
        for name in totals:
            totals[name] += int(getattr(record, name))
        if record.converged or record.reason == "max_seconds":
            break
    if record is None:
        record = _no_round(module, inputs, graph, wd)
    return replace(
        record,
        iterations=totals["iterations"],
        accepted=totals["accepted"],
        hessians=totals["hessians"],
        seconds=time.perf_counter() - start,
    )


def _newton_round(
    module: GNN,
    inputs: GraphInputs,
    graph: LabelledRows,
    wd: float,
    tol: float,
    max_steps: int,
    left: float | None,
    progress: Callable[[float], None] | None,
    hold: Callable[[float], None],
    threads: int = 1,
) -> NewtonRecord:
    """One round of :func:`message_passing_finish`: the Hessian at the current weights, frozen Newton steps from
    them (:func:`newton_finish`), the weights written back into ``module``."""
    objective, theta, write_back = flat_objective(module, inputs, graph, wd)
    hessian = expanded_hessian(module, threads)
    eigen = torch.linalg.eigh(hessian(objective, theta, progress=hold))
    theta, found = newton_finish(
        objective,
        theta,
        tol=tol,
        max_iter=max_steps,
        max_seconds=left,
        progress=progress,
        eigen=eigen,
        refresh_after=FROZEN_REFRESH,
        refresh_limit=theta.numel(),  # a window costs at most about what a Hessian does: p backward passes
        hessian=hessian,
    )
    write_back(theta)
    return found


def _no_round(module: GNN, inputs: GraphInputs, graph: LabelledRows, wd: float) -> NewtonRecord:
    """The record of a Newton finish whose time ran out before its first round."""
    grads = objective_gradient(module, inputs, graph, wd)
    return NewtonRecord(
        iterations=0,
        hessians=0,
        accepted=0,
        converged=False,
        reason="max_seconds",
        max_abs_grad=max(float(g.abs().max()) for g in grads),
        grad_norm=gradient_size(grads),
        negative_eigenvalues=0,
        min_eigenvalue=math.nan,
        seconds=0.0,
    )


def expanded_hessian(module: GNN, threads: int = 1) -> HessianForm:
    """:func:`dense_hessian_by_rows` with ``module``'s activations expanded to second order about the point
    (:mod:`bind_core.models.activations`: the same Hessian to rounding, without re-deriving GELU in every row's
    backward pass; a two-layer GCN's Hessian on Income 1.19 → 0.64 s). ``objective`` must evaluate ``module``.
    ``threads``: CPU threads forming the rows (the same Hessian, bit for bit)."""

    def form(
        objective: Callable[[Tensor], Tensor], theta: Tensor, *, progress: Callable[[float], None] | None = None
    ) -> Tensor:
        before = module.expand_activations
        module.expand_activations = True
        try:
            return dense_hessian_by_rows(objective, theta, progress=progress, threads=threads)
        finally:
            module.expand_activations = before

    return form


def lbfgs(
    module: GNN,
    inputs: GraphInputs,
    graph: LabelledRows,
    wd: float,
    *,
    tol: float,
    max_iter: int,
    progress: Callable[[float], None] | None = None,
) -> int:
    """The polish's float64 full-batch L-BFGS (history 50, strong-Wolfe line search) on the training objective, in
    place: the polish's first phase and the restarts between Newton rounds.

    Args:
        module: the model whose parameters move.
        inputs: its prepared inputs.
        graph: the training rows and labels.
        wd: the weight decay λ.
        tol: stop when the largest gradient entry is below this.
        max_iter: the iteration cap (``max_eval`` 1.5 times it, plus 10); 0 takes no step.
        progress: ``progress(fraction of max_iter)`` at every evaluation (one can take seconds on a large model);
            it may raise to abort.

    Returns:
        The iterations taken.
    """
    if max_iter <= 0:
        return 0
    optimizer = torch.optim.LBFGS(
        module.parameters(),
        lr=1.0,
        max_iter=max_iter,
        max_eval=int(max_iter * 1.5) + 10,
        tolerance_grad=tol,
        tolerance_change=1e-16,
        history_size=50,
        line_search_fn="strong_wolfe",
    )
    evaluations = 0

    def closure() -> Tensor:
        nonlocal evaluations
        evaluations += 1
        if progress is not None:
            progress(min(1.0, evaluations / max(max_iter, 1)))
        optimizer.zero_grad(set_to_none=True)
        obj = training_objective(module, inputs, graph, wd)
        obj.backward()  # type: ignore[no-untyped-call]
        return obj

    optimizer.step(closure)  # type: ignore[no-untyped-call]
    return int(optimizer.state[optimizer._params[0]].get("n_iter", 0))


def objective_gradient(module: GNN, inputs: GraphInputs, graph: LabelledRows, weight_decay: float) -> list[Tensor]:
    """``∂L/∂θ`` of the training objective at the current weights, per parameter tensor."""
    params = [p for p in module.parameters() if p.requires_grad]
    return list(torch.autograd.grad(training_objective(module, inputs, graph, weight_decay), params))


def gradient_size(grads: list[Tensor]) -> float:
    return float(torch.sqrt(torch.stack([(g.double() ** 2).sum() for g in grads]).sum()))


def largest_gradient_entry(module: GNN, inputs: GraphInputs, graph: LabelledRows, weight_decay: float) -> float:
    """``max|∂L/∂θ|``, the quantity ``polish_tol`` bounds (as L-BFGS's ``tolerance_grad``)."""
    return max(float(g.abs().max()) for g in objective_gradient(module, inputs, graph, weight_decay))


def flat_objective(
    module: GNN, inputs: GraphInputs, graph: LabelledRows, weight_decay: float
) -> tuple[Callable[[Tensor], Tensor], Tensor, Callable[[Tensor], None]]:
    """The training objective as a function of one flat parameter vector, that vector, and a setter for it."""
    names, shapes, theta = flat_parameters(module)
    params = dict(module.named_parameters())
    train = graph.train_idx.to(inputs.x.device)
    y = graph.y.to(inputs.x.device)[train]

    def objective(flat: Tensor) -> Tensor:
        logits = functional_call(module, unflatten_parameters(flat, names, shapes), (inputs, train), tie_weights=False)
        return node_losses(logits, y).mean() + 0.5 * weight_decay * (flat * flat).sum()

    def write_back(flat: Tensor) -> None:
        with torch.no_grad():
            for name, value in unflatten_parameters(flat, names, shapes).items():
                params[name].copy_(value)

    return objective, theta, write_back
