"""A naive implementation of BIND's estimate *as the paper writes it*, for the speed comparison only.

Per training node ``v`` (no batching, no reuse of the propagated features, every forward over the whole graph):

1. ``∇ℓ_v``: one full-graph forward pass and one ``autograd.grad`` of ``ℓ_v``;
2. the non-i.i.d. term: one full-graph forward on ``G − v`` (``v``'s edges removed and the GCN normalisation
   recomputed), ``∇ Σ_{j∈T(v)} ℓ_j(G−v)`` by autograd, minus ``Σ_{j∈T(v)} ∇ℓ_j(G)`` (from step 1);
3. ``s = H⁻¹∇Γ`` once, by LiSSA (``bind_core.influence.solvers.solve_lissa``) with depth 5000 (the reference
   code's setting; its scale from power iteration, damping 0.01), each Hessian-vector product by double
   backward through a fresh full-graph forward (3× faster here than ``torch.func``'s forward-over-reverse);
   one right-hand side, for ``Γ = λΓ_SP + (1−λ)Γ_EO`` (half the cost of solving for Γ_SP and Γ_EO
   separately: this favours the naive implementation in the speed comparison);
4. ``ΔΓ_v = (1/m)·(∇ℓ_v + non-i.i.d.)ᵀ s`` (same sign convention as ``bind_core.influence``).

The paper has no *direct* term (test nodes whose output changes with fixed weights when ``v`` goes); since the
forward on ``G − v`` of step 2 already gives it, it is returned separately (``direct``) at no extra cost, so
the output can be compared with ``estimate(direct=True)`` as well as ``estimate(direct=False)``.
"""

from __future__ import annotations

import copy
import time
from dataclasses import dataclass, field

import torch
from torch import Tensor
from torch.func import functional_call

from bind_core.data.graph import Graph
from bind_core.fairness.metrics import gamma_eo, gamma_sp
from bind_core.influence.solvers import solve_lissa
from bind_core.models.gnn import GNN, node_losses, probabilities
from bind_core.models.propagation import GraphInputs, gcn_norm
from bind_core.training.fit import TrainedModel


@dataclass
class NaiveResult:
    """``delta`` (paper's terms: i.i.d. + non-i.i.d.) and ``direct`` per training node, aligned with
    ``train_idx``; ``timings`` per stage in seconds."""

    delta: Tensor
    direct: Tensor
    timings: dict[str, float] = field(default_factory=dict)
    lissa: dict[str, float] = field(default_factory=dict)


def _full_inputs(module: GNN, graph: Graph, edge_index: Tensor) -> GraphInputs:
    """Model inputs over the whole graph *without* the one-layer-GCN shortcut (message passing every call)."""
    x = graph.x.to(torch.float64)
    if module.config.arch == "gcn":
        ei, w = gcn_norm(edge_index, graph.num_nodes, torch.float64)
        return GraphInputs(x=x, edge_index=ei, edge_weight=w, x_prop=None)
    return GraphInputs(x=x, edge_index=edge_index, edge_weight=None, x_prop=None)


def naive_estimate(
    model: TrainedModel, graph: Graph, *, lam: float = 0.5, depth: int = 5000, limit: int | None = None
) -> NaiveResult:
    """The naive estimate; ``limit`` restricts the per-node loops to the first ``limit`` training nodes."""
    module = copy.deepcopy(model.module).double().eval()
    names = [n for n, _ in module.named_parameters()]
    params = [p for _, p in module.named_parameters()]
    shapes = [p.shape for p in params]
    theta = torch.cat([p.detach().reshape(-1) for p in params])
    wd = model.train_config.weight_decay
    train, test = graph.train_idx, graph.test_idx
    m = int(train.numel())
    y = graph.y
    full = _full_inputs(module, graph, graph.edge_index)

    def unflatten(flat: Tensor) -> dict[str, Tensor]:
        out, start = {}, 0
        for name, shape in zip(names, shapes, strict=True):
            size = int(torch.Size(shape).numel())
            out[name] = flat[start : start + size].view(shape)
            start += size
        return out

    def logits(flat: Tensor, inputs: GraphInputs) -> Tensor:
        return functional_call(module, unflatten(flat), (inputs, None))

    def objective(flat: Tensor) -> Tensor:
        losses = node_losses(logits(flat, full)[train], y[train])
        return losses.mean() + 0.5 * wd * (flat * flat).sum()

    def gamma_of(proba: Tensor) -> Tensor:
        sens_t, y_t = graph.sens[test], y[test]
        groups = graph.num_groups
        return lam * gamma_sp(proba, sens_t, num_groups=groups) + (1 - lam) * gamma_eo(
            proba, y_t, sens_t, num_groups=groups
        )

    timings: dict[str, float] = {}
    # ∇Γ (one full forward + backward) and the LiSSA solve.
    t0 = time.perf_counter()
    th = theta.clone().requires_grad_(True)
    base_proba = probabilities(logits(th, full))[test]
    g_gamma = torch.autograd.grad(gamma_of(base_proba), th)[0]
    base_gamma = float(gamma_of(base_proba.detach()))

    def hvp(vec: Tensor) -> Tensor:
        # Double backward through a fresh full-graph forward, as the reference code does per LiSSA step.
        th = theta.clone().requires_grad_(True)
        (grad,) = torch.autograd.grad(objective(th), th, create_graph=True)
        return torch.autograd.grad(grad @ vec, th)[0]

    s, info = solve_lissa(hvp, g_gamma.unsqueeze(1), depth=depth)
    s = s[:, 0]
    timings["lissa"] = time.perf_counter() - t0

    count = m if limit is None else min(limit, m)
    # 1. One full-graph forward + autograd pass per training node.
    t0 = time.perf_counter()
    grads = torch.zeros(m, theta.numel(), dtype=torch.float64)
    for k in range(count):
        th = theta.clone().requires_grad_(True)
        loss = node_losses(logits(th, full)[train[k : k + 1]], y[train[k : k + 1]]).sum()
        grads[k] = torch.autograd.grad(loss, th)[0]
    timings["per_node_gradients"] = time.perf_counter() - t0

    # 2. Non-i.i.d. term: a full forward on G − v for each v.
    t0 = time.perf_counter()
    pos = torch.full((graph.num_nodes,), -1, dtype=torch.long)
    pos[train] = torch.arange(m)
    src, dst = graph.edge_index
    non_iid = torch.zeros(m, theta.numel(), dtype=torch.float64)
    direct = torch.zeros(m, dtype=torch.float64)
    for k in range(count):
        v = int(train[k])
        keep = (src != v) & (dst != v)
        reduced = _full_inputs(module, graph, graph.edge_index[:, keep])
        neigh = dst[src == v]
        t_nodes = neigh[pos[neigh] >= 0]
        th = theta.clone().requires_grad_(True)
        out = logits(th, reduced)
        if t_nodes.numel():
            loss = node_losses(out[t_nodes], y[t_nodes]).sum()
            g_reduced = torch.autograd.grad(loss, th)[0]
            non_iid[k] = grads[pos[t_nodes]].sum(0) - g_reduced
        with torch.no_grad():
            # Γ on the test nodes of G − v (v itself is a training node, so all test nodes remain).
            direct[k] = float(gamma_of(probabilities(out.detach())[test])) - base_gamma
    timings["non_iid"] = time.perf_counter() - t0

    delta = (grads + non_iid) @ s / m
    timings["total"] = sum(timings.values())
    return NaiveResult(delta=delta, direct=direct, timings=timings, lissa={"scale": info.details["scale"]})
