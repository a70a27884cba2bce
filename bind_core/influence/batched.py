"""Many deletions of one model settled together: the step estimate's chord steps in one batched pass per round.

A deletion's settle (:meth:`bind_core.influence.step.Stepper.delete`) is a few hundred small operations (the
objective's forward and backward passes on the training nodes' computation graph, Γ read twice on the test rows),
bound by kernel launches and the host's synchronisations rather than by arithmetic. Here a batch of deletions is
settled in lockstep: each round evaluates every unsettled member's candidate in one pass, ``torch.func.vmap`` over
the members' weights and their reduced graphs' values (the structure of ``G − S`` is ``G``'s with explicit zeros,
:mod:`bind_core.influence.reduce`, so a batch of them is one block-diagonal CSR product,
:func:`bind_core.data.sparse.spmm`), and reads Γ back once per batch. Each member keeps its own chord-step state
(weights, step, halvings), so it takes the same steps as when settled alone, and its results equal the sequential
ones to rounding (the sums' order in a batched product; tested at 1e-10 relative).

Made for the computation-graph path of multi-layer GCN, GIN and SAGE (:attr:`Stepper.first` and
:attr:`Stepper.view` set); :func:`batch_size` gives 1 elsewhere, and a batch of one is settled by
:meth:`Stepper.delete` itself.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch
from torch import Tensor

from bind_core.influence.anderson import Mixing
from bind_core.influence.batch_inputs import BatchInputs, Structures
from bind_core.influence.step import HALVINGS, STALL_HALVINGS, STALL_SHARE, Deletion, Stepper
from bind_core.models.gnn import node_losses, probabilities

BATCH_BYTES = {"cpu": 0, "cuda": 4 * 2**30}
"""The default memory budget of one batch of deletions (:func:`batch_size`) by device type. On a CPU a deletion is
bound by arithmetic and memory traffic, and a batch that leaves the caches costs more per deletion than one at a time
(docs/SCALE.md, issue 36: 64 batched deletions of the 20,000-node two-layer GCN cost twice what one does); since the
sequential path shares the Bregman tilt's first layer too, one at a time costs less than the small batches that fit
the caches (docs/SCALE.md, "Per-deletion arithmetic": 19 against 24 ms a deletion in batches of 2 at 20,000 nodes,
17 against 26 in batches of 4 on Income), and a batch of edge deletions costs 25–55% more than one at a time (its
extreme edges mostly stall and are settled again alone), so the CPU's budget is 0; on a GPU a deletion is bound by
kernel launches and the host's synchronisations, which a batch shares, so it is large. Other devices take the
CPU's."""


def default_batch_bytes(device: torch.device) -> int:
    """The default budget for a model on ``device`` (:data:`BATCH_BYTES`), for node and edge deletions alike.

    Args:
        device: the model's device.

    Returns:
        Bytes one batch may hold (0: one at a time).
    """
    return BATCH_BYTES.get(device.type, BATCH_BYTES["cpu"])


def batch_size(stepper: Stepper, budget: int | None = None) -> int:
    """How many deletions one batch settles: ``budget // bytes_per_deletion`` (:meth:`Structures.bytes_per_deletion`:
    the member's stacked inputs, its passes' activations and its block-diagonal indices), at least 1 and at most the
    training nodes, and 1 where batching does not apply (no computation-graph view or first-layer cache, other than
    two layers, or ``budget`` 0).

    Args:
        stepper: the model's stepper.
        budget: bytes one batch may hold; ``None``: :func:`default_batch_bytes` of the model's device.

    Returns:
        The batch size.
    """
    budget = default_batch_bytes(stepper.fm.device) if budget is None else budget
    if budget <= 0 or not batchable(stepper):
        return 1
    return max(1, min(stepper.m, budget // Structures.of(stepper).bytes_per_deletion()))


def batchable(stepper: Stepper) -> bool:
    """Whether ``stepper``'s deletions can be settled in batches: a two-layer GCN, GIN or SAGE evaluated on its
    training nodes' computation graph (a view and a first-layer cache)."""
    return stepper.first is not None and stepper.view is not None and len(stepper.fm.module.convs) == 2


def delete_many(stepper: Stepper, sets: list[list[int]]) -> list[Deletion]:
    """:meth:`Stepper.delete` of each set of training positions: in one batch (:func:`settle_batch`) where the
    stepper supports it and there is more than one set, else one at a time.

    Args:
        stepper: the model's stepper.
        sets: the sets of training positions, each deleted on its own.

    Returns:
        One :class:`~bind_core.influence.step.Deletion` per set, in order.
    """
    if len(sets) > 1 and batchable(stepper):
        return settle_batch(stepper, sets)
    return [stepper.delete(positions) for positions in sets]


def delete_edges_many(stepper: Stepper, edges: list[Tensor]) -> list[Deletion]:
    """:meth:`Stepper.delete_edges` of each set of undirected edges (``[k, 2]`` each): in one batch
    (:func:`settle_edge_batch`) where the stepper supports it and there is more than one set, else one at a time.

    Args:
        stepper: the model's stepper.
        edges: the sets of edges, each deleted on its own.

    Returns:
        One :class:`~bind_core.influence.step.Deletion` per set, in order.
    """
    if len(edges) > 1 and batchable(stepper):
        return settle_edge_batch(stepper, edges)
    return [stepper.delete_edges(pairs) for pairs in edges]


def settle_batch(stepper: Stepper, sets: list[list[int]]) -> list[Deletion]:
    """Settle the deletion of each set of training positions in ``sets`` (:meth:`Stepper.delete`, each set on its own
    ``G − S``), all in one batched pass per chord round.

    Args:
        stepper: the model's stepper (with a computation-graph view and a first-layer cache).
        sets: training positions, one list per deletion.

    Returns:
        One :class:`Deletion` per set, in order.
    """
    return _settle(stepper, BatchInputs.gather(stepper, sets), lambda k: stepper.delete(sets[k]))


def settle_edge_batch(stepper: Stepper, edges: list[Tensor]) -> list[Deletion]:
    """Settle the deletion of each set of undirected edges (:meth:`Stepper.delete_edges`, each on its own ``G − e``),
    all in one batched pass per chord round: an edge deletion only rewrites the reduced graph's values
    (:meth:`~bind_core.influence.reduce.GraphReducer.reduce_edges`) and removes no loss. A member the chord steps
    leave above ``tol``, or with a test decided within rounding, is settled again alone by
    :meth:`Stepper.delete_edges` (whose L-BFGS finish takes over where the chord steps stall).

    Args:
        stepper: the model's stepper (with a computation-graph view and a first-layer cache).
        edges: ``[k, 2]`` undirected edges, one tensor per deletion.

    Returns:
        One :class:`Deletion` per set, in order.
    """
    return _settle(stepper, BatchInputs.gather_edges(stepper, edges), lambda k: stepper.delete_edges(edges[k]))


def _settle(stepper: Stepper, batch: BatchInputs, alone: Callable[[int], Deletion]) -> list[Deletion]:
    """Settle every member of ``batch`` in lockstep; ``alone(k)`` settles member ``k`` by itself (the exactness
    guard's path)."""
    fm, m = stepper.fm, stepper.m
    objective = BatchedObjective(stepper, batch)
    size = int(batch.rest.shape[0])
    hat = fm.theta.expand(size, -1).clone()
    value, grad = objective(hat, None, at_hat=True)
    assert objective.rows is not None
    unchanged = objective.test_proba_at_hat()
    grad_c = (stepper.grad_objective.unsqueeze(0) - grad) * m
    first_step = stepper.solve_damped(grad_c.T.contiguous()).T / m
    state = _chord_steps(stepper, objective, _Round.start(stepper, value, grad, objective.rows))
    at, grad, taken, close = state.at, state.grad, state.taken, state.close.cpu()
    moved = objective.test_proba(at, state.rows)
    with torch.no_grad():
        direct = (_gammas(stepper, unchanged) - stepper.base_gamma).cpu()
        delta = (_gammas(stepper, moved) - stepper.base_gamma).cpu()
        first_order = (first_step @ stepper.grad_gamma.T).cpu()
    residual = grad.abs().amax(dim=1).cpu()
    at_cpu, first_cpu, taken_cpu = at.detach().cpu(), first_step.detach().cpu(), taken.cpu()
    settled = [
        Deletion(
            delta=delta[k],
            direct=direct[k],
            first_order=first_order[k],
            first_step=first_cpu[k],
            weights=at_cpu[k],
            taken=int(taken_cpu[k]),
            residual=float(residual[k]),
        )
        for k in range(size)
    ]
    # Where rounding can steer a deletion (a test decided within it, or a settle left short of tol), the batch's sums
    # and the sequential path's may take different steps: such a deletion is settled again alone, and is the
    # sequential path's to the bit (on Income, 2 of 1000 deletions had moved by 4·10⁻⁸ of the largest ΔΓ).
    again = [k for k, out in enumerate(settled) if out.residual > stepper.tol or bool(close[k])]
    for k in again:
        settled[k] = alone(k)
    return settled


CLOSE_CALL = 1e-14
"""A chord step's Armijo test is a close call when the objective's decrease misses its bound by at most this
fraction of the objective's value, and the stopping test when the gradient's largest entry is within this fraction of
``tol`` (some tens of times the rounding of the batch's sums against the sequential path's)."""


def _close_to_tol(grad: Tensor, tol: float) -> Tensor:
    """Whether each row's largest gradient entry is within :data:`CLOSE_CALL` (relative) of ``tol``."""
    return (grad.abs().amax(dim=1) - tol).abs() <= CLOSE_CALL * tol


def _gammas(stepper: Stepper, proba: Tensor) -> Tensor:
    """``[B, 2]``: Γ of each member's test probabilities ``[B, t, C]``."""
    if proba.shape[-1] == 2:
        return stepper.gammas(proba)
    return torch.stack([stepper.gammas(p) for p in proba])


@dataclass
class _Round:
    """The chord steps' state per member (:func:`_chord_steps`)."""

    at: Tensor
    value: Tensor
    grad: Tensor
    taken: Tensor
    tries: Tensor
    direction: Tensor
    slope: Tensor
    active: Tensor
    rows: Tensor
    """``[B, ·, hidden]``: the first layer on the computation graph at ``at``."""
    close: Tensor
    """Whether a member's Armijo test or stopping test was decided within rounding (:data:`CLOSE_CALL`)."""

    @classmethod
    def start(cls, stepper: Stepper, value: Tensor, grad: Tensor, rows: Tensor) -> _Round:
        """Every member at ``θ̂``, where the objective is ``value`` with gradient ``grad`` and first layer ``rows``."""
        size = value.numel()
        return cls(
            at=stepper.fm.theta.expand(size, -1).clone(),
            value=value,
            grad=grad,
            taken=torch.zeros(size, dtype=torch.long, device=value.device),
            tries=torch.zeros(size, dtype=torch.long, device=value.device),
            direction=torch.zeros_like(grad),
            slope=torch.zeros_like(value),
            active=grad.abs().amax(dim=1) > stepper.tol,
            rows=rows,
            close=_close_to_tol(grad, stepper.tol),
        )


def _chord_steps(stepper: Stepper, objective: BatchedObjective, state: _Round) -> _Round:
    """:meth:`Stepper._chord_steps` for every member at once: each round, the members that took a step get a new
    chord direction, and every unsettled member's candidate is evaluated in one pass; a candidate is taken when the
    objective decreases enough (Armijo), else halved, and a member stops after :data:`~bind_core.influence.step.STEPS`
    steps, at ``tol``, after :data:`~bind_core.influence.step.HALVINGS` halvings of one step, or once its steps have
    stalled (:data:`~bind_core.influence.step.STALL_HALVINGS`). Returns the state where the members stopped."""

    size = state.value.numel()
    fresh = state.active.clone()
    mixing = Mixing.of(size, state.at.shape[1], state.at) if stepper.mixes else None
    while bool(state.active.any()):
        new = fresh.nonzero().flatten()
        if new.numel():
            direction = stepper.solve_damped(state.grad[new].T.contiguous()).T
            if mixing is None:
                state.direction[new], state.slope[new] = direction, (state.grad[new] * direction).sum(dim=1)
            else:
                state.direction[new], state.slope[new] = mixing.step(new, state.at[new], direction, state.grad[new])
            state.tries[new] = 0
        members = state.active.nonzero().flatten()
        candidate = state.at[members] - state.direction[members]
        value_new, grad_new = objective(candidate, members if members.numel() < size else None)
        assert objective.rows is not None
        bound = state.value[members] - 1e-4 * state.slope[members]
        ok = value_new <= bound
        state.close[members] |= (value_new - bound).abs() <= CLOSE_CALL * state.value[members].abs()
        took, halved = members[ok], members[~ok]
        state.at[took], state.value[took], state.grad[took] = candidate[ok], value_new[ok], grad_new[ok]
        state.rows[took] = objective.rows[ok]
        state.taken[took] += 1
        state.direction[halved], state.slope[halved] = 0.5 * state.direction[halved], 0.5 * state.slope[halved]
        state.tries[halved] += 1
        state.active[halved[state.tries[halved] >= HALVINGS]] = False
        going = (state.taken[took] < stepper.steps) & (state.grad[took].abs().amax(dim=1) > stepper.tol)
        short = state.direction[took].norm(dim=1) <= STALL_SHARE * (state.at[took] - stepper.fm.theta).norm(dim=1)
        going &= ~((state.tries[took] >= STALL_HALVINGS) & short)  # stalled (step.STALL_HALVINGS)
        state.active[took] = going
        state.close[took] |= _close_to_tol(state.grad[took], stepper.tol)
        fresh = torch.zeros_like(state.active)
        fresh[took] = going
    return state


class BatchedObjective:
    """The proximal objective (:func:`bind_core.influence.proximal.proximal_objective`) of each member of a batch
    on its own ``G − S``'s computation graph, and the members' test probabilities, each in one batched pass. The
    first layer runs batched over the members' weights (``vmap``); its activation runs outside ``vmap`` on the
    stacked rows, so that at ``θ̂`` only the rows a member changed are activated (the rest linearised about the full
    graph's, as :meth:`FirstLayerCache.activate`); the layers after it run batched over weights, first-layer rows and
    block values. Each evaluation's first-layer rows are kept (:attr:`rows`) for Γ's read at the weights reached."""

    def __init__(self, stepper: Stepper, batch: BatchInputs) -> None:
        assert stepper.first is not None
        self.stepper, self.batch, self.first = stepper, batch, stepper.first
        self.structures = batch.structures
        self.rows: Tensor | None = None
        """``[k, rows, hidden]``: the last evaluation's activated first layer on the computation graph."""

    def __call__(self, at: Tensor, members: Tensor | None, *, at_hat: bool = False) -> tuple[Tensor, Tensor]:
        """``(F, ∇F)`` of the ``members`` (all when ``None``) at their weights ``at`` (``[k, p]``): ``[k]``,
        ``[k, p]``. ``at_hat``: every member at ``θ̂``, where the first layer's kept rows are the full graph's.

        The Bregman tilt reads the training rows' logits on ``G`` itself: its first layer is ``G − S``'s except at
        the rows ``S`` changed, so only those are computed again (``G``'s features there), and the last layer runs
        on ``G``'s block (the sequential path evaluates the model on ``G`` in a pass of its own)."""
        stepper, first, fm = self.stepper, self.first, self.stepper.fm
        split, s = first.split, self.structures
        z, changed, index, valid, rest, block, block_t = self.batch.objective_part(members)
        y, m, mu, theta_hat, lam = stepper.y[stepper.train], stepper.m, stepper.mu, fm.theta, fm.weight_decay
        probe = at.detach().clone().requires_grad_(True)
        pre = torch.func.vmap(split.pre)(probe, z)
        member, row = changed.nonzero(as_tuple=True)
        assert s.graph.x_prop is not None
        pre_g = pre.index_put((member, row), torch.func.vmap(split.pre)(probe, s.graph.x_prop[index])[valid])
        if at_hat:
            h_g = first.act0 + first.slope0 * (pre_g - first.pre0)
            h = (first.act0 + first.slope0 * (pre - first.pre0)).index_put((member, row), split.act(pre[member, row]))
        else:
            h = split.act(pre)
            h_g = h.index_put((member, row), split.act(pre_g[member, row]))
        self.rows = h.detach()
        graph_block, graph_block_t = s.graph_block()

        def one(theta: Tensor, h: Tensor, h_g: Tensor, rest: Tensor, block: Tensor, block_t: Tensor) -> Tensor:
            logits = split.logits(theta, h, s.view_inputs(block, block_t), stepper.train_rows)
            on_graph = split.logits(theta, h_g, s.view_inputs(graph_block, graph_block_t), stepper.train_rows)
            move = theta - theta_hat
            value = (node_losses(logits, y) * rest).sum() / m
            value = value + 0.5 * lam * (theta * theta).sum() + 0.5 * mu * (move * move).sum()
            return value + fm.tilt_from_logits(theta, on_graph)

        values = torch.func.vmap(one)(probe, h, h_g, rest, block, block_t)
        (grad,) = torch.autograd.grad(values.sum(), probe)
        return values.detach(), grad

    def test_proba_at_hat(self) -> Tensor:
        """``[B, t, C]``: each member's test probabilities at ``θ̂`` on its ``G − S`` (Γ's direct term): the full
        graph's first layer, recomputed at the rows ``S`` changed (:meth:`Stepper._proba_at_hat`)."""
        stepper, split, theta = self.stepper, self.first.split, self.stepper.fm.theta
        z, changed, block, block_t = self.batch.test_part()
        assert stepper.base_first is not None
        with torch.no_grad():
            member, row = changed.nonzero(as_tuple=True)
            h = stepper.base_first.expand(z.shape[0], -1, -1).clone()
            h[member, row] = split.act(split.pre(theta, z[member, row]))
            return self._test_proba(theta.expand(z.shape[0], -1), h, block, block_t)

    def test_proba(self, at: Tensor, rows: Tensor) -> Tensor:
        """``[B, t, C]``: each member's test probabilities at its weights ``at`` (``[B, p]``) on its ``G − S``, with
        the computation graph's first-layer rows ``rows`` (``[B, ·, hidden]``, the evaluation at ``at``) and the
        other rows computed (:meth:`FirstLayerCache.full_rows`)."""
        first, split = self.first, self.first.split
        z, _, block, block_t = self.batch.test_part()
        with torch.no_grad():
            h = torch.empty(*z.shape[:2], rows.shape[2], dtype=z.dtype, device=z.device)
            h[:, first.nodes] = rows
            h[:, first.others] = split.act(torch.func.vmap(split.pre)(at, z[:, first.others]))
            return self._test_proba(at, h, block, block_t)

    def _test_proba(self, at: Tensor, h: Tensor, block: Tensor, block_t: Tensor) -> Tensor:
        """The members' test probabilities from their weights, activated first layers and test-block values."""
        stepper, split, s = self.stepper, self.first.split, self.structures

        def one(theta: Tensor, h: Tensor, block: Tensor, block_t: Tensor) -> Tensor:
            return probabilities(split.logits(theta, h, s.test_inputs(block, block_t), stepper.test))

        return torch.func.vmap(one)(at, h, block, block_t)
