"""The trained model as a function of one flat float64 parameter vector (for ``torch.func``)."""

from __future__ import annotations

import copy
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, NamedTuple, cast

import torch
from torch import Tensor
from torch.func import functional_call, jvp

from bind_core.data.graph import Graph
from bind_core.fairness.metrics import GroupPDD, gamma_eo, gamma_sp
from bind_core.influence.twolayer import layout
from bind_core.models.gnn import GNN, flat_parameters, node_losses, probabilities, unflatten_parameters
from bind_core.models.norms import held
from bind_core.models.propagation import GraphInputs
from bind_core.training.compgraph import MAX_FRACTION, ComputationGraph, objective_inputs
from bind_core.training.fit import TrainedModel


class ObjectiveRows(NamedTuple):
    """Where the training objective is evaluated (:meth:`FunctionalModel.objective_rows`)."""

    inputs: GraphInputs
    """The training nodes' computation graph's inputs, or the whole graph's (``FunctionalModel.inputs``)."""
    train: Tensor
    """The training rows in ``inputs`` (order of ``graph.train_idx``)."""
    y: Tensor
    """Their labels."""
    nodes: Tensor | None
    """The computation graph's nodes (the whole graph's ids, sorted); ``None`` when it is the whole graph."""


@dataclass
class FunctionalModel:
    """``θ ↦ logits`` for a copy of a trained module in float64 and evaluation mode.

    Attributes:
        module: the float64 copy (dropout off).
        theta: the trained parameters, flattened ``[p]``.
        graph: the graph the model was trained on; ``inputs`` its precomputed model inputs.
        weight_decay: λ of the objective ``L(θ) = mean(ℓ_train) + (λ/2)·‖θ‖²``.
    """

    module: GNN
    names: list[str]
    shapes: list[torch.Size]
    theta: Tensor
    graph: Graph
    inputs: GraphInputs
    weight_decay: float
    groups: list[int] | None = None
    """The groups Γ is measured over (``None``: all); see :func:`bind_core.data.groups.included_groups`."""
    _objective: ObjectiveRows = field(init=False, repr=False, compare=False)
    _slopes: Tensor = field(init=False, repr=False, compare=False)
    """``ĝ_i/m = (1/m)·∂ℓ_i/∂f_i`` at ``θ̂`` for the training rows (the Bregman anchor, :meth:`tilt`)."""

    def __post_init__(self) -> None:
        # Made here, outside any torch.func transform: made lazily inside one (the first objective evaluation of a
        # one-layer model's Hessian runs under vmap, jvp and grad), its tensors would be that transform's wrappers
        # and fail every evaluation after it had returned.
        inputs, rows = objective_inputs(
            self.module, self.inputs, self.graph, max_fraction=self._max_fraction(), attention=True
        )
        train = rows.train_idx.to(self.device)
        nodes = rows.nodes if isinstance(rows, ComputationGraph) else None
        self._objective = ObjectiveRows(inputs, train, rows.y.to(self.device)[train], nodes)
        with torch.no_grad():
            logits = self.logits(self.theta, train, inputs)
            self._slopes = (dloss_dlogits(logits, self._objective.y) / train.numel()).detach()

    def _max_fraction(self) -> float:
        """The share of the graph's nodes up to which the objective runs on the training nodes' computation graph
        (:func:`~bind_core.training.compgraph.objective_inputs`): any share for a model whose objective and gradient
        are formed by hand (:mod:`bind_core.influence.fused`, a two-layer GCN or SAGE), which run only there and cost
        less than autograd's pass over the whole graph even where the computation graph is all of it (the two-layer
        GCN on ``synthetic(2000)``: the estimate 24 → 13 s, the same values to 1e-12); else
        :data:`~bind_core.training.compgraph.MAX_FRACTION` (a GAT's at any share:
        :func:`~bind_core.training.compgraph.objective_inputs`)."""
        return 1.0 if layout(self) is not None else MAX_FRACTION

    @classmethod
    def from_trained(cls, trained: TrainedModel, graph: Graph, groups: list[int] | None = None) -> FunctionalModel:
        module = held(copy.deepcopy(trained.module).double().eval())
        names, shapes, theta = flat_parameters(module)
        inputs = module.prepare(graph, torch.float64, theta.device)
        wd = trained.train_config.weight_decay
        return cls(module, names, shapes, theta, graph, inputs, wd, groups)

    def fork(self) -> FunctionalModel:
        """A copy for another thread: its own module (``functional_call`` puts the weights it is given into the module
        while it runs, so two threads must not share one); the weights ``theta`` (the same tensor), the graph and its
        inputs are shared, read only."""
        twin = copy.copy(self)
        twin.module = copy.deepcopy(self.module)
        return twin

    @property
    def slopes(self) -> Tensor:
        """``[m, out]``: ``ĝ_i/m``, the training losses' derivatives in their logits at ``θ̂`` over ``m`` (the tilt's
        coefficients, :meth:`tilt`)."""
        return self._slopes

    @property
    def num_parameters(self) -> int:
        return int(self.theta.numel())

    @property
    def device(self) -> torch.device:
        return self.theta.device

    def unflatten(self, flat: Tensor) -> dict[str, Tensor]:
        return unflatten_parameters(flat, self.names, self.shapes)

    # ------------------------------------------------------------------ forward passes
    # ``tie_weights=False`` throughout: these models share no parameter between two modules (a GATv2 with
    # share_weights holds one module under two names, lin_l and lin_r, which takes the weights given under lin_l), and
    # functional_call's search for shared ones walks every submodule at every call (~50 µs; a deletion makes about
    # seven calls).
    def logits(self, flat: Tensor, rows: Tensor | None = None, inputs: GraphInputs | None = None) -> Tensor:
        """Logits of ``rows`` (all nodes if None) on ``inputs`` (default: the training graph)."""
        return cast(
            Tensor, functional_call(self.module, self.unflatten(flat), (inputs or self.inputs, rows), tie_weights=False)
        )

    def logits_z(self, flat: Tensor, z: Tensor) -> Tensor:
        """One-layer GCN only: logits from rows ``z`` of ``Â·X``."""
        return cast(
            Tensor, functional_call(self.module, self.unflatten(flat), (None, None), {"z": z}, tie_weights=False)
        )

    def train_losses(self, flat: Tensor) -> Tensor:
        """``ℓ_j(θ)`` for every training node ``j`` (order of ``graph.train_idx``), ``[m]``: on the training nodes'
        computation graph where it is a small part of the graph (:mod:`bind_core.training.compgraph`; exact, and
        what the Hessian and its products then cost is proportional to it), else on the whole graph."""
        rows = self.objective_rows()
        return node_losses(self.logits(flat, rows.train, rows.inputs), rows.y)

    def objective_rows(self) -> ObjectiveRows:
        """Where :meth:`train_losses` evaluates: the computation graph, or the whole graph (made with the model)."""
        return self._objective

    def objective(self, flat: Tensor) -> Tensor:
        """``L(θ) = (1/m)·Σ_j ℓ_j(θ) + (λ/2)·‖θ‖²``."""
        return self.train_losses(flat).mean() + 0.5 * self.weight_decay * (flat * flat).sum()

    def tilt(self, flat: Tensor) -> Tensor:
        """``r(θ) = −(1/m)·Σ_i ĝ_iᵀ·f_i(θ; G) − λ·θ̂ᵀθ``, with ``ĝ_i = ∂ℓ_i/∂f_i`` at ``θ̂`` held fixed: added to the
        training objective it gives the Bregman objective :meth:`bregman` up to a constant, and added to the
        objective of ``G − v`` the proximal Bregman response's (:mod:`bind_core.influence.bregman`). ``∇r(θ̂) =
        −∇L(θ̂)``: the given weights are the answer when nothing is deleted, stationary or not."""
        rows = self._objective
        return self.tilt_from_logits(flat, self.logits(flat, rows.train, rows.inputs))

    def tilt_from_logits(self, flat: Tensor, logits: Tensor) -> Tensor:
        """:meth:`tilt` at ``flat`` from the training rows' ``logits`` on ``G`` there (computed by the caller).

        Args:
            flat: the weights.
            logits: ``[m, out]``, the training rows' logits on the training graph at ``flat``.

        Returns:
            ``r(flat)``, a scalar.
        """
        return -(self._slopes * logits).sum() - self.weight_decay * (self.theta * flat).sum()

    def bregman(self, flat: Tensor) -> Tensor:
        """``B(θ) = (1/m)·Σ_i D_{ℓ_i}(f_i(θ), f_i(θ̂)) + (λ/2)·‖θ − θ̂‖²`` up to a constant: :meth:`objective` plus
        :meth:`tilt` in one pass. ``∇B(θ̂) = 0`` and ``∇²B(θ̂) = G + λI``, the Gauss–Newton matrix ``G = (1/m)·Σ_i
        J_iᵀ·∇²ℓ_i·J_i`` of the training losses plus the weight decay: positive semi-definite at any weights."""
        rows = self._objective
        logits = self.logits(flat, rows.train, rows.inputs)
        lam = self.weight_decay
        return (
            node_losses(logits, rows.y).mean()
            - (self._slopes * logits).sum()
            + 0.5 * lam * (flat * flat).sum()
            - lam * (self.theta * flat).sum()
        )

    def test_proba(self, flat: Tensor) -> Tensor:
        test = self.graph.test_idx.to(self.device)
        return probabilities(self.logits(flat, test))

    def gammas(self, flat: Tensor) -> Tensor:
        """``[Γ_SP(θ), Γ_EO(θ)]`` on the test nodes."""
        return gammas_from_proba(self.test_proba(flat), self.graph, self.groups)


def gammas_from_proba(proba: Tensor, graph: Graph, groups: list[int] | None = None) -> Tensor:
    """``[Γ_SP, Γ_EO]`` from test probabilities ``[t, C]`` (or a batch ``[B, t, C]`` → ``[B, 2]``, binary only),
    over pairs of ``groups`` (default: all groups)."""
    if proba.shape[-1] == 2:
        return GammaEvaluator(graph, groups, proba.device)(proba)
    test = graph.test_idx.to(proba.device)
    sens, y = graph.sens.to(proba.device)[test], graph.y.to(proba.device)[test]
    num = graph.num_groups
    return torch.stack(
        [gamma_sp(proba, sens, num_groups=num, groups=groups), gamma_eo(proba, y, sens, num_groups=num, groups=groups)]
    )


class GammaEvaluator:
    """:func:`gammas_from_proba` for one graph's test nodes, many times (a deletion evaluates Γ two or three times):
    the groups' positions and the pairs' quantile grids are made once (:class:`~bind_core.fairness.metrics.GroupPDD`);
    binary labels only, other label counts fall back to :func:`gammas_from_proba`. Equal to it exactly."""

    def __init__(self, graph: Graph, groups: list[int] | None = None, device: torch.device | str = "cpu") -> None:
        self.graph, self.groups = graph, groups
        test = graph.test_idx.to(device)
        sens, y = graph.sens.to(device)[test], graph.y.to(device)[test]
        self.sp = GroupPDD(sens, num_groups=graph.num_groups, groups=groups)
        self.eo = GroupPDD(sens, num_groups=graph.num_groups, groups=groups, subset=y == 1)

    def __call__(self, proba: Tensor) -> Tensor:
        """``[Γ_SP, Γ_EO]`` from ``[t, C]`` probabilities, or ``[B, 2]`` from a batch ``[B, t, 2]``."""
        if proba.shape[-1] != 2:
            return gammas_from_proba(proba, self.graph, self.groups)
        scores = proba[..., 1]
        return torch.stack([self.sp(scores), self.eo(scores)], dim=-1)


def estimate_targets(graph: Graph) -> Tensor:
    """``[n]`` mask of the nodes whose outputs the estimate reads: training nodes (their losses) and test
    nodes (Γ)."""
    mask = torch.zeros(graph.num_nodes, dtype=torch.bool)
    mask[graph.train_idx] = True
    mask[graph.test_idx] = True
    return mask


def forward_derivative(
    fn: Callable[..., Any], primals: tuple[Tensor, ...], tangents: tuple[Tensor, ...]
) -> tuple[Any, Any]:
    """``torch.func.jvp`` typed: ``(fn(*primals), its derivative along tangents)``."""
    out = jvp(fn, primals, tangents)
    return out[0], out[1]


def dloss_dlogits(logits: Tensor, y: Tensor) -> Tensor:
    """``∂ℓ/∂logits`` of the per-node cross-entropy, ``[k, out]`` (binary: ``σ(z) − y``)."""
    if logits.shape[1] == 1:
        return torch.sigmoid(logits) - y.to(logits.dtype).unsqueeze(1)
    onehot = torch.nn.functional.one_hot(y, logits.shape[1]).to(logits.dtype)
    return torch.softmax(logits, dim=1) - onehot
