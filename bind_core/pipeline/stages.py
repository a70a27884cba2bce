"""The audit's stages, one function each: training, metrics, influence, debiasing, validation (and the stability
check after them). Each takes what it needs and returns its part of the result; :class:`StageRunner` is the one
place that times a stage and reports its progress, and :func:`planned_stages` says which stages an audit runs.

Progress: every stage reports ``(stage, 0.0)`` as it starts and hands the audit's checkpoint (:meth:`StageRunner.tick`)
to its long loops, which report their own ``(stage, fraction)``; metrics, which has no loop, also reports
``("metrics", 1.0)`` when done; stability reports only from its retrains.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable
from typing import NamedTuple, TypeVar

import torch

from bind_core.codec import decode
from bind_core.data.graph import Graph
from bind_core.data.groups import groups_arg, included_groups
from bind_core.data.labels import group_label, user_ids
from bind_core.debiasing.debias import debias, report
from bind_core.debiasing.edge_debias import debias_edges
from bind_core.debiasing.edge_records import EdgeDebiasing
from bind_core.debiasing.records import DebiasingRow, RetrainRecipe, Validation
from bind_core.debiasing.validation import validate
from bind_core.errors import AuditCancelled
from bind_core.explain.profile import profile_nodes
from bind_core.explain.records import NodeProfile
from bind_core.fairness.bootstrap import bootstrap_metrics
from bind_core.fairness.breakdown import group_breakdown, probability_histograms
from bind_core.fairness.metrics import worst_pairs
from bind_core.fairness.records import Intervals, Metrics, TestMetrics
from bind_core.influence.arguments import InfluenceArguments
from bind_core.influence.curvature import Coordinates
from bind_core.influence.deep_edges import estimate_edges_deep
from bind_core.influence.distributed import ChunkRunner
from bind_core.influence.distributed.plan import InfluencePlan
from bind_core.influence.edge_rows import join_edge_results
from bind_core.influence.edges import EdgeInfluenceResult, estimate_edges, undirected_edges
from bind_core.influence.estimate import estimate
from bind_core.influence.estimate import plan as make_plan
from bind_core.influence.functional import FunctionalModel
from bind_core.influence.records import Refinement, Stability
from bind_core.influence.refinement import refine, require_refinable
from bind_core.influence.result import InfluenceResult
from bind_core.influence.stability import topk_stability
from bind_core.influence.step import Stepper
from bind_core.influence.utility import utility_influence
from bind_core.models.gnn import GNN
from bind_core.pipeline.chance_rule import chance_decision
from bind_core.pipeline.config import STAGES, AuditConfig
from bind_core.pipeline.edge_section import edge_section
from bind_core.pipeline.results_edges import EdgeAttribution
from bind_core.training.fit import TrainedModel, train
from bind_core.training.records import StationarityCheck
from bind_core.training.stationarity import describe_stationarity

__all__ = [
    "EDGES",
    "EDGE_DEBIASING",
    "STABILITY",
    "STAGES",
    "AuditProgress",
    "EdgesStage",
    "InfluenceStage",
    "StageRunner",
    "Tick",
    "check_refinable",
    "debiasing_stage",
    "edge_debiasing_reason",
    "edge_debiasing_stage",
    "edges_stage",
    "influence_stage",
    "metric_groups",
    "metrics_stage",
    "planned_stages",
    "stability_stage",
    "training_stage",
    "validation_stage",
]

AuditProgress = Callable[[str, float], bool | None]
"""``progress(stage, fraction)`` of :func:`~bind_core.pipeline.audit.run_audit`; ``False`` asks the audit to stop."""
Tick = Callable[[str, float], None]
"""The audit's checkpoint handed to the stages' loops: reports ``(stage, fraction)``, raises to stop."""
STABILITY = "stability"
"""The stage name the stability check reports under, after the planned stages; not among :data:`STAGES`."""
EDGES = "edges"
"""The stage name the edge attribution reports under (right after influence, with ``edges``); not among
:data:`STAGES`: it is part of the influence stage's work for the overall progress."""
EDGE_DEBIASING = "edge_debiasing"
"""The stage name edge debiasing reports under (after debiasing, with ``edges``, ``debias_seeds`` and
``edge_budgets``); not among :data:`STAGES`: for the overall progress it is part of the debiasing stage's work."""
EDGE_PART = 20_000
"""Edges attributed per call of the estimator: between parts the audit reports progress and can be stopped (a
subset of edges gives the same estimates as the whole, ``tests/core/influence/test_edge_influence.py``)."""

T = TypeVar("T")


def planned_stages(config: AuditConfig) -> tuple[str, ...]:
    """The stages (of :data:`STAGES`) :func:`~bind_core.pipeline.audit.run_audit` runs for ``config``, in order.

    Training and metrics always run (training takes a supplied model as it is); influence when asked for; debiasing
    when there are budgets; validation when the sample is positive (debiasing and validation need influence). The
    stability check (:data:`STABILITY`) runs after them when ``stability_seeds`` are set and influence ran.
    """
    asked = set(config.stages)
    plan = ["training", "metrics"]
    if "influence" in asked:
        plan.append("influence")
        if "debiasing" in asked and config.budgets:
            plan.append("debiasing")
        if "validation" in asked and config.validation_sample > 0:
            plan.append("validation")
    return tuple(plan)


class StageRunner:
    """Times the audit's stages and reports their progress to ``progress(stage, fraction)`` (the audit's callback);
    when it returns ``False`` the audit stops with :class:`~bind_core.errors.AuditCancelled` for the stage reported.
    """

    def __init__(self, progress: AuditProgress | None) -> None:
        self._progress = progress
        self.timings: dict[str, float] = {}
        """Seconds each finished stage took, in the order they ran."""

    def tick(self, stage: str, fraction: float) -> None:
        """Report ``(stage, fraction)``; raise :class:`~bind_core.errors.AuditCancelled` when told to stop."""
        if self._progress is not None and self._progress(stage, fraction) is False:
            raise AuditCancelled(stage)

    def run(self, stage: str, work: Callable[[], T], *, report_start: bool = True, report_end: bool = False) -> T:
        """Run one stage's ``work`` and record its seconds under ``timings[stage]``: report ``(stage, 0.0)`` first
        (unless ``report_start`` is off), and ``(stage, 1.0)`` after it when ``report_end`` (a stage without loops
        to report from). A stage that raises records no time."""
        start = time.perf_counter()
        if report_start:
            self.tick(stage, 0.0)
        out = work()
        self.timings[stage] = time.perf_counter() - start
        if report_end:
            self.tick(stage, 1.0)
        return out


def check_refinable(model: TrainedModel | None, graph: Graph, config: AuditConfig) -> None:
    """Fail before training when ``refine_steps`` asks for a refinement the model is too large for."""
    if model is not None:
        count = model.num_parameters
    else:
        count = sum(p.numel() for p in GNN(config.model, graph.num_features, graph.num_classes).parameters())
    require_refinable(count)


def metric_groups(graph: Graph, min_group_size: int) -> list[int] | None:
    """The groups every fairness metric and the influence objective take (``None``: all of them)."""
    return groups_arg(graph, included_groups(graph, min_group_size))


def training_stage(
    graph: Graph,
    config: AuditConfig,
    model: TrainedModel | None,
    *,
    progress: Tick,
    device: str | torch.device,
    threads: int = 1,
) -> TrainedModel:
    """The supplied ``model`` as it is, or one trained on ``graph`` with the config's model and training settings (the
    polish's Hessian rows on ``threads`` threads). A model left unpolished is evaluated in float64 from here on, as a
    supplied one is (its float32 weights widen exactly: the same model)."""
    if model is not None:
        return model
    trained = train(graph, config.training, config.model, progress=progress, device=device, threads=threads)
    trained.module.double()
    return trained


def metrics_stage(model: TrainedModel, graph: Graph, config: AuditConfig, groups: list[int] | None) -> Metrics:
    """Fairness and utility on the test nodes, per group, the probability histograms and, with ``bootstrap``, the
    metrics' confidence intervals (the audit result's ``metrics``)."""
    test = graph.test_idx
    proba = model.predict_proba(graph, test).double()
    values = report(model, graph, config.lam, groups)
    pairs = {
        name: None if pair is None else dataclasses.replace(pair, names=[group_label(graph, g) for g in pair.groups])
        for name, pair in worst_pairs(proba, graph.y[test], graph.sens[test], groups=groups).items()
    }
    return Metrics(
        test=TestMetrics(**vars(values), worst_pairs=pairs),
        groups=group_breakdown(model, graph, config.min_group_size),
        included_groups=groups if groups is not None else list(range(graph.num_groups)),
        histograms=probability_histograms(model, graph),
        intervals=_intervals(proba, graph, config, groups) if config.bootstrap else None,
    )


def _intervals(proba: torch.Tensor, graph: Graph, config: AuditConfig, groups: list[int] | None) -> Intervals:
    """The metrics' percentile bootstrap intervals over the test nodes (``config.bootstrap`` resamples)."""
    test = graph.test_idx
    found = bootstrap_metrics(
        proba,
        graph.y[test],
        graph.sens[test],
        resamples=config.bootstrap,
        level=config.level,
        seed=config.training.seed,
        groups=groups,
        lam=config.lam,
    )
    return Intervals(level=config.level, resamples=config.bootstrap, **{name: i.record() for name, i in found.items()})


class InfluenceStage(NamedTuple):
    """What the influence stage adds to the audit result."""

    stationarity: StationarityCheck
    influence: InfluenceResult
    refinement: Refinement | None
    profile: NodeProfile | None
    """What the harmful nodes have in common (:func:`bind_core.explain.profile.profile_nodes`); ``None`` where no
    training node has a ΔΓ (no deletion has a minimum near the weights)."""
    plan: InfluencePlan | None
    """The linear estimate's shared half (its solve), kept for the edge attribution; ``None`` for a step estimate."""
    stepper: Stepper | None = None
    """The step estimate's damped inverse, kept for the edge attribution and the debiasing's node sets; ``None`` for a
    linear estimate."""


def influence_stage(
    model: TrainedModel,
    graph: Graph,
    config: AuditConfig,
    groups: list[int] | None,
    *,
    progress: Tick,
    chunk_runner: ChunkRunner | None = None,
    deletion_threads: int = 1,
) -> InfluenceStage:
    """Describe how stationary the weights are (information, never a refusal), estimate every training node's ΔΓ
    and, with ``refine_steps``, refine
    the estimates (the refinement gets the last 80% of the stage's progress); then profile the harmful nodes (no
    retraining: statistics and a shallow tree on the final estimates, the halves seeded by the training seed)."""
    stationarity = describe_stationarity(model, graph)
    share = 0.2 if config.refine_steps else 1.0  # of the influence stage's progress; refining takes the rest
    plans: list[InfluencePlan] = []
    steppers: list[Stepper] = []
    influence = estimate(
        model,
        graph,
        config.influence_arguments(),
        groups=groups,
        progress=lambda stage, frac: progress(stage, share * frac),
        chunk_runner=chunk_runner,
        on_plan=plans.append if config.edges else None,
        on_stepper=steppers.append,
        deletion_threads=deletion_threads,
    )
    refinement = None
    if config.refine_steps:
        influence, refined = refine(
            model,
            graph,
            influence,
            max_iter=config.refine_steps,
            groups=groups,
            progress=lambda _stage, frac: progress("influence", share + (1 - share) * frac),
        )
        refinement = refined.record()
    delta = influence.delta.detach().cpu().double().numpy()
    profile = profile_nodes(graph, delta, seed=config.training.seed) if bool(influence.defined.any()) else None
    return InfluenceStage(
        stationarity,
        influence,
        refinement,
        None if profile is None else profile.document,
        plans[0] if plans else None,
        steppers[0] if steppers else None,
    )


class EdgesStage(NamedTuple):
    """What the edge attribution adds to the audit result."""

    section: EdgeAttribution
    """The result's ``edges`` (:func:`bind_core.pipeline.edge_section.edge_section`)."""
    estimate: EdgeInfluenceResult | None
    """Every edge's estimate (``None`` when not computed), for the rows the service stores."""


def edges_stage(
    model: TrainedModel,
    graph: Graph,
    config: AuditConfig,
    groups: list[int] | None,
    influence_plan: InfluencePlan | None,
    *,
    progress: Tick,
    stepper: Stepper | None = None,
    deletion_threads: int = 1,
) -> EdgesStage:
    """ΔΓ of deleting each undirected edge, reusing the node estimate's solve when it made one. One-layer GCN, GIN
    and SAGE: the influence function, in parts of :data:`EDGE_PART` edges (progress and cancellation between them).
    Multi-layer and attention models: damped first-order values for every edge and damped steps for the top
    (:mod:`bind_core.influence.deep_edges`), reusing the step estimate's damped inverse; progress and cancellation
    every batch of edges, the settled ones on ``deletion_threads`` threads."""
    start = time.perf_counter()
    progress(EDGES, 0.0)
    if not model.module.row_separable:
        found = estimate_edges_deep(
            model,
            graph,
            lam=config.lam,
            groups=groups,
            stepper=stepper,
            progress=lambda f: progress(EDGES, f),
            threads=deletion_threads,
        )
        seconds = time.perf_counter() - start
        return EdgesStage(edge_section(graph, found, seconds=seconds, shared_solve=stepper is not None), found)
    shared = influence_plan
    if shared is None:  # a step estimate made no plan: make the linear one once, for every part
        shared = make_plan(model, graph, InfluenceArguments(lam=config.lam, solver=config.solver), groups=groups)
    edges = undirected_edges(graph)
    parts = []
    for first in range(0, max(int(edges.shape[0]), 1), EDGE_PART):
        parts.append(
            estimate_edges(
                model,
                graph,
                lam=config.lam,
                edges=edges[first : first + EDGE_PART],
                influence_plan=shared,
                groups=groups,
            )
        )
        progress(EDGES, min(first + EDGE_PART, int(edges.shape[0])) / max(int(edges.shape[0]), 1))
    found = join_edge_results(parts)
    seconds = time.perf_counter() - start
    return EdgesStage(edge_section(graph, found, seconds=seconds, shared_solve=influence_plan is not None), found)


def _set_estimator(
    model: TrainedModel,
    graph: Graph,
    influence: InfluenceResult,
    groups: list[int] | None,
    hold: Callable[[float], None] | None = None,
    stepper: Stepper | None = None,
) -> Callable[[list[int]], float] | None:
    """For a step estimate, ΔΓ of deleting a set of training positions as a whole (its own damped step), with the
    estimate's own ``stepper`` when given (else one made alike: its damping rule and operator); else ``None`` (the
    influence function's sets are non-overlapping and their estimates add up)."""
    details = influence.solve.details
    if details.get("method") != "step":
        return None
    if stepper is None:
        operator = "lanczos" if influence.solve.solver == "lanczos" else "dense"  # the estimate's own operator
        stepper = Stepper.build(
            FunctionalModel.from_trained(model, graph, groups),
            rule=details["damping_rule"],
            operator=operator,
            progress=hold,
        )
    lam = influence.lam

    def set_estimate(positions: list[int]) -> float:
        delta = stepper.delete(positions).delta
        return lam * float(delta[0]) + (1 - lam) * float(delta[1])

    return set_estimate


def debiasing_stage(
    model: TrainedModel,
    graph: Graph,
    config: AuditConfig,
    influence: InfluenceResult,
    groups: list[int] | None,
    *,
    progress: Tick,
    keep: Callable[[int, TrainedModel], None] | None = None,
    stepper: Stepper | None = None,
    processes: int = 1,
) -> list[DebiasingRow]:
    """For each budget, delete the most harmful training nodes, retrain and compare (the result's ``debiasing``);
    every retraining as ``config.debias_retrain`` says, named in each row's ``retrain``; ``keep(i, model)`` is handed
    each budget's retrained model (:func:`~bind_core.debiasing.debias.debias`). ``stepper``: the step estimate's, which
    settles each budget's set as a whole (made again when not given). ``processes``: forked processes running the
    retrainings (each budget's and the chance check's) at once where it is safe
    (:func:`~bind_core.forks.each_self_seeded`)."""
    hold = lambda _f: progress("debiasing", 0.0)  # noqa: E731 (a checkpoint while a stage prepares)
    utility = (
        utility_influence(model, graph, non_iid=config.non_iid, solver=config.solver, progress=hold)
        if config.debias_utility
        else None
    )
    retrain = config.debias_training(model.train_config)
    seeds, rule = chance_decision(model, config, processes)
    rows = debias(
        model,
        graph,
        influence.delta,
        budgets=config.budgets,
        lam=config.lam,
        progress=progress,
        groups=groups,
        utility=utility,
        chance_seeds=seeds,
        random_sets=config.debias_random_sets,
        set_estimate=_set_estimator(model, graph, influence, groups, hold, stepper),
        retrain=retrain,
        keep=keep,
        processes=processes,
        resamples=config.bootstrap,
        level=config.level,
        seed=config.training.seed,
    )
    recipe = decode(RetrainRecipe, (retrain or model.train_config).to_dict())
    return [dataclasses.replace(row, retrain=config.debias_retrain, recipe=recipe, chance_rule=rule) for row in rows]


def edge_debiasing_reason(config: AuditConfig, edges: EdgeInfluenceResult | None) -> str | None:
    """Why the audit does not debias the edges (``None``: it does). It needs the edges' estimate, the chance check's
    seeds (every budget is judged against random edges) and the debiasing stage among ``stages`` (not node
    ``budgets``: the edges' own budgets are ``edge_budgets``)."""
    if edges is None:
        return "the edges were not attributed"
    if not config.debias_seeds:
        return "edge debiasing needs debias_seeds (3+ seeds): each budget is checked against random edges"
    if not config.edge_budgets:
        return "edge_budgets is empty"
    if "debiasing" not in config.stages:
        return "the debiasing stage was not asked for (stages)"
    return None


def edge_debiasing_stage(
    model: TrainedModel,
    graph: Graph,
    config: AuditConfig,
    edges: EdgeInfluenceResult,
    groups: list[int] | None,
    *,
    progress: Tick,
    processes: int = 1,
) -> EdgeDebiasing:
    """Delete the most harmful edges per edge budget, retrain with every debias seed and compare with random edges
    (:func:`bind_core.debiasing.edge_debias.debias_edges`; the ``edges`` section's ``debiasing``). The random draws
    are seeded by the training seed; progress (and cancellation) between retrainings; every retraining as
    ``config.debias_retrain`` says (``retrain``); ``processes``: forked processes retraining at once where it is
    safe."""
    found = debias_edges(
        model,
        graph,
        edges,
        config.edge_budgets,
        config.debias_seeds,
        random_sets=config.debias_random_sets,
        groups=groups,
        seed=config.training.seed,
        progress=lambda fraction: progress(EDGE_DEBIASING, fraction),
        retrain=config.debias_training(model.train_config),
        processes=processes,
        resamples=config.bootstrap,
        level=config.level,
    )
    return dataclasses.replace(found, retrain=config.debias_retrain)


def validation_stage(
    model: TrainedModel,
    graph: Graph,
    config: AuditConfig,
    influence: InfluenceResult,
    groups: list[int] | None,
    *,
    progress: Tick,
    threads: int = 1,
    coordinates: Coordinates | None = None,
) -> Validation:
    """Check a sample of the estimates against re-optimisation without the node (the result's ``validation``), the
    re-optimisations on ``threads`` threads (a proximal one in ``coordinates``: the estimate's curvature's, given by
    the audit that formed it)."""
    checked = validate(
        model,
        graph,
        influence,
        protocol="sample",
        sample=config.validation_sample,
        progress=progress,
        groups=groups,
        threads=threads,
        coordinates=coordinates,
    )
    return with_user_ids(checked.record(), graph)


def with_user_ids(found: Validation, graph: Graph) -> Validation:
    """``found`` with each checked set's nodes also by the user's ids (``node_ids`` beside the indices ``nodes``)."""
    points = [dataclasses.replace(p, node_ids=user_ids(graph, p.nodes)) for p in found.points]
    gone = found.undefined_truth
    if gone is not None:
        gone = dataclasses.replace(gone, node_ids=[user_ids(graph, nodes) for nodes in gone.nodes])
    return dataclasses.replace(found, points=points, undefined_truth=gone)


def stability_stage(
    graph: Graph, config: AuditConfig, influence: InfluenceResult, *, progress: Tick, device: str | torch.device
) -> Stability:
    """The overlap of the top-k harmful sets across ``stability_seeds`` (the result's ``stability``); the audit's own
    estimate stands for its training seed."""
    return topk_stability(
        graph,
        config,
        seeds=config.stability_seeds,
        k=config.stability_k,
        device=device,
        known={config.training.seed: influence.delta},
        progress=lambda _stage, frac: progress(STABILITY, frac),
    )
