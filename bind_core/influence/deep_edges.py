"""Edge attribution for multi-layer and attention models: damped first-order estimates of every edge, settled
damped steps (Γ exact) for the edges the audit shows and acts on.

The question is the node estimate's for these models (:mod:`bind_core.influence.step`): the **proximal response**
to deleting undirected edge ``e = (p, q)`` (both directions),

    θ_e^μ = argmin_θ  L(θ; G − e) + (λ/2)·‖θ‖² + (μ/2)·‖θ − θ̂‖²,      ΔΓ_e = Γ(θ_e^μ; G − e) − Γ(θ̂; G),

with the damping ``μ = DAMPING_RULE·λ_max`` of the node estimate. No loss is removed; the losses of the training
nodes whose computation graph holds the edge change. From ``θ̂`` one damped Newton step gives the first-order value

    ΔΓ_e ≈ (1/m)·Σ_{i ∈ train, output changed} (a_i − b_{e,i})  +  [Γ(θ̂; G − e) − Γ(θ̂; G)],

with ``s_μ = (H + μI)⁻¹·∇Γ``, ``a_i = ∇ℓ_i(G)ᵀ·s_μ`` and ``b_{e,i} = ∇ℓ_i(G − e)ᵀ·s_μ``; the bracket (the direct
term) is exact: the test probabilities recomputed on ``G − e`` and Γ evaluated with them. This needs one solve
for every edge and a forward-mode pass over the rows the deletion changes: layer ``l`` (``1..L``) changes at the
nodes within ``l − 1`` hops of ``p`` or ``q`` (``l`` for GCN, whose normalisation changes at the endpoints'
neighbours), one hop less than deleting a node; only those rows are recomputed, batched over edges
(:func:`bind_core.influence.incremental.layer_spec`), so the cost grows with the neighbourhoods, not the graph.

First-order values rank the proximal responses well but can be several times too large for a flat objective
(docs/METHOD.md, "Multi-layer and attention models"). So the ``settle`` most harmful and most helpful edges by that
ranking, the ones an audit shows and deletes, are settled as nodes are: damped Newton steps on ``G − e`` until the
proximal objective's gradient is below ``tol``, and Γ evaluated exactly there (:meth:`Stepper.delete_edges`). A
settled value is usually smaller than its first-order value, which can let further edges into the top; they are
settled in turn, in rounds, until the top ``settle`` at each end are all settled values (at most
:data:`SETTLE_ROUNDS` times ``2·settle`` edges).
``delta`` holds the settled value where there is one, the first-order value elsewhere; ``parts["first_order"]``
keeps the first-order value of every edge and ``settled`` says which edges were settled.

**Sign convention** (as for nodes): ``delta = Γ(after deleting e) − Γ(now)``; negative: the edge is harmful.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace

import torch
from torch import Tensor

from bind_core.data.graph import Graph, positions
from bind_core.errors import ConfigError
from bind_core.influence.batched import batch_size, delete_edges_many
from bind_core.influence.edges import EdgeInfluenceResult, checked_edges
from bind_core.influence.functional import FunctionalModel, dloss_dlogits, estimate_targets, gammas_from_proba
from bind_core.influence.incremental import DeletionSpec, IncrementalBatch, layer_spec, union_batches
from bind_core.influence.neighbourhood import Csr
from bind_core.influence.rowblocks import test_probabilities
from bind_core.influence.step import Deletion, Stepper
from bind_core.influence.terms import exact_direct, train_loss_derivatives
from bind_core.influence.threads import settle_each
from bind_core.models.gnn import flat_parameters, probabilities
from bind_core.threads import check_threads
from bind_core.training.fit import TrainedModel

SETTLE = 10
"""Edges settled by damped steps at each end of the ranking: the audit lists the top 10 at each end
(:data:`bind_core.pipeline.edge_section.EDGE_TOP`)."""

SETTLE_ROUNDS = 5
"""Settling stops after ``SETTLE_ROUNDS·2·settle`` edges even if settled values keep letting new edges into the
top (each round settles the unsettled edges among the top ``settle`` at each end by the values so far)."""


def edge_batches(
    fm: FunctionalModel, edges: Tensor, max_rows: int = 20_000, relevant: Tensor | None = None
) -> Iterator[IncrementalBatch]:
    """For ``edges`` (``[E, 2]``): batches of pairs ``(edge position, node)``, every training or test node whose
    output deleting that edge changes, with their logits on ``G − e`` (``batch.v_pos`` holds the edge position),
    about ``max_rows`` input rows a batch."""
    g = fm.graph
    depth = len(fm.module.convs)
    gcn = fm.module.config.arch == "gcn"
    csr = Csr.of_degrees(g.edge_index, g.degree)
    relevant = estimate_targets(g) if relevant is None else relevant
    dtilde = (g.degree + 1).to(torch.float64) if gcn else None

    def deletions() -> Iterator[DeletionSpec]:
        for pos in range(int(edges.shape[0])):
            p, q = int(edges[pos, 0]), int(edges[pos, 1])
            ends = torch.tensor(sorted((p, q)))
            targets = csr.k_hop(ends, depth - 1 + int(gcn))
            targets = targets[relevant[targets]]
            if targets.numel() == 0:
                continue
            outputs = [csr.k_hop(ends, layer + int(gcn)) for layer in range(depth - 1)] + [targets]

            def keep(owner_nodes: Tensor, nb: Tensor, p: int = p, q: int = q) -> Tensor:
                return ~(((owner_nodes == p) & (nb == q)) | ((owner_nodes == q) & (nb == p)))

            yield pos, targets, [layer_spec(csr, out_nodes, keep, ends, dtilde) for out_nodes in outputs]

    return union_batches(fm, deletions(), max_rows)


def first_order_terms(
    fm: FunctionalModel,
    s: Tensor,
    a: Tensor,
    edges: Tensor,
    *,
    max_rows: int = 20_000,
    progress: Callable[[float], None] | None = None,
) -> tuple[Tensor, Tensor, Tensor]:
    """``(Σ_i (a_i − b_{e,i}), direct_e, affects_e)`` for every edge (``[E, 2]``, ``[E, 2]``, ``[E]``; module
    docstring), ``s``: ``[p, 2]`` (the damped solve), ``a``: ``[m, 2]``; the direct term exact. ``progress(fraction
    of the edges done)`` after every batch (it may raise to stop)."""
    g = fm.graph
    n, theta = g.num_nodes, fm.theta
    train_pos, test_pos = positions(g.train_idx, n), positions(g.test_idx, n)
    y = g.y.to(fm.device)
    num = int(edges.shape[0])
    non_iid = torch.zeros(num, 2, dtype=torch.float64, device=fm.device)
    direct = torch.zeros(num, 2, dtype=torch.float64, device=fm.device)
    affects = torch.zeros(num, dtype=torch.bool)
    base = test_probabilities(fm, theta)
    gamma = gammas_from_proba(base, g, fm.groups)
    for batch in edge_batches(fm, edges, max_rows):
        e_pos, node = batch.v_pos, batch.node
        affects[e_pos] = True
        columns = [batch.jvp(theta, s, c) for c in range(2)]
        logits = columns[0][0].detach()
        is_train = train_pos[node] >= 0
        if bool(is_train.any()):
            sel = is_train.to(fm.device)
            slope = dloss_dlogits(logits[sel], y[node[is_train].to(fm.device)])
            b = torch.stack([(slope * tangent[sel]).sum(1) for _, tangent in columns], dim=1)
            non_iid.index_add_(0, e_pos[is_train].to(fm.device), a[train_pos[node[is_train]].to(fm.device)] - b)
        is_test = test_pos[node] >= 0
        if bool(is_test.any()):
            sel = is_test.to(fm.device)
            proba = probabilities(logits[sel])
            exact_direct(fm, base, gamma, e_pos[is_test], test_pos[node[is_test]].to(fm.device), proba, direct)
        if progress is not None:
            progress(float(e_pos.max() + 1) / max(num, 1))
    return non_iid.detach().cpu(), direct.detach().cpu(), affects


def estimate_edges_deep(
    model: TrainedModel,
    graph: Graph,
    *,
    lam: float = 0.5,
    edges: Tensor | None = None,
    settle: int = SETTLE,
    groups: list[int] | None = None,
    stepper: Stepper | None = None,
    max_rows: int = 20_000,
    progress: Callable[[float], None] | None = None,
    batch_bytes: int | None = None,
    threads: int = 1,
) -> EdgeInfluenceResult:
    """ΔΓ of deleting each edge of a multi-layer or attention model (module docstring): the damped first-order
    value of every edge, then damped steps with Γ exact for the ``settle`` most harmful and most helpful ones.

    Args:
        model: the model as given (its weights need not be a minimum: the proximal response is defined anywhere).
        graph: the graph it was trained on.
        edges: ``[k, 2]`` undirected edges (default: all, :func:`~bind_core.influence.edges.undirected_edges`).
        settle: edges settled at each end of the first-order ranking (0: none).
        stepper: the node estimate's :class:`Stepper` for this model (its damped inverse is reused); made here
            if None.
        progress: ``progress(fraction)``.
        batch_bytes: the memory budget of one batch of edge deletions settled together, as for nodes
            (:func:`~bind_core.influence.batched.batch_size`; ``None``: the device's default,
            :data:`~bind_core.influence.batched.BATCH_BYTES`, one at a time on a CPU; 0: one at a time).
        threads: CPU threads settling a round's edges at once (:mod:`bind_core.influence.threads`; the same
            values).
    """
    check_threads(threads, "deletion threads")
    if settle < 0:
        raise ConfigError(f"settle: {settle!r} must be >= 0")
    timings: dict[str, float] = {}
    stepper = _stepper_for(model, graph, groups, stepper, timings)
    und = checked_edges(graph, edges)
    if progress is not None:
        progress(0.1)
    t1 = time.perf_counter()
    batches = None if progress is None else (lambda f: progress(0.1 + 0.4 * f))
    terms = _first_order(stepper, und, int(graph.train_idx.numel()), max_rows, batches)
    timings["first_order"] = time.perf_counter() - t1
    if progress is not None:
        progress(0.5)
    t2 = time.perf_counter()
    settled = _settle_ends(stepper, und, terms, lam, settle, progress, batch_bytes, threads)
    timings["settle"] = time.perf_counter() - t2
    return _result(stepper, und, lam, terms, settled, timings)


def _stepper_for(
    model: TrainedModel, graph: Graph, groups: list[int] | None, stepper: Stepper | None, timings: dict[str, float]
) -> Stepper:
    """``stepper``, checked to be the model's, or a new one (its time in ``timings["solve"]``)."""
    if stepper is None:
        t0 = time.perf_counter()
        stepper = Stepper.build(FunctionalModel.from_trained(model, graph, groups))
        timings["solve"] = time.perf_counter() - t0
        return stepper
    theta = flat_parameters(model.module)[2].to(stepper.fm.theta.device, stepper.fm.theta.dtype)
    if not torch.equal(stepper.fm.theta, theta):
        raise ConfigError("the model's weights are not the ones the stepper was made for")
    return stepper


@dataclass
class _FirstOrder:
    """The first-order terms of every edge (module docstring), ``[E, 2]`` each but ``affects``."""

    non_iid: Tensor
    """``(1/m)·Σ_i (a_i − b_{e,i})``."""
    direct: Tensor
    affects: Tensor
    """``[E]``: deleting the edge changes a training loss or a test prediction."""
    first: Tensor
    """Their sum, the first-order value."""


def _first_order(
    stepper: Stepper, edges: Tensor, m: int, max_rows: int, progress: Callable[[float], None] | None
) -> _FirstOrder:
    """The damped solve ``s_μ``, the training nodes' ``a_i`` and every edge's first-order terms (``m`` training
    nodes; ``progress(fraction of the edges)``)."""
    s = stepper.solve_damped_exactly(stepper.grad_gamma.T.contiguous())  # (H + μI)⁻¹·∇Γ, [p, 2]
    a = train_loss_derivatives(stepper.fm, stepper.fm.theta, s)
    non_iid, direct, affects = first_order_terms(stepper.fm, s, a, edges, max_rows=max_rows, progress=progress)
    return _FirstOrder(non_iid / m, direct, affects, non_iid / m + direct)


@dataclass
class _Settled:
    """Every edge's value after settling the ends of the ranking."""

    exact: Tensor
    """``[E, 2]``: the settled value where there is one, the first-order value elsewhere."""
    settled: Tensor
    """``[E]`` bool: the edges given their damped steps' value."""
    residual: Tensor
    """``[E]``: the proximal gradient's largest entry where a settled edge stopped (0 elsewhere)."""
    far: Tensor
    """``[E]`` bool: the edges whose deletion has no minimum near ``θ̂`` (:attr:`Deletion.far`): they keep their
    first-order value and are not settled."""


def _settle_ends(
    stepper: Stepper,
    edges: Tensor,
    terms: _FirstOrder,
    lam: float,
    settle: int,
    progress: Callable[[float], None] | None,
    batch_bytes: int | None = None,
    threads: int = 1,
) -> _Settled:
    """Settle the ``settle`` most harmful and most helpful edges by the values so far, in rounds, until those at
    both ends are all settled (:data:`SETTLE_ROUNDS` times ``2·settle`` edges at most); ``progress`` runs from
    0.5 to 1. A round's edges are settled in batches of :func:`~bind_core.influence.batched.batch_size`
    (``batch_bytes``), ``threads`` of them at once: the round's picks are chosen before any of them is settled, so
    neither the batches nor the threads change a pick."""
    first, affects = terms.first, terms.affects
    exact = first.clone()
    settled = torch.zeros(edges.shape[0], dtype=torch.bool)
    far = torch.zeros(edges.shape[0], dtype=torch.bool)
    residual = torch.zeros(edges.shape[0], dtype=torch.float64)
    total = lam * first[:, 0] + (1 - lam) * first[:, 1]
    size = batch_size(stepper, batch_bytes)
    done = 0
    while done < SETTLE_ROUNDS * 2 * settle:  # until the top `settle` at each end, by the values so far, are settled
        picks = [pos for pos in _ends(total, affects, settle) if not (settled[pos] or far[pos])]
        if not picks:
            break
        chunks = [picks[start : start + size] for start in range(0, len(picks), size)]

        def put(i: int, outs: list[Deletion], chunks: list[list[int]] = chunks) -> None:
            nonlocal done
            for pos, out in zip(chunks[i], outs, strict=True):
                if out.far is not None:  # no value answers it: its first-order value stays, not settled
                    far[pos], residual[pos] = True, out.residual
                    continue
                exact[pos], settled[pos], residual[pos] = out.delta.double(), True, out.residual
                total[pos] = lam * exact[pos, 0] + (1 - lam) * exact[pos, 1]
            done += len(chunks[i])
            if progress is not None:
                progress(0.5 + 0.5 * min(done / (2 * settle), 1.0))

        settle_each(
            stepper,
            chunks,
            lambda s, chunk: delete_edges_many(s, [edges[p : p + 1] for p in chunk]),
            put,
            threads=threads,
        )
    return _Settled(exact, settled, residual, far)


def _result(
    stepper: Stepper, edges: Tensor, lam: float, terms: _FirstOrder, done: _Settled, timings: dict[str, float]
) -> EdgeInfluenceResult:
    """The estimate's record: the settled values, the parts (which add up) and the solve with the settling counts."""
    gam = stepper.base_gamma.cpu()
    unsettled = int((done.residual > stepper.tol).sum())
    details = {**stepper.solve.details, "settled": int(done.settled.sum()), "unsettled": unsettled}
    details["no_minimum"] = int(done.far.sum())
    exact, first = done.exact, terms.first
    return EdgeInfluenceResult(
        edges=edges,
        delta=lam * exact[:, 0] + (1 - lam) * exact[:, 1],
        delta_sp=exact[:, 0],
        delta_eo=exact[:, 1],
        parts={"non_iid": terms.non_iid, "direct": terms.direct, "first_order": first, "step": exact - first},
        affects=terms.affects,
        lam=lam,
        gamma={"sp": float(gam[0]), "eo": float(gam[1]), "total": float(lam * gam[0] + (1 - lam) * gam[1])},
        solve=replace(stepper.solve, details=details),
        grad_norm=float(stepper.grad_objective.norm()),
        timings=timings,
        settled=done.settled,
    )


def _ends(total: Tensor, affects: Tensor, count: int) -> list[int]:
    """Positions of the ``count`` most negative and ``count`` most positive affecting values (each once)."""
    if count == 0:
        return []
    candidates = torch.nonzero(affects).flatten()
    order = candidates[torch.argsort(total[candidates])]
    low = order[:count].tolist()
    high = order.flip(0)[:count].tolist()
    return list(dict.fromkeys(low + high))
