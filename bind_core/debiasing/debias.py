"""Debiasing by deletion: remove the most harmful training nodes, retrain from scratch, compare."""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import torch
from torch import Tensor

from bind_core.data.graph import Graph, positions
from bind_core.data.labels import group_labels, user_ids
from bind_core.debiasing.chance import against_random, seed_baselines
from bind_core.debiasing.nodesets import resolve_budget, select
from bind_core.debiasing.overreach import overreach
from bind_core.debiasing.records import DebiasingRow
from bind_core.fairness.bootstrap import paired_change
from bind_core.fairness.metrics import evaluate
from bind_core.fairness.records import Intervals, MetricValues
from bind_core.forks import each_self_seeded
from bind_core.influence.result import InfluenceResult
from bind_core.training.fit import ProgressCallback, TrainConfig, TrainedModel, train


def proba_on_test_nodes(model: TrainedModel, graph: Graph) -> Tensor:
    """``model``'s class probabilities on ``graph``'s test nodes, in float64 (what :func:`report` measures)."""
    return model.predict_proba(graph, graph.test_idx).double()


def report(model: TrainedModel, graph: Graph, lam: float = 0.5, groups: list[int] | None = None) -> MetricValues:
    """Accuracy, AUC, F1, ΔSP, ΔEO, Γ_SP, Γ_EO, Γ of ``model`` on ``graph``'s test nodes; the fairness metrics
    over pairs of ``groups`` (default: all).

    Args:
        model: the model measured.
        graph: the graph whose test nodes it is measured on.
        lam: Γ's weighting of Γ_SP.
        groups: the groups the fairness metrics compare (default: every group).

    Returns:
        The :class:`~bind_core.fairness.records.MetricValues` (an undefined metric ``None``, with its reason).
    """
    test = graph.test_idx
    proba = proba_on_test_nodes(model, graph)
    y, sens = graph.y[test], graph.sens[test]
    classes = [f"{graph.label_name}={c}" for c in graph.class_names or range(graph.num_classes)]
    found = evaluate(
        proba,
        y,
        sens,
        lam=lam,
        num_groups=graph.num_groups,
        groups=groups,
        group_names=group_labels(graph),
        class_names=classes,
    )
    return found.values()


BIAS_METRICS = ("delta_sp", "delta_eo", "gamma")
"""The bias metrics a deletion is meant to lower; one that rises instead is a backfire (:func:`backfired`)."""

BIAS_NAMES = {"delta_sp": "ΔSP", "delta_eo": "ΔEO", "gamma": "Γ"}
"""Each of :data:`BIAS_METRICS` as readers write it (the verdict, the report, the console): the keys stay in the
JSON, the names in the words."""


def said(metrics: list[str]) -> str:
    """``metrics`` (keys of :data:`BIAS_NAMES`) as readers write them, comma-separated.

    Args:
        metrics: metric keys such as ``["delta_sp", "delta_eo"]``.

    Returns:
        ``"ΔSP, ΔEO"``; a key without a name stays as it is.
    """
    return ", ".join(BIAS_NAMES.get(m, m) for m in metrics)


def backfired(before: MetricValues, after: MetricValues) -> list[str]:
    """The bias metrics (:data:`BIAS_METRICS`) that rose from ``before`` to ``after``: the deletion backfired on them.
    A metric undefined on either side is left out (it cannot be said to have risen)."""
    rose = []
    for name in BIAS_METRICS:
        b, a = getattr(before, name), getattr(after, name)
        if b is not None and a is not None and a > b + 1e-12:
            rose.append(name)
    return rose


def within_noise(rose: Sequence[str], change: Intervals | None) -> list[str] | None:
    """Of the bias metrics that ``rose`` (:func:`backfired`), those whose rise lies inside the test nodes' sampling
    noise: the change's paired bootstrap interval reaches 0 or below, so the rise may be an artefact of which nodes
    were tested. ``None`` without the interval (``change``); a metric without an interval of its own (none could be
    formed) is not listed: it stays a plain backfire."""
    if change is None:
        return None
    inside = []
    for name in rose:
        band = getattr(change, name, None)
        if band is not None and band.low is not None and band.low <= 0:
            inside.append(name)
    return inside


def debias(
    model: TrainedModel,
    graph: Graph,
    influence: InfluenceResult | torch.Tensor,
    *,
    budgets: Sequence[float] = (0.01, 0.1),
    lam: float | None = None,
    progress: ProgressCallback | None = None,
    groups: list[int] | None = None,
    utility: torch.Tensor | None = None,
    chance_seeds: Sequence[int] = (),
    random_sets: int = 3,
    set_estimate: Callable[[list[int]], float] | None = None,
    retrain: TrainConfig | None = None,
    keep: Callable[[int, TrainedModel], None] | None = None,
    processes: int = 1,
    resamples: int = 0,
    level: float = 0.95,
    seed: int = 0,
) -> list[DebiasingRow]:
    """For each budget: delete the harmful node set (:func:`~bind_core.debiasing.nodesets.select`), retrain from scratch
    with the model's original settings and seed, and report the metrics before and after.

    Args:
        model: the audited model; its settings and seed are the retrainings' (unless ``retrain``).
        graph: the graph it was trained on.
        influence: the estimate (:func:`bind_core.estimate_influence`), or its ``delta`` (aligned with
            ``train_idx``).
        budgets: fractions (< 1) or counts (>= 1) of the training set to delete, one row each.
        lam: Γ's weighting of Γ_SP; default: the estimate's, or 0.5 for a bare tensor.
        progress: called as the retrainings advance.
        groups: the groups the fairness metrics compare (default: every group).
        utility: aligned with ``train_idx`` (:func:`~bind_core.influence.utility.utility_influence`); when given,
            nodes whose deletion is estimated to raise the validation loss (``utility > 0``) are never deleted, so
            the set trades no estimated utility for fairness (utility-aware BIND; the paper's method is ``None``).
        chance_seeds: at least 3 training seeds (empty: skipped); each budget's set is also checked against
            chance (:func:`bind_core.debiasing.chance.against_random`: the set and ``random_sets`` random sets of
            its size, each retrained with every seed, against the seeds' noise floor on the unchanged graph), in
            the row's ``against_random``.
        random_sets: random sets per budget for that check.
        set_estimate: ``set_estimate(positions)`` (positions in ``train_idx``) estimates each set as a whole (a
            step estimate's :class:`~bind_core.influence.step.Stepper`); the set is then the top of the ranking
            with overlapping computation graphs allowed, so a multi-layer model's budget can be reached (Theorem
            3's non-overlap rule, which makes the members' estimates add up, admitted 27 of 100 requested nodes
            for a two-layer GCN). Without it the set keeps the non-overlap rule and its estimate is the members'
            sum.
        retrain: the settings of every retraining here (the after-deletion one and the chance check's), e.g. the
            model's without the polish (``AuditConfig.debias_retrain="adam"``); ``None``: the model's own. When
            given, ``before`` is the unchanged graph retrained with them too (the model's seed), not the audited
            model, so that before and after went through the same training; so it is with ``None`` where the
            model's own recipe does not end with the polish (a supplied model's, a model Adam leaves): only the
            polish brings every retraining back to the audited weights (as
            :meth:`~bind_core.pipeline.config.AuditConfig.debias_training` decides for the audit).
        keep: ``keep(i, model)`` is handed the ``i``-th budget's retrained model as soon as it is trained (to store
            or export it: :func:`~bind_core.training.export.export_model`); otherwise it is discarded.
        processes: forked processes running the retrainings (each budget's and the chance check's) at once where it
            is safe (:func:`~bind_core.forks.each_self_seeded`; the values do not depend on it).
        resamples: bootstrap resamples of the test nodes for each row's ``change`` (after − before with its paired
            interval, :func:`~bind_core.fairness.bootstrap.paired_change`); 0: no ``change``.
        level: the ``change`` intervals' coverage.
        seed: the resamples' seed.

    Returns:
        One :class:`~bind_core.debiasing.records.DebiasingRow` per budget (the deleted nodes by the user's ids, the
        estimate, the metrics before and after over pairs of ``groups``, the backfires and the check against chance).
    """
    delta, lam = _estimates(influence, lam)
    if retrain is None and not model.train_config.polish:  # before and after through the same training
        retrain = model.train_config
    choice = _Choice.of(delta, utility, set_estimate, graph, model.model_config.layers)
    parts = _parts(len(budgets), bool(chance_seeds), retrain)
    run = _Run(model, graph, lam, groups, retrain, progress, parts, keep=keep, processes=processes)
    run.resampling = (resamples, level, seed)
    audited = run.report(model, graph)
    unchanged, retrained = run.retrainings(choice, budgets)
    before = audited if unchanged is None else run.report(unchanged, graph)
    run.before_proba = proba_on_test_nodes(model if unchanged is None else unchanged, graph)
    baselines = run.baselines(chance_seeds) if chance_seeds else None
    return [
        run.budget(i, b, choice, retrained[i], before, audited.gamma, baselines, random_sets)
        for i, b in enumerate(budgets)
    ]


NO_SET_MINIMUM = (
    "deleting the set together has no minimum near the given weights (retraining without it, even kept near them, "
    "carries the weights away): no value estimates it, so estimated_delta is null; the retrained figures stand"
)
"""A row's ``caveat`` where the set's own step estimate has no minimum near the weights."""


def _estimates(influence: InfluenceResult | torch.Tensor, lam: float | None) -> tuple[torch.Tensor, float]:
    """The per-node estimates (aligned with ``train_idx``) and Γ's weighting: ``lam``, else the estimate's, else
    0.5."""
    if isinstance(influence, InfluenceResult):
        lam = influence.lam if lam is None else lam
        influence = influence.delta
    return influence, 0.5 if lam is None else lam


def _parts(budgets: int, chance: bool, retrain: TrainConfig | None) -> int:
    """The retraining groups :func:`debias`'s progress counts: one per budget, one more per budget and one for the
    seeds' baselines with the chance check, and one for the unchanged graph retrained with other settings."""
    parts = budgets * (2 if chance else 1) + (1 if chance else 0)
    return parts + (0 if retrain is None else 1)


@dataclass
class _Choice:
    """How :func:`debias` chooses each budget's node set and estimates its effect."""

    delta: torch.Tensor
    """The estimates, aligned with ``train_idx``."""
    candidates: torch.Tensor
    """The ranking the set is selected from: ``delta``, with the nodes whose deletion costs utility at +∞."""
    utility: torch.Tensor | None
    set_estimate: Callable[[list[int]], float] | None
    position: torch.Tensor
    """Node → its place in ``train_idx``."""
    hops: int
    """The non-overlap rule's reach (0: overlap allowed)."""

    @classmethod
    def of(
        cls,
        delta: torch.Tensor,
        utility: torch.Tensor | None,
        set_estimate: Callable[[list[int]], float] | None,
        graph: Graph,
        layers: int,
    ) -> _Choice:
        """The choice for ``delta``: nodes whose deletion raises the validation loss (``utility > 0``) are never
        chosen; with ``set_estimate``, overlapping computation graphs are allowed (``layers``: the rule's reach
        otherwise). A node whose ΔΓ is NaN (no minimum near the weights: no value answers it) is never chosen."""
        candidates = torch.where(torch.isnan(delta), torch.full_like(delta, torch.inf), delta)
        if utility is not None:
            if utility.shape != delta.shape:
                raise ValueError("utility must be aligned with influence (one value per training node)")
            candidates = torch.where(utility.to(delta.device) > 0, torch.full_like(delta, torch.inf), candidates)
        hops = 0 if set_estimate is not None else layers
        return cls(delta, candidates, utility, set_estimate, positions(graph.train_idx, graph.num_nodes), hops)

    def nodes(self, graph: Graph, budget: float) -> torch.Tensor:
        """The node set deleted for ``budget`` (:func:`~bind_core.debiasing.nodesets.select`)."""
        return select(self.candidates, graph, budget, "harmful", hops=self.hops)

    def estimate(self, nodes: torch.Tensor) -> float:
        """The set's estimate: ``set_estimate``'s, else the sum of its members'."""
        if self.set_estimate is not None and nodes.numel():
            return self.set_estimate(self.position[nodes].tolist())
        return float(self.delta[self.position[nodes]].sum())

    def selection(self) -> str:
        """A row's ``selection``: ``top_ranked`` with a set estimate, else ``non_overlapping``."""
        return "top_ranked" if self.set_estimate is not None else "non_overlapping"

    def estimated_utility(self, nodes: torch.Tensor) -> float | None:
        """A row's ``estimated_utility``: the set's summed utility influence (``None`` unless utility-aware)."""
        return None if self.utility is None else float(self.utility[self.position[nodes]].sum())


@dataclass(frozen=True)
class _Retrained:
    """A budget's set, the graph without it and the model retrained there (``seconds`` it took to train)."""

    nodes: torch.Tensor
    graph: Graph
    model: TrainedModel
    seconds: float


def _nothing() -> None:
    """A progress checkpoint that checks nothing (the retrainings' progress goes through ``_Run.progress``)."""


@dataclass
class _Run:
    """One :func:`debias` call's retrainings: the model, its graph, the settings and the progress over ``parts``
    retraining groups (``done`` of them so far)."""

    model: TrainedModel
    graph: Graph
    lam: float
    groups: list[int] | None
    retrain: TrainConfig | None
    progress: ProgressCallback | None
    parts: int
    done: int = 0
    keep: Callable[[int, TrainedModel], None] | None = None
    processes: int = 1
    resampling: tuple[int, float, int] = (0, 0.95, 0)
    """Each row's ``change``: bootstrap resamples (0: none), the intervals' coverage and the resamples' seed."""
    before_proba: Tensor | None = None
    """The test nodes' probabilities of the model before (the row's ``change`` is against them)."""

    def report(self, model: TrainedModel, graph: Graph) -> MetricValues:
        """:func:`report` with this call's ``lam`` and ``groups``."""
        return report(model, graph, self.lam, self.groups)

    def retrainings(self, choice: _Choice, budgets: Sequence[float]) -> tuple[TrainedModel | None, list[_Retrained]]:
        """The unchanged graph retrained with ``retrain`` (``None`` without it: the audited model is the one before)
        and each budget's graph without its chosen set, retrained: ``processes`` at once in forked processes where
        that is safe (:func:`~bind_core.forks.each_self_seeded`; the same models either way, each trained with its
        recipe's seed), each handed to ``keep`` as soon as it is trained, in order."""
        sets = [choice.nodes(self.graph, budget) for budget in budgets]
        graphs = [self.graph.without_nodes(nodes)[0] for nodes in sets]
        first = 0 if self.retrain is None else 1
        settings = self.model.train_config if self.retrain is None else self.retrain
        found: list[tuple[TrainedModel, float]] = []

        def work(graph: Graph, here: Callable[[], None] | None) -> tuple[TrainedModel, float]:
            start = time.perf_counter()
            progress = None if here is None else self._training()  # a child's progress cannot reach the caller
            trained = train(graph, settings, self.model.model_config, progress=progress, device=self.model.device)
            return trained, time.perf_counter() - start

        def put(i: int, result: tuple[TrainedModel, float]) -> None:
            found.append(result)
            self.done += 1
            if self.progress is not None:
                self.progress("debiasing", self.done / self.parts)
            if self.keep is not None and i >= first:
                self.keep(i - first, result[0])

        units = ([self.graph] if first else []) + graphs
        each_self_seeded(units, work, put, processes=self.processes, hold=None if self.progress is None else _nothing)
        retrained = [
            _Retrained(nodes, graph, trained, seconds)
            for nodes, graph, (trained, seconds) in zip(sets, graphs, found[first:], strict=True)
        ]
        return (found[0][0] if first else None), retrained

    def baselines(self, seeds: Sequence[int]) -> dict[int, float]:
        """Γ of the unchanged graph retrained with each seed (:func:`~bind_core.debiasing.chance.seed_baselines`)."""
        progress, done, parts = self.progress, self.done, self.parts
        hold = None if progress is None else (lambda: progress("debiasing", done / parts))
        baselines = seed_baselines(
            self.model,
            self.graph,
            seeds,
            lam=self.lam,
            groups=self.groups,
            hold=hold,
            retrain=self.retrain,
            processes=self.processes,
        )
        self.done += 1
        if progress is not None:
            progress("debiasing", self.done / parts)
        return baselines

    def budget(
        self,
        i: int,
        budget: float,
        choice: _Choice,
        retrained: _Retrained,
        before: MetricValues,
        gamma: float | None,
        baselines: dict[int, float] | None,
        random_sets: int,
    ) -> DebiasingRow:
        """The ``i``-th ``budget``'s row: its set deleted and the graph ``retrained`` without it, compared, and checked
        against chance (a row of :func:`debias`)."""
        start = time.perf_counter()
        nodes, reduced = retrained.nodes, retrained.graph
        chance = None
        if baselines is not None:
            chance = against_random(
                self.model,
                self.graph,
                nodes,
                baselines,
                random_sets=random_sets,
                lam=self.lam,
                groups=self.groups,
                seed=i,
                progress=self._fraction(),
                retrain=self.retrain,
                processes=self.processes,
            )
            self.done += 1
        est = choice.estimate(nodes)
        defined = not math.isnan(est)  # NaN: the set's own settle has no minimum near the weights
        caveat = overreach(est, gamma, "nodes") if defined else NO_SET_MINIMUM
        after = self.report(retrained.model, reduced)
        change = self.change(proba_on_test_nodes(retrained.model, reduced))
        rose = backfired(before, after)
        return DebiasingRow(
            budget=budget,
            requested=resolve_budget(budget, self.graph.train_idx.numel()),
            deleted=int(nodes.numel()),
            nodes=user_ids(self.graph, nodes.tolist()),
            estimated_delta=est if defined else None,
            caveat=caveat,
            selection=choice.selection(),
            utility_aware=choice.utility is not None,
            estimated_utility=choice.estimated_utility(nodes),
            before=before,
            after=after,
            backfired=rose,
            within_noise=within_noise(rose, change),
            against_random=chance,
            seconds=retrained.seconds + time.perf_counter() - start,
            change=change,
        )

    def change(self, after: Tensor) -> Intervals | None:
        """After − before with its paired bootstrap interval over the test nodes (``None`` without resamples, or
        where the reduced graph's test nodes are not the graph's: a deletion removes training nodes only, and the
        test nodes keep their order, so they are)."""
        resamples, level, seed = self.resampling
        before = self.before_proba
        if resamples <= 0 or before is None or after.shape != before.shape:
            return None
        test = self.graph.test_idx
        found = paired_change(
            before, after, self.graph.y[test], self.graph.sens[test], resamples=resamples, level=level, seed=seed,
            groups=self.groups, lam=self.lam,
        )  # fmt: skip
        return Intervals(level=level, resamples=resamples, **{name: i.record() for name, i in found.items()})

    def _training(self) -> ProgressCallback | None:
        """The progress of a retraining that starts ``done`` groups in (``train``'s ``(stage, fraction)``)."""
        progress, done, parts = self.progress, self.done, self.parts
        return None if progress is None else (lambda _s, f: progress("debiasing", (done + f) / parts))

    def _fraction(self) -> Callable[[float], None] | None:
        """The progress of a group of retrainings that starts ``done`` groups in (``progress(fraction)``)."""
        progress, done, parts = self.progress, self.done, self.parts
        return None if progress is None else (lambda f: progress("debiasing", (done + f) / parts))
