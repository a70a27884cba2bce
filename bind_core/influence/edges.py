"""Edge attribution: the estimated change of the bias Γ from deleting each undirected edge, by the influence
machinery of the node estimate (one-layer GCN, GIN and SAGE: the row-separable models).

Deleting edge ``e = (u, v)`` (both directions) removes no loss; it changes the aggregated rows ``Z`` of some
nodes, hence (a) the losses of the training nodes among them, which moves the weights, and (b) the predictions
of the test nodes among them at fixed weights. With ``L₋ₑ(θ) = L(θ) + (1/m)·Σ_i (ℓ_i(θ; G−e) − ℓ_i(θ; G))``
one Newton step from ``θ̂`` gives ``Δθ_e ≈ −(1/m)·H⁻¹·Σ_i ∇(ℓ_i(G−e) − ℓ_i(G))``, hence

    ΔΓ_e ≈ (1/m)·Σ_{i ∈ train, row changed} (a_i − b_{e,i})  +  [Γ(θ̂; G−e) − Γ(θ̂; G)],

with ``s = H⁻¹·∇Γ`` (the node estimate's one solve), ``a_i = ∇ℓ_i(G)ᵀ·s`` (its i.i.d. pass) and
``b_{e,i} = ∇ℓ_i(G−e)ᵀ·s`` (one forward-mode pass over all changed rows of all edges, in batches; for GCN,
which is affine in its row, a combination of per-node projections computed once: :func:`edge_terms`). The first sum
is the node estimate's non-i.i.d. term with no deleted loss (``parts["non_iid"]``); the bracket is the direct
term (``parts["direct"]``), linearised in the test probabilities by default, exact with ``direct_exact=True``.

Which rows change, exactly (no approximation; checked against rebuilding ``G − e``):

* GCN (``Z = D̃^{-1/2}(A + I)D̃^{-1/2}·X``): ``d̃_u`` and ``d̃_v`` fall by one, so every row whose closed
  neighbourhood holds ``u`` or ``v`` changes: the rows of ``N[u] ∪ N[v]``. With ``S_i = √d̃_i·z_i`` and
  ``c_w = 1/√(d̃_w − 1) − 1/√d̃_w``: a neighbour ``i ∉ {u, v}`` gets ``S'_i = S_i + Σ_{w ∈ {u,v} ∩ N(i)} x_w·c_w``
  (its own degree is unchanged); the endpoint ``u`` gets ``S'_u = S_u − x_v/√d̃_v + x_u·c_u`` and
  ``z'_u = S'_u/√(d̃_u − 1)`` (``v`` likewise).
* GIN (``(1 + ε)·x_i + Σ_{N(i)} x_w``): only the endpoints, ``z'_u = z_u − x_v``.
* SAGE (``[mean_N(i) x, x_i]``): only the endpoints, ``mean'_u = (deg_u·mean_u − x_v)/(deg_u − 1)`` (zero when
  ``u`` is left isolated, as PyG's mean of nothing).

An edge none of whose changed rows is a training or test node changes neither a loss nor Γ: its estimate is
exactly zero (``affects`` is False for it).

**Sign convention** (as for nodes): ``delta = Γ(retrained without e) − Γ(now)``; negative: the edge is harmful.
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Iterator
from dataclasses import dataclass, field

import torch
from torch import Tensor

from bind_core.data.graph import Graph, positions
from bind_core.errors import ConfigError
from bind_core.influence.arguments import InfluenceArguments, Solver
from bind_core.influence.distributed.plan import InfluencePlan
from bind_core.influence.edge_records import EdgeInfluenceSummary
from bind_core.influence.estimate import plan as make_plan
from bind_core.influence.functional import (
    FunctionalModel,
    dloss_dlogits,
    estimate_targets,
    forward_derivative,
    gammas_from_proba,
)
from bind_core.influence.neighbourhood import Csr
from bind_core.influence.rowblocks import test_probabilities
from bind_core.influence.solvers import SolveInfo
from bind_core.influence.terms import exact_direct
from bind_core.models.gnn import probabilities
from bind_core.training.fit import TrainedModel

EDGE_SIGN_CONVENTION = (
    "delta = Γ(model retrained without edge (u, v)) − Γ(current model); positive: deleting the edge increases "
    "bias (it helps fairness); negative: the edge is harmful (deleting it reduces bias)."
)


@dataclass
class EdgeInfluenceResult:
    """Estimated ΔΓ of deleting each undirected edge, aligned with ``edges`` (``[E, 2]``, ``u < v``).

    ``delta = lam·delta_sp + (1 − lam)·delta_eo``; ``parts`` holds ``non_iid`` (through the weights) and
    ``direct`` (the test predictions at fixed weights), each ``[E, 2]`` (SP, EO). ``affects[k]`` says whether
    deleting edge ``k`` changes any training loss or test prediction (if not, its estimate is exactly 0).
    """

    edges: Tensor
    delta: Tensor
    delta_sp: Tensor
    delta_eo: Tensor
    parts: dict[str, Tensor]
    affects: Tensor
    lam: float
    gamma: dict[str, float]
    solve: SolveInfo
    grad_norm: float
    timings: dict[str, float] = field(default_factory=dict)
    sign_convention: str = EDGE_SIGN_CONVENTION
    settled: Tensor | None = None
    """``[E]``: the edges whose value was settled by damped steps (multi-layer and attention models,
    :mod:`bind_core.influence.deep_edges`); None for the one-layer estimate, which needs none."""

    def summary(self) -> EdgeInfluenceSummary:
        """Counts and the distribution of the estimates (over the edges that affect something).

        Returns:
            The :class:`~bind_core.influence.edge_records.EdgeInfluenceSummary` (``sum``, ``min`` and ``max`` only
            when some edge affects something).
        """
        d = self.delta.double()[self.affects]
        spread = (float(d.sum()), float(d.min()), float(d.max())) if d.numel() else (None, None, None)
        return EdgeInfluenceSummary(
            edges=int(self.edges.shape[0]),
            affecting=int(self.affects.sum()),
            harmful=int((d < 0).sum()),
            helpful=int((d > 0).sum()),
            gamma=self.gamma,
            lam=self.lam,
            timings=self.timings,
            sign_convention=self.sign_convention,
            sum=spread[0],
            min=spread[1],
            max=spread[2],
        )

    def top(self, k: int, *, harmful: bool = True) -> Tensor:
        """Positions of the ``k`` most harmful (most negative) or most helpful edges."""
        order = torch.argsort(self.delta, descending=not harmful)
        return order[: min(k, order.numel())]


def undirected_edges(graph: Graph) -> Tensor:
    """Each undirected edge once, ``[E, 2]`` with ``u < v``, in the order of ``graph.edge_index``."""
    ei = graph.edge_index
    keep = ei[0] < ei[1]
    return ei[:, keep].t().contiguous()


def checked_edges(graph: Graph, edges: Tensor | None) -> Tensor:
    """``edges`` as ``[k, 2]`` (default: every undirected edge, :func:`undirected_edges`); raises unless each pair
    is an edge of ``graph``."""
    if edges is None:
        return undirected_edges(graph)
    und = torch.as_tensor(edges, dtype=torch.long).reshape(-1, 2)
    keys = graph.edge_index[0] * graph.num_nodes + graph.edge_index[1]
    if not bool(torch.isin(und[:, 0] * graph.num_nodes + und[:, 1], keys).all()):
        raise ConfigError("edges: every pair must be an edge of the graph")
    return und


def estimate_edges(
    model: TrainedModel,
    graph: Graph,
    *,
    lam: float = 0.5,
    edges: Tensor | None = None,
    influence_plan: InfluencePlan | None = None,
    direct: bool = True,
    direct_exact: bool = False,
    solver: Solver = "auto",
    groups: list[int] | None = None,
    max_pairs: int = 200_000,
) -> EdgeInfluenceResult:
    """Estimate ΔΓ of deleting each edge (module docstring: the derivation, the sign, which rows change).

    Args:
        model: the trained (polished) one-layer GCN, GIN or SAGE.
        graph: the graph it was trained on.
        edges: ``[k, 2]`` undirected edges to attribute (default: all of them, :func:`undirected_edges`).
        influence_plan: the node estimate's shared half (:func:`bind_core.influence.plan`) for this model: its
            solve ``s = H⁻¹·∇Γ`` and its ``a_i = ∇ℓ_iᵀ·s`` are reused (no second solve); made here if None.
        direct: include the direct change of the test predictions.
        direct_exact: recompute Γ per edge for the direct term instead of linearising it.
        solver, groups: as for :func:`bind_core.influence.estimate` (the solver only when no plan is given).
        max_pairs: the most changed rows handled in one batch (bounds memory).
    """
    fm = FunctionalModel.from_trained(model, graph, groups)
    _require_row_separable(fm)
    timings: dict[str, float] = {}
    t0 = time.perf_counter()
    if influence_plan is None:
        influence_plan = make_plan(model, graph, InfluenceArguments(lam=lam, solver=solver), groups=groups, fm=fm)
        timings["plan"] = time.perf_counter() - t0
    ref = influence_plan.theta.to(fm.theta.device, fm.theta.dtype)
    if ref.shape != fm.theta.shape or not torch.equal(ref, fm.theta):
        raise ConfigError("the model's weights are not the ones the influence plan was made for")
    und = checked_edges(graph, edges)
    t1 = time.perf_counter()
    non_iid, direct_part, affects = edge_terms(
        fm, influence_plan, und, direct=direct, direct_exact=direct_exact, max_pairs=max_pairs
    )
    timings["edge_terms"] = time.perf_counter() - t1
    m = int(graph.train_idx.numel())
    total = non_iid / m + direct_part
    gam = influence_plan.gamma
    return EdgeInfluenceResult(
        edges=und,
        delta=lam * total[:, 0] + (1 - lam) * total[:, 1],
        delta_sp=total[:, 0],
        delta_eo=total[:, 1],
        parts={"non_iid": non_iid / m, "direct": direct_part},
        affects=affects,
        lam=lam,
        gamma={"sp": float(gam[0]), "eo": float(gam[1]), "total": float(lam * gam[0] + (1 - lam) * gam[1])},
        solve=influence_plan.solve,
        grad_norm=influence_plan.grad_norm,
        timings=timings,
    )


def _require_row_separable(fm: FunctionalModel) -> None:
    """Raise :class:`ConfigError` for a model :func:`estimate_edges` does not cover (multi-layer and attention
    models: :mod:`bind_core.influence.deep_edges`)."""
    if not fm.module.row_separable:
        raise ConfigError(
            "this estimate covers the row-separable models (one-layer GCN, GIN, SAGE); "
            f"this is a {fm.module.config.layers}-layer {fm.module.config.arch}: use "
            "bind_core.influence.deep_edges.estimate_edges_deep"
        )


def edge_terms(
    fm: FunctionalModel,
    influence_plan: InfluencePlan,
    edges: Tensor,
    *,
    direct: bool = True,
    direct_exact: bool = False,
    max_pairs: int = 200_000,
    affine: bool | None = None,
) -> tuple[Tensor, Tensor, Tensor]:
    """``(Σ_i (a_i − b_{e,i}), direct_e, affects_e)`` for every edge: ``[E, 2]``, ``[E, 2]``, ``[E]``.

    ``affine`` (GCN only, on by default) uses that the one-layer GCN is affine in its row
    (``W_h·(W_c·z + b_c) + b_h``, no activation): the logits and their tangents along ``s`` of a changed row are
    the same combination of per-node projections (``M·x_w``, ``M·z_i`` and their tangents, computed once) as the
    row is of feature rows, so each changed row costs ``3·outputs`` numbers instead of a row of features and a
    pass through the model (the same values to round-off; tested). ``False`` recomputes each row and pushes it
    through the model."""
    g = fm.graph
    train_pos, test_pos = positions(g.train_idx, g.num_nodes), positions(g.test_idx, g.num_nodes)
    theta = fm.theta
    s = influence_plan.s.to(fm.device, theta.dtype)
    a = influence_plan.a.to(fm.device, theta.dtype)
    gam = influence_plan.gamma.to(fm.device, theta.dtype)
    y = g.y.to(fm.device)
    num = edges.shape[0]
    non_iid = torch.zeros(num, 2, dtype=torch.float64, device=fm.device)
    direct_part = torch.zeros(num, 2, dtype=torch.float64, device=fm.device)
    affects = torch.zeros(num, dtype=torch.bool)
    base = test_probabilities(fm, theta)
    d_sp, d_eo = _direct_slopes(fm, base) if direct and not direct_exact else (base, base)
    out = fm.module.config.num_outputs(g.num_classes)
    affine = fm.module.config.arch == "gcn" and affine is not False  # GIN's MLP is not affine; SAGE: 2 rows
    features = rows_of = c0 = None
    if affine:
        features, rows_of, c0 = _affine_projections(fm, theta, s)
    for e_pos, node, rows in changed_rows(fm, edges, max_pairs=max_pairs, features=features, rows=rows_of):
        affects[e_pos] = True
        is_train = train_pos[node] >= 0
        if bool(is_train.any()):
            sel = is_train.to(fm.device)
            logits, tangents = _outputs(fm, theta, s, rows[sel], c0, out)
            yt = y[node[is_train].to(fm.device)]
            b = torch.stack([(dloss_dlogits(logits, yt) * tangents[c]).sum(1) for c in range(2)], dim=1)
            contrib = a[train_pos[node[is_train]].to(fm.device)] - b
            non_iid.index_add_(0, e_pos[is_train].to(fm.device), contrib)
        is_test = test_pos[node] >= 0
        if direct and bool(is_test.any()):
            sel = is_test.to(fm.device)
            with torch.no_grad():
                proba = probabilities(_outputs(fm, theta, None, rows[sel], c0, out)[0])
            t_pos = test_pos[node[is_test]].to(fm.device)
            if direct_exact:
                exact_direct(fm, base, gam, e_pos[is_test], t_pos, proba, direct_part)
            else:
                change = proba - base[t_pos]
                lin = torch.stack([(d_sp[t_pos] * change).sum(1), (d_eo[t_pos] * change).sum(1)], dim=1)
                direct_part.index_add_(0, e_pos[is_test].to(fm.device), lin)
    return non_iid.cpu(), direct_part.cpu(), affects


def _direct_slopes(fm: FunctionalModel, base: Tensor) -> tuple[Tensor, Tensor]:
    """``∂Γ_SP/∂p`` and ``∂Γ_EO/∂p`` at the test probabilities ``base``: the linearised direct term's slopes."""
    probe = base.clone().requires_grad_(True)
    d_sp = torch.autograd.grad(gammas_from_proba(probe, fm.graph, fm.groups)[0], probe)[0]
    d_eo = torch.autograd.grad(gammas_from_proba(probe, fm.graph, fm.groups)[1], probe)[0]
    return d_sp, d_eo


def changed_rows(
    fm: FunctionalModel,
    edges: Tensor,
    *,
    max_pairs: int = 200_000,
    features: Tensor | None = None,
    rows: Tensor | None = None,
) -> Iterator[tuple[Tensor, Tensor, Tensor]]:
    """For batches of ``edges`` (``[E, 2]``): ``(edge position, node, z')`` for every training or test node whose
    aggregated row changes when that edge is deleted, ``z'`` its row on ``G − e`` (module docstring).

    GCN only: ``features`` (``[n, k]``) and ``rows`` (``[n, k]``) replace ``X`` and ``Â·X`` (default: the model's),
    so that any linear image of the rows (``M·X`` and ``M·Â·X``) is propagated the same way."""
    g = fm.graph
    relevant = estimate_targets(g)
    arch = fm.module.config.arch
    # GCN: neighbour lists of training and test nodes only (the only rows read: no row is made only to be dropped);
    # the edges are cut into batches of about max_pairs such rows
    ei = g.edge_index[:, relevant[g.edge_index[1]]]
    deg = torch.bincount(ei[0], minlength=g.num_nodes)
    size = (deg[edges[:, 0]] + deg[edges[:, 1]]) if arch == "gcn" else torch.full((edges.shape[0],), 2)
    batch_id = torch.div(torch.cumsum(size, 0) - size, max(max_pairs, 1), rounding_mode="floor")
    cuts = (torch.nonzero(batch_id[1:] != batch_id[:-1]).flatten() + 1).tolist()
    bounds = [0, *cuts, int(edges.shape[0])]
    csr = Csr.of_degrees(ei, deg)
    for lo, hi in itertools.pairwise(bounds):
        if hi <= lo:
            continue
        batch = edges[lo:hi]
        if arch == "gcn":
            e_local, node, z = _gcn_changed_rows(fm, batch, csr, features, rows)
        else:
            e_local, node, z = _endpoint_rows(fm, batch, relevant)
        if node.numel():
            yield e_local + lo, node, z


def _gcn_changed_rows(
    fm: FunctionalModel,
    edges: Tensor,
    csr: Csr,
    features: Tensor | None = None,
    rows: Tensor | None = None,
) -> tuple[Tensor, Tensor, Tensor]:
    """GCN rows of ``N[u] ∪ N[v]`` on ``G − (u, v)`` for each edge of the batch, for the nodes ``csr`` lists as
    neighbours (:func:`changed_rows` passes the neighbour lists restricted to training and test nodes)."""
    assert fm.inputs.x_prop is not None
    g = fm.graph
    n = g.num_nodes
    x = (fm.inputs.x if features is None else features).cpu().to(torch.float64)
    z_all = fm.inputs.x_prop if rows is None else rows
    dtilde = (g.degree + 1).to(torch.float64)
    inv = dtilde.rsqrt()
    change = (dtilde - 1.0).clamp(min=1.0).rsqrt() - inv  # c_w, used only for the endpoints (degree ≥ 1)
    u, v = edges[:, 0], edges[:, 1]
    own_u, i_u = csr.neighbours(u)
    own_v, i_v = csr.neighbours(v)
    e_all = torch.cat([own_u, own_v])
    i_all = torch.cat([i_u, i_v])
    w_all = torch.cat([u[own_u], v[own_v]])  # the endpoint whose neighbour list produced the row
    other = torch.cat([v[own_u], u[own_v]])  # the edge's other endpoint
    if e_all.numel() == 0:
        empty = torch.empty(0, dtype=torch.long)
        return empty, empty, torch.empty(0, x.shape[1], dtype=fm.theta.dtype, device=fm.device)
    endpoint = i_all == other  # i is the other endpoint: it loses w's term and its own degree falls by one
    coef_w = torch.where(endpoint, -inv[w_all], change[w_all])
    coef_i = torch.where(endpoint, change[i_all], torch.zeros_like(coef_w))
    contrib = x[w_all] * coef_w.unsqueeze(1) + x[i_all] * coef_i.unsqueeze(1)
    keys, inverse = torch.unique(e_all * n + i_all, return_inverse=True)
    e_pair, node = keys // n, keys % n
    s_new = torch.zeros(keys.numel(), x.shape[1], dtype=torch.float64).index_add_(0, inverse, contrib)
    is_end = (node == u[e_pair]) | (node == v[e_pair])
    d_new = dtilde[node] - is_end.to(torch.float64)
    z = z_all[node.to(z_all.device)].cpu().to(torch.float64)
    z_new = (z * dtilde[node].sqrt().unsqueeze(1) + s_new) * d_new.rsqrt().unsqueeze(1)
    return e_pair, node, z_new.to(fm.device, fm.theta.dtype)


def _affine_projections(fm: FunctionalModel, theta: Tensor, s: Tensor) -> tuple[Tensor, Tensor, Tensor]:
    """For a model affine in its row, ``f(z) = M·z + c``: ``[M·X | M_s·X]``, ``[M·Z | M_s·Z]`` (``M_s`` the tangent
    of ``M`` along each column of ``s``; ``[n, 3·outputs]``) and ``[c | c_s]`` (``[1, 3·outputs]``)."""
    assert fm.inputs.x_prop is not None

    def project(rows: Tensor) -> Tensor:
        def logits(flat: Tensor) -> Tensor:
            return fm.logits_z(flat, rows)

        cols = [fm.logits_z(theta, rows).detach()]
        cols += [forward_derivative(logits, (theta,), (s[:, c],))[1].detach() for c in range(s.shape[1])]
        return torch.cat(cols, dim=1)

    x = fm.inputs.x
    c0 = project(torch.zeros(1, x.shape[1], dtype=x.dtype, device=x.device))
    return project(x) - c0, project(fm.inputs.x_prop) - c0, c0


def _outputs(
    fm: FunctionalModel, theta: Tensor, s: Tensor | None, rows: Tensor, c0: Tensor | None, out: int
) -> tuple[Tensor, list[Tensor]]:
    """Logits ``[k, out]`` of changed rows and (with ``s``) their tangents along each column of ``s``: from the
    projected rows (``c0`` given: the affine path) or by a forward-mode pass through the model."""
    if c0 is not None:
        full = rows + c0
        return full[:, :out], [full[:, out * (1 + c) : out * (2 + c)] for c in range(2)]
    if s is None:
        return fm.logits_z(theta, rows), []

    def logits(flat: Tensor) -> Tensor:
        return fm.logits_z(flat, rows)

    pairs = [forward_derivative(logits, (theta,), (s[:, c],)) for c in range(s.shape[1])]
    return pairs[0][0].detach(), [p[1].detach() for p in pairs]


def _endpoint_rows(fm: FunctionalModel, edges: Tensor, relevant: Tensor) -> tuple[Tensor, Tensor, Tensor]:
    """GIN and SAGE: only the endpoints' rows change (each loses the other's feature row)."""
    assert fm.inputs.x_prop is not None
    e_local = torch.arange(edges.shape[0]).repeat(2)
    node = torch.cat([edges[:, 0], edges[:, 1]])
    other = torch.cat([edges[:, 1], edges[:, 0]])
    keep = relevant[node]
    e_local, node, other = e_local[keep], node[keep], other[keep]
    x = fm.inputs.x
    z = fm.inputs.x_prop[node.to(fm.device)]
    xo = x[other.to(fm.device)]
    if fm.module.config.arch == "gin":
        return e_local, node, z - xo
    d = fm.module.in_dim
    deg = fm.graph.degree[node].to(x.dtype).to(fm.device).unsqueeze(1)
    mean = torch.where(deg > 1, (deg * z[:, :d] - xo) / (deg - 1).clamp(min=1), torch.zeros_like(xo))
    return e_local, node, torch.cat([mean, z[:, d:]], dim=1)
