"""Float64 L-BFGS on a proximal objective, in the damped curvature's coordinates: the self-check's ground truth
(:mod:`bind_core.debiasing.proximal_truth`) and the finish of a deletion that the chord steps leave short
(:meth:`bind_core.influence.step.Stepper.delete`).

In the coordinates ``θ = θ₀ + V·(s ⊙ u)`` (:class:`~bind_core.influence.curvature.Coordinates`, ``θ₀`` the start) the
objective's curvature near ``θ̂`` is close to the identity, so L-BFGS takes Newton-sized steps from the first: on
Recidivism's two-layer GCN a deletion's truth took 3–8 evaluations instead of 78–5108 in the weights' own coordinates,
and reached its tolerance, which there it did not (docs/SCALE.md). The change of variables is invertible, so both seek
the same minimum; the stop is the largest entry of the gradient in ``θ``. A run that stops short of the tolerance (a
line search that cannot resolve the objective's last digits) is restarted from its best point with a fresh history,
while restarting still lowers the gradient and evaluations are left.

On a model with kinks (a ReLU between layers, GAT's attention scores) the minimum lies where no gradient vanishes:
the gradient's largest entry says nothing of how near a point is, and L-BFGS zigzags across the kinks, lowering the
objective by ever less. There the best point is the lowest objective evaluated (``by_value``), and the search ends
once its ``patience`` of evaluations in a row have not lowered it by :data:`CHANGE` (docs/METHOD.md, "Models with
kinks").

Where the weights go :func:`~bind_core.influence.proximal.beyond_reach` of ``θ̂`` the objective has no minimum near
the given weights (docs/METHOD.md, "Where the objective has no minimum near θ̂"): the search stops and says so
(:attr:`Found.far`) rather than run on until the weights overflow.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from dataclasses import dataclass

import torch
from torch import Tensor

from bind_core.influence.curvature import Coordinates
from bind_core.influence.proximal import beyond_reach

RESTARTS = 6
"""L-BFGS runs at most per minimisation: the first and its restarts."""

CHANGE = 1e-10
"""Where the best point is the lowest objective (``by_value``), the search ends once its ``patience`` of evaluations in
a row lower it by less than this, relative to ``max(1, |F|)``."""

PATIENCE = 50
"""The default ``patience``: evaluations without a decrease beyond :data:`CHANGE` after which a search ``by_value``
ends. L-BFGS on a model with kinks zigzags across them, lowering the objective by ever less (on a two-layer ReLU GCN
a deletion's ground truth lowered it by 1.4·10⁻⁹ of 0.48 over its last 7300 of 7500 evaluations; it now stops after
130). The step estimate's finish uses less (:data:`~bind_core.influence.step.FINISH_PATIENCE`)."""

Evaluate = Callable[[Tensor], tuple[Tensor, Tensor]]
"""``θ ↦ (F(θ), ∇F(θ))``, the value a 0-d tensor."""


@dataclass
class Found:
    """Where :func:`minimise` stopped: its best point (by the largest gradient entry in ``θ``) and its counts.

    Attributes:
        weights: the best weights evaluated.
        largest: the largest gradient entry there (``inf`` before any evaluation).
        value: the objective there (``inf`` before any evaluation).
        evaluations: the objective's evaluations.
        iterations: L-BFGS iterations over all runs.
        runs: L-BFGS runs (the first and its restarts).
        far: why the search stopped where the weights went beyond reach of ``θ̂`` (no minimum near it), else
            ``None``.
    """

    weights: Tensor
    largest: float = float("inf")
    value: float = float("inf")
    evaluations: int = 0
    iterations: int = 0
    runs: int = 0
    far: str | None = None


class _Reached(Exception):
    """Raised inside the closure once the gradient is within the tolerance: the search stops there."""


class _Far(Exception):
    """Raised inside the closure once the weights are beyond reach of ``θ̂``."""


class _Still(Exception):
    """Raised inside the closure of a search ``by_value`` once its ``patience`` (:data:`PATIENCE` by default) of
    evaluations have not lowered the objective by :data:`CHANGE`."""


@dataclass
class _Search:
    """A :class:`Found` and the coordinates ``u`` of its best point."""

    found: Found
    u: Tensor
    mark: float = float("inf")
    """The objective at the last decrease beyond :data:`CHANGE` (``by_value``)."""
    since: int = 0
    """Evaluations since then."""


def minimise(
    evaluate: Evaluate,
    start: Tensor,
    coordinates: Coordinates | None,
    *,
    anchor: Tensor,
    tol: float,
    max_iter: int,
    budget: int,
    progress: Callable[[float], None] | None = None,
    by_value: bool = False,
    patience: int = PATIENCE,
) -> Found:
    """Float64 L-BFGS on ``evaluate`` from ``start`` until the largest entry of its gradient in ``θ`` is at most
    ``tol``.

    Args:
        evaluate: the objective and its gradient in ``θ``.
        start: the weights to start from (``θ₀``, the origin of the coordinates).
        coordinates: the damped curvature's coordinates to run in; ``None``: the weights'.
        anchor: the given weights ``θ̂``, from which every evaluation's distance is checked
            (:func:`~bind_core.influence.proximal.beyond_reach`).
        tol: the largest gradient entry to stop at.
        max_iter: L-BFGS iterations at most in one run.
        budget: evaluations at most, over all runs.
        progress: ``progress(fraction of the budget spent)`` at every evaluation; may raise to abort.
        by_value: the best point is the lowest objective evaluated, not the smallest gradient: for a model with kinks,
            whose minimum lies where no gradient vanishes, so that the gradient there says nothing of how near it is.
        patience: with ``by_value``, the evaluations in a row without a decrease beyond :data:`CHANGE` that end the
            search.

    Returns:
        The :class:`Found` best point; its ``far`` says why the search stopped where the weights left ``θ̂``'s reach.
    """
    search = _Search(
        Found(weights=start.clone()), torch.zeros_like(start) if coordinates is not None else start.clone()
    )
    found = search.found
    while found.runs < RESTARTS and found.evaluations < budget and found.far is None:
        before = found.value if by_value else found.largest
        _run(
            evaluate,
            start,
            coordinates,
            search,
            anchor=anchor,
            tol=tol,
            max_iter=max_iter,
            budget=budget,
            progress=progress,
            by_value=by_value,
            patience=patience,
        )
        if (
            found.largest <= tol
            or not (found.value if by_value else found.largest) < before
            or search.since >= patience
        ):
            break
    return found


def _run(
    evaluate: Evaluate,
    start: Tensor,
    coordinates: Coordinates | None,
    search: _Search,
    *,
    anchor: Tensor,
    tol: float,
    max_iter: int,
    budget: int,
    progress: Callable[[float], None] | None,
    by_value: bool,
    patience: int,
) -> None:
    """One L-BFGS run from ``search``'s best point with a fresh history, recording into it; it stops at ``tol`` (in
    ``θ``), at its own end (no further progress its line search can see), at the ``budget`` of evaluations or where
    the weights leave ``anchor``'s reach."""
    found = search.found
    found.runs += 1
    u = search.u.clone().requires_grad_(True)
    optimizer = torch.optim.LBFGS(
        [u],
        lr=1.0,
        max_iter=max_iter,
        max_eval=budget - found.evaluations,
        tolerance_grad=0.0,  # the stop is the gradient in θ, tested in the closure
        tolerance_change=0.0,
        history_size=50,
        line_search_fn="strong_wolfe",
    )

    def closure() -> Tensor:
        found.evaluations += 1
        if progress is not None:
            progress(min(1.0, found.evaluations / budget))
        optimizer.zero_grad(set_to_none=True)
        flat = u.detach() if coordinates is None else coordinates.weights(start, u.detach())
        if (far := beyond_reach(flat, anchor)) is not None:
            found.far = far
            raise _Far
        value, grad = evaluate(flat)
        largest, at = float(grad.abs().max()), float(value.detach())
        if (at < found.value) if by_value else (largest < found.largest):
            search.u, found.weights = u.detach().clone(), flat.detach().clone()
            found.largest, found.value = largest, at
        if largest <= tol:
            raise _Reached
        if by_value:
            lower = search.mark == float("inf") or found.value < search.mark - CHANGE * max(1.0, abs(search.mark))
            search.mark, search.since = (found.value, 0) if lower else (search.mark, search.since + 1)
            if search.since >= patience:
                raise _Still
        u.grad = grad if coordinates is None else coordinates.gradient(grad)
        return value.detach()

    with contextlib.suppress(_Reached, _Far, _Still):
        optimizer.step(closure)  # type: ignore[no-untyped-call]
    found.iterations += int(optimizer.state[u].get("n_iter", 0))
