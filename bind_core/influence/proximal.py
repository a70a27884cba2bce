"""The proximal Bregman objective of one deletion (:class:`bind_core.influence.step.Stepper`), and how far its
minimisation may carry the weights (:func:`beyond_reach`): ``F(θ) = (1/m)·Σ_{kept} ℓ_j(θ; G − S) + (λ/2)·‖θ‖² + r(θ) +
(μ/2)·‖θ − θ̂‖²``, with ``r`` the Bregman tilt (:meth:`bind_core.influence.functional.FunctionalModel.tilt`;
:mod:`bind_core.influence.bregman` says why)."""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import Tensor

from bind_core.data.ladder import reach
from bind_core.influence.firstlayer import FirstLayerCache
from bind_core.influence.functional import FunctionalModel
from bind_core.models.gnn import node_losses, probabilities
from bind_core.models.propagation import GraphInputs

Evaluation = tuple[float, Tensor, Tensor | None]
"""``(F(θ), ∇F(θ), the test probabilities at θ or None)``: see :func:`proximal_objective`."""

FAR = 10.0
"""A proximal re-optimisation whose weights move further than ``FAR·max(1, ‖θ̂‖)`` from the given weights ``θ̂`` has
left any minimum near them: the objective of a deletion whose own loss dominates can decrease without bound
(docs/METHOD.md, "Where the objective has no minimum near θ̂"). It stops there rather than run on until the weights
overflow (an untrained two-layer GCN's self-check spent ~10 s a deletion getting there, its edge settling 134 s on a
100-node graph). Deletions that do settle move far less: at most 0.11·‖θ̂‖ for the first 30 of a two-layer GIN as Adam
leaves it (``synthetic(300, seed=3)``); 100 until 2026-12-01, when the step estimate's L-BFGS finish began to tell
these deletions apart (at 10, 30 of 30 deletions of an untrained two-layer GCN were told in 914 evaluations; at 100,
28 in 932 and 2 ran out of their 300)."""


def beyond_reach(flat: Tensor, anchor: Tensor) -> str | None:
    """Why ``flat`` is too far from ``anchor`` (``θ̂``) for a minimum near it (:data:`FAR`), or ``None``.

    Args:
        flat: the weights reached.
        anchor: the given weights.

    Returns:
        A sentence naming the distance and the bound, or ``None`` within it.
    """
    reach = FAR * max(1.0, float(torch.linalg.vector_norm(anchor)))
    moved = float(torch.linalg.vector_norm(flat.detach() - anchor))
    if moved <= reach:
        return None
    return f"the re-optimisation moved the weights {moved:.3g} from the given ones (more than {reach:.3g})"


def proximal_objective(
    fm: FunctionalModel,
    inputs: GraphInputs,
    rows: Tensor,
    rest: Tensor,
    y: Tensor,
    m: int,
    mu: float,
    *,
    first: FirstLayerCache | None = None,
    changed: Tensor | None = None,
    tilt: Callable[[Tensor], Tensor] | None = None,
    graph: GraphInputs | None = None,
    tilt_hat: tuple[Tensor, Tensor] | None = None,
    touched: Tensor | None = None,
) -> Callable[[Tensor], Evaluation]:
    """``θ ↦ (F(θ), ∇F(θ), test probabilities)`` for the proximal objective on ``G − v``:
    ``F(θ) = (1/m)·Σ_{rest} ℓ_j(θ; G − v) + (λ/2)·‖θ‖² + (μ/2)·‖θ − θ̂‖²``; ``inputs``: those of ``G − v`` (or of its
    training nodes' computation graph), ``rows``: the ``m`` training rows there, then possibly the test rows (whose
    probabilities come from the same pass; ``None`` without them), ``rest``: the training positions kept (a mask
    over the first ``m``). ``first``: the computation graph's first layer at ``θ̂``
    (:mod:`~bind_core.influence.firstlayer`; ``inputs`` are then that graph's), reused at ``θ̂`` except at the rows
    ``changed`` (positions there), and remembered at every evaluation. ``tilt``: the Bregman tilt ``r(θ)`` on the
    full graph, added to ``F`` (``None``: the plain proximal objective). ``graph``: the training nodes' computation
    graph on ``G`` itself (:meth:`FunctionalModel.objective_rows`, ``rows`` its training rows), given with ``first``
    and ``changed``: the tilt is then read from the same pass, its first layer ``G − v``'s with the ``changed`` rows
    computed again (:meth:`FirstLayerCache.on_graph`), rather than from a pass of its own (``tilt`` is then
    :meth:`FunctionalModel.tilt_from_logits` on those logits, equal to ``fm.tilt`` to rounding). ``tilt_hat``:
    ``(r(θ̂), ∇r(θ̂))``, the same for every deletion (the tilt reads ``G``): at ``θ̂`` itself they are added rather
    than computed. ``touched``: with ``graph``, the positions among the ``m`` training rows whose outputs on ``G`` and
    ``G − v`` may differ (:func:`touched_rows`): the tilt's pass then computes only those on ``G`` and reads the rest
    from ``G − v``'s (equal there), rather than every training row again."""
    theta_hat = fm.theta
    shared = graph is not None and first is not None and changed is not None and inputs.x_prop is not None
    # the positions and their rows: one tensor per deletion, which its layers' rows are kept for (data/ladder.py)
    recomputed = None if touched is None else (touched, rows[touched])

    def evaluate(at: Tensor) -> Evaluation:
        probe = at.detach().clone().requires_grad_(True)
        hat = tilt is not None and tilt_hat is not None and at is theta_hat
        on_graph = None
        if first is None or inputs.x_prop is None:
            logits = fm.logits(probe, rows, inputs)
        else:
            h = first.rows(at, probe, inputs.x_prop, changed)
            logits = first.split.logits(probe, h, inputs, rows)
            if shared and not hat and graph is not None and changed is not None:
                h_graph = first.on_graph(probe, h, graph, changed)
                if recomputed is None:
                    on_graph = first.split.logits(probe, h_graph, graph, rows)
                else:
                    own = first.split.logits(probe, h_graph, graph, recomputed[1])
                    on_graph = logits[:m].index_put((recomputed[0],), own)
        move = probe - theta_hat
        value = (
            node_losses(logits[:m][rest], y).sum() / m
            + 0.5 * fm.weight_decay * (probe * probe).sum()
            + 0.5 * mu * (move * move).sum()
        )
        if on_graph is not None:
            value = value + fm.tilt_from_logits(probe, on_graph)
        elif tilt is not None and not hat:
            value = value + tilt(probe)
        (grad_f,) = torch.autograd.grad(value, probe)
        if hat and tilt_hat is not None:
            value, grad_f = value + tilt_hat[0], grad_f + tilt_hat[1]
        proba = probabilities(logits[m:].detach()) if logits.shape[0] > m else None
        return float(value.detach()), grad_f, proba

    return evaluate


def touched_rows(graph: GraphInputs, rows: Tensor, changed: Tensor, layers: int) -> Tensor:
    """The positions in ``rows`` (the training rows, in ``graph``'s numbering) whose outputs on ``G − S`` may differ
    from those on ``G``: the rows within ``layers − 1`` hops of the rows ``changed`` (positions in ``graph``: those
    whose aggregated features, and propagation matrix row, ``S`` changed). A layer's output differs from ``G``'s only
    where its input or its matrix row does, so each layer after the first spreads the difference one hop further.

    Args:
        graph: the inputs of ``G`` (or of its training nodes' computation graph, whose rows near the training rows are
            ``G``'s).
        rows: the training rows there.
        changed: the positions there of the rows ``S`` changed.
        layers: the model's layers.

    Returns:
        The positions in ``rows`` (sorted).
    """
    assert graph.adjacency is not None
    near = torch.zeros(graph.adjacency.num_nodes, dtype=torch.bool, device=rows.device)
    near[reach(graph.adjacency, changed, layers - 1)] = True
    return torch.nonzero(near[rows]).flatten()
