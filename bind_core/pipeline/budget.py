"""What an audit will cost before it runs: peak memory and floating-point work, from its settings and the graph's
sizes alone (no graph, no model, no allocation).

The figures are upper-bound-minded estimates for refusing audits that cannot fit, not predictions of the
runtime. Memory sums the parts an audit can hold at once (bytes):

* ``graph``: the features in float32 and in the float64 copy the polish and the influence stage use,
  ``n·F·(4 + 8 + 8)``, and the edges with GCN's self-loops and weights, ``(E + n)·48``;
* ``parameters``: float32 weights, gradients and Adam's two moments, and the float64 copy, ``p·(4·4 + 2·8)``;
* ``polish``: L-BFGS keeps 50 float64 curvature pairs, ``(2·50 + 4)·8·p``;
* ``activations``: what one float64 forward and backward keep per layer, ``4·n·h·heads·8``, plus per-edge
  messages for GIN, GraphSAGE and GAT (``E·h·heads·8``) and GAT's attention coefficients (``3·(E + n)·heads·8``);
* ``hessian``: ``5·8·p²`` when a dense ``[p, p]`` float64 Hessian is formed (the Hessian, the identity its
  columns are formed from, the symmetrised copy, and ``eigh``'s eigenvectors and workspace): with the exact
  solver (``solver="exact"``, or ``"auto"`` up to
  :data:`~bind_core.influence.solvers.EXACT_MAX_PARAMETERS` parameters), the step estimator, the refinement,
  or the polish's Newton finish (up to :data:`~bind_core.training.newton.NEWTON_MAX_PARAMETERS` parameters).

Work counts multiply-adds twice (flops). One forward pass costs
``f = Σ_layers 2·heads·(n·d_in·h + (E + n)·h) + 2·n·h·C``; a backward about twice that. Training costs
``epochs·3f`` (with mini-batches, ``epochs·(⌈m/b⌉·3f_b + f)``: ``f_b`` a forward pass over one batch's sampled
computation graph, :func:`sampled_size`, and ``f`` the exact validation pass, over at most
:data:`~bind_core.training.minibatch.VALIDATION_NODES` validation nodes' computation graph); the polish
``1.5·polish_max_iter·3f`` (L-BFGS's evaluation cap); a dense Hessian ``4f·p + 9p³``;
the per-node terms ``m·4f·r/n`` (``r``: the nodes within the model's receptive field of a node, at most ``n``) for
the influence function, ``m·(4f + 4p²)`` for the step estimator; each debiasing budget and each validated node
one more training (debiasing) or polish (validation) on the reduced graph, each chance seed
``(2 + random_sets)`` trainings per budget, each stability seed a whole training and influence stage. The edge
attribution (``edges``) of one-layer models costs ``4f/n`` per changed row like the per-node terms, with ``2`` rows
per edge (GIN, SAGE: the endpoints) or ``deg u + deg v`` (GCN), whose sum over edges, ``Σ deg²``, is taken at its
floor for the mean degree, ``2E·(1 + 2E/n)``: a graph with hubs costs more than this figure. Multi-layer and
attention models (the damped estimate) cost two forward-mode passes per edge over the rows it changes, about
``2·(1 + 2E/n)^(L − 1 + [GCN])`` per layer, plus :data:`~bind_core.influence.deep_edges.SETTLE` settled edges at
each end of ``STEPS`` passes each. Edge debiasing
(with ``edges``, ``debias_seeds`` and ``edge_budgets``) retrains each seed once on the graph and
``(1 + random_sets)`` times per edge budget. The edge self-check (with ``edges``, the validation stage and
``edge_validation_sample``) re-optimises once per sampled edge, like the node self-check per node (the sample is
drawn among the edges whose deletion changes something, so this is an upper bound). With
``debias_retrain="adam"`` the trainings of debiasing and edge debiasing have no polish, and the unchanged graph is
trained once more for the debiasing rows' ``before``.
"""

# ruff: noqa: RUF009  (key() returns dataclasses.field(...): fields with metadata, not shared defaults)
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

import torch

from bind_core.codec import key
from bind_core.data.records import GraphSummary
from bind_core.influence.deep_edges import SETTLE
from bind_core.influence.estimate import pick_method
from bind_core.influence.lowrank import LANCZOS_MAX
from bind_core.influence.solvers import EXACT_MAX_PARAMETERS, choose
from bind_core.influence.step import STEPS
from bind_core.models.gnn import GNN, ModelConfig
from bind_core.pipeline.config import AUTO_CHANCE_SEEDS, AuditConfig
from bind_core.training.fit import TrainConfig
from bind_core.training.minibatch import VALIDATION_NODES
from bind_core.training.newton import NEWTON_MAX_PARAMETERS

LBFGS_HISTORY = 50
HESSIAN_COPIES = 5


@dataclass(frozen=True)
class GraphSize:
    """The sizes of a graph an estimate needs (``Graph.summary()`` holds them all)."""

    nodes: int
    edges: int
    features: int
    classes: int
    train: int

    @classmethod
    def of_summary(cls, summary: GraphSummary | Mapping[str, Any]) -> GraphSize:
        """From a graph's summary.

        Args:
            summary: :meth:`bind_core.data.graph.Graph.summary`, or its JSON as stored (``nodes``, ``edges``,
                ``features``, ``classes`` and ``train`` are read).

        Returns:
            The :class:`GraphSize`.
        """
        if isinstance(summary, GraphSummary):
            return cls(
                nodes=summary.nodes,
                edges=summary.edges,
                features=summary.features,
                classes=summary.classes,
                train=summary.train,
            )
        return cls(
            nodes=int(summary["nodes"]),
            edges=int(summary["edges"]),
            features=int(summary["features"]),
            classes=int(summary["classes"]),
            train=int(summary["train"]),
        )


@dataclass(frozen=True, kw_only=True)
class AuditCost:
    """An audit's estimated peak memory (bytes, by part) and work (flops, by stage); see the module docstring. The
    estimate shown before an audit is queued (:func:`bind_core.codec.encode` gives its JSON)."""

    parameters: int = key("integer: the model's parameters")
    dense_hessian: bool = key("boolean: whether a dense [p, p] Hessian is formed")
    peak_memory_bytes: int = key("integer: the estimated peak memory, the sum of memory_bytes (what limits compare)")
    memory_bytes: dict[str, int] = key("object, part → bytes it can hold at once")
    work_flops: float = key("number: the estimated work, the sum of work (what limits compare)")
    work: dict[str, float] = key("object, stage → flops")


def parameter_count(model: ModelConfig, features: int, classes: int) -> int:
    """The number of weights of ``GNN(model, features, classes)``, counted on PyTorch's meta device (no memory)."""
    with torch.device("meta"):
        module = GNN(model, features, classes)
    return int(sum(p.numel() for p in module.parameters()))


def forward_flops(model: ModelConfig, size: GraphSize) -> float:
    """Flops of one forward pass over the whole graph (module docstring)."""
    n, e, h, heads = size.nodes, size.edges, model.hidden, model.heads
    total, d_in = 0.0, size.features
    for _ in range(model.layers):
        total += 2.0 * heads * (n * d_in * h + (e + n) * h)
        d_in = h
    return total + 2.0 * n * h * max(size.classes, 1)


def sampled_size(model: ModelConfig, training: TrainConfig, size: GraphSize) -> GraphSize | None:
    """The size of one mini-batch's sampled computation graph (None for full-batch training): ``b`` seed nodes,
    each hop multiplying the nodes by its fan-out (``-1``: the mean degree ``2E/n``; a finite fan-out above the
    mean degree counts as the mean degree), the first layer's ``-1`` hop never expanded (it reads the aggregated
    features), capped at the graph. An upper bound: draws shared between nodes are counted twice."""
    if not training.batch_size:
        return None
    n, e = max(size.nodes, 1), size.edges
    degree = 2.0 * e / n
    fan = list(training.fan_out) or [-1] * model.layers
    hops = fan[:-1] if fan[-1] == -1 else fan
    frontier = float(min(training.batch_size, max(size.train, 1)))
    nodes = frontier
    for k in hops:
        frontier *= degree if k < 0 else min(float(k), degree)
        nodes += frontier
    nodes = min(nodes, float(n))
    return GraphSize(
        nodes=int(nodes),
        edges=int(min(float(e), nodes * degree)),
        features=size.features,
        classes=size.classes,
        train=min(training.batch_size, size.train),
    )


def training_flops(model: ModelConfig, training: TrainConfig, size: GraphSize) -> float:
    """Flops of the Adam epochs (module docstring): full batch, or mini-batches plus the exact validation pass (its
    computation graph bounded like a batch of :data:`VALIDATION_NODES` seeds with every neighbour)."""
    batch = sampled_size(model, training, size)
    if batch is None:
        return training.epochs * 3 * forward_flops(model, size)
    batches = -(-max(size.train, 1) // training.batch_size)
    validation = sampled_size(
        model, replace(training, batch_size=VALIDATION_NODES, fan_out=()), replace(size, train=size.nodes)
    )
    assert validation is not None  # batch_size > 0
    return training.epochs * (batches * 3 * forward_flops(model, batch) + forward_flops(model, validation))


def _stepped(config: AuditConfig, parameters: int, trained: bool) -> bool:
    """Whether the node estimate is the step estimate: a model as given is counted as not stationary (the estimate
    finds out; one that is costs less than counted), one the audit trains as stationary where it polishes it."""
    stationary = not trained and config.polishes(parameters)
    separable = config.model.row_separable
    method = pick_method(config.estimator, row_separable=separable, num_parameters=parameters, stationary=stationary)
    return method == "step"


def uses_dense_hessian(config: AuditConfig, parameters: int, trained: bool = False) -> bool:
    """Whether the audit forms a dense ``[p, p]`` Hessian (module docstring; ``trained``: the model is given, so
    no polish's Newton finish forms one)."""
    newton = not trained and config.polishes(parameters) and parameters <= NEWTON_MAX_PARAMETERS
    if "influence" not in config.stages:
        return newton
    if config.refine_steps:
        return True
    if _stepped(config, parameters, trained):
        return True
    return newton or choose(config.solver, parameters) == "exact"


def uses_lanczos(config: AuditConfig, parameters: int, trained: bool = False) -> bool:
    """Whether the estimate keeps a Lanczos basis (``[p, LANCZOS_MAX + 1]``): the matrix-free damped solve of a
    multi-layer or attention model beyond the dense Hessian (:mod:`bind_core.influence.lowrank`)."""
    if "influence" not in config.stages or uses_dense_hessian(config, parameters, trained):
        return False
    row_separable = config.model.row_separable
    auto = config.solver == "auto" and not row_separable and parameters > EXACT_MAX_PARAMETERS
    return config.solver == "lanczos" or auto or config.estimator == "step"


def _after_training_work(
    config: AuditConfig,
    size: GraphSize,
    p: int,
    dense: bool,
    f: float,
    training: float,
    polish: float,
    trained: bool,
) -> dict[str, float]:
    """The work of the stages after training (influence, edges, debiasing, validation), in flops, from a forward
    pass's ``f``, one training's and one polish's (``trained``: the model is given)."""
    m, n, e = config.model, size.nodes, size.edges
    work: dict[str, float] = {}
    row_separable = m.row_separable
    step = _stepped(config, p, trained)
    influence = 4 * f * p + 9.0 * p**3 if dense else 0.0
    if step:
        influence += size.train * (4 * f + 4.0 * p * p)
    else:
        reach = min(float(n), (1.0 + 2.0 * e / max(n, 1)) ** (m.layers + 1))
        influence += size.train * 4 * f * reach / max(n, 1)
    work["influence"] = influence
    if config.edges and row_separable:
        rows = 2.0 * e * (1.0 + 2.0 * e / max(n, 1)) if m.arch == "gcn" else 2.0 * e
        work["edges"] = rows * 4 * f / max(n, 1)
    elif config.edges:  # damped: a forward-mode pass per edge over the rows it changes, steps for the top
        hops = m.layers - 1 + int(m.arch == "gcn")
        rows = 2.0 * e * min(float(n), 2.0 * (1.0 + 2.0 * e / max(n, 1)) ** hops) * m.layers
        work["edges"] = rows * 2 * 4 * f / max(n, 1) + 2 * SETTLE * STEPS * 4 * f
    work.update(_debiasing_work(config, training, polish))
    reoptimisation = max(polish, 1.5 * 1000 * 3 * f)  # one validation's polish (at least 1000 iterations)
    if "validation" in config.stages and config.validation_sample:
        work["validation"] = config.validation_sample * reoptimisation
        if config.edges and row_separable and config.edge_validation_sample:
            work["edge_validation"] = config.edge_validation_sample * reoptimisation
    return work


def _debiasing_work(config: AuditConfig, training: float, polish: float) -> dict[str, float]:
    """The retrainings of debiasing and of its checks against chance, each a training (and a polish, unless
    ``debias_retrain`` is adam). Without seeds, ``chance_seconds`` may run the check with the default seeds: it is
    quoted as if it will (an upper bound)."""
    work: dict[str, float] = {}
    seeds = len(config.debias_seeds)
    chance_seeds = seeds or (len(AUTO_CHANCE_SEEDS) if config.chance_seconds > 0 else 0)
    adam = config.debias_retrain == "adam"
    retraining = training if adam else training + polish  # "adam": no polish, and "before" retrained too
    if "debiasing" in config.stages and config.budgets:
        chance = chance_seeds + len(config.budgets) * chance_seeds * (2 + config.debias_random_sets)
        work["debiasing"] = (len(config.budgets) + chance + int(adam)) * retraining
    if "debiasing" in config.stages and config.edges and seeds and config.edge_budgets:
        edge_chance = seeds + len(config.edge_budgets) * seeds * (1 + config.debias_random_sets)  # against chance
        work["edge_debiasing"] = edge_chance * retraining
    return work


def audit_cost(
    config: AuditConfig, size: GraphSize, *, parameters: int | None = None, trained: bool = False
) -> AuditCost:
    """Estimate the peak memory and the work of running ``config`` on a graph of ``size``.

    Args:
        config: the audit's settings.
        size: the graph's sizes.
        parameters: the supplied model's parameter count, when there is one (else counted from ``config.model``).
        trained: the model is given (a supplied model): no training and no polish is counted, here or in the
            retrainings (``config.training`` is not read for them).

    Returns:
        An :class:`AuditCost`; ``peak_memory_bytes`` and ``work_flops`` are what limits compare against.
    """
    m = config.model
    p = parameters if parameters is not None else parameter_count(m, size.features, size.classes)
    n, e, heads = size.nodes, size.edges, m.heads
    dense = uses_dense_hessian(config, p, trained)
    messages = e * m.hidden * heads * 8 if m.arch == "gat" else 0  # GCN, GIN, SAGE: CSR products, no [E, d]
    attention = 3 * (e + n) * heads * 8 if m.arch == "gat" else 0
    memory = {
        "graph": n * size.features * 20 + (e + n) * 48,
        "parameters": p * (4 * 4 + 2 * 8),
        "polish": (2 * LBFGS_HISTORY + 4) * 8 * p if config.polishes(p) and not trained else 0,
        "activations": m.layers * (4 * n * m.hidden * heads * 8 + messages + attention),
        "hessian": HESSIAN_COPIES * 8 * p * p if dense else 0,
        "lanczos": (LANCZOS_MAX + 1) * 8 * p if uses_lanczos(config, p, trained) else 0,
    }
    f = forward_flops(m, size)
    training = 0.0 if trained else training_flops(m, config.training, size)
    polish = 1.5 * config.training.polish_max_iter * 3 * f if config.polishes(p) and not trained else 0.0
    work = {"training": training + polish}
    influence = 0.0
    if "influence" in config.stages:
        work.update(_after_training_work(config, size, p, dense, f, training, polish, trained))
        influence = work["influence"]
    if config.stability_seeds:
        work["stability"] = len(config.stability_seeds) * (training + polish + influence)
    return AuditCost(
        parameters=p,
        dense_hessian=dense,
        peak_memory_bytes=sum(memory.values()),
        memory_bytes=memory,
        work_flops=float(sum(work.values())),
        work=work,
    )
