"""Edge debiasing: delete the edges the edge estimate calls most harmful, retrain, and check it against chance.

The edge estimate (:mod:`bind_core.influence.edges`) ranks every undirected edge by the estimated change of Γ when it
is deleted and the model retrained (negative: the edge is harmful). For a budget (a fraction of the edges whose
deletion changes a training loss or a test prediction: the others cannot move Γ, so neither the selection nor the
random draws spend the budget on them) :func:`debias_edges` deletes the most harmful edges (those with a negative
estimate, at most the budget: fewer when fewer are harmful; ``requested`` and ``deleted`` say so), retrains from
scratch with every seed, and compares the effect with deleting random edges of the same count from the same pool,
paired by seed (:func:`bind_core.debiasing.chance.against_random_sets`: the noise floor, the random sets' spread,
the advantage and a verdict that calls nothing a win inside the noise).

"Before" is Γ of the models retrained on the unchanged graph (their mean over the seeds, beside the audited
model's own Γ); "after" is Γ retrained without the selected edges, so before and after differ by the selected
set's mean effect, and both went through the same training. With ``resamples``, each row's ``change`` is that mean
change per metric with its paired bootstrap interval over the test nodes
(:func:`~bind_core.fairness.bootstrap.mean_paired_change`: every resample draws the same test nodes for each seed's
pair of models): the test nodes' sampling noise, beside the seeds' (the check against chance).
"""

from __future__ import annotations

import dataclasses
import statistics
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import torch
from torch import Tensor

from bind_core.data.graph import Graph
from bind_core.debiasing.chance import against_random_sets, seed_runs
from bind_core.debiasing.edge_records import EdgeDebiasing, EdgeDebiasingRow
from bind_core.debiasing.overreach import overreach
from bind_core.errors import ConfigError
from bind_core.fairness.bootstrap import mean_paired_change
from bind_core.fairness.records import Intervals
from bind_core.influence.edges import EdgeInfluenceResult
from bind_core.training.fit import TrainConfig, TrainedModel


def harmful_edges(result: EdgeInfluenceResult, count: int) -> Tensor:
    """Positions (into ``result.edges``) of at most ``count`` edges with the most negative estimates, among the
    edges with a negative estimate (most harmful first)."""
    if count < 0:
        raise ConfigError(f"count: {count!r} must be >= 0")
    order = torch.argsort(result.delta)
    order = order[result.delta[order] < 0]
    return order[:count]


def debias_edges(
    model: TrainedModel,
    graph: Graph,
    result: EdgeInfluenceResult,
    budgets: Sequence[float],
    seeds: Sequence[int],
    *,
    random_sets: int = 3,
    groups: list[int] | None = None,
    retrain: TrainConfig | None = None,
    seed: int = 0,
    progress: Callable[[float], None] | None = None,
    processes: int = 1,
    resamples: int = 0,
    level: float = 0.95,
) -> EdgeDebiasing:
    """Delete the most harmful edges for each budget, retrain with each seed, compare with random edges.

    Args:
        result: :func:`~bind_core.influence.edges.estimate_edges` of ``model`` on ``graph`` (all edges).
        budgets: fractions in (0, 1] of the edges that affect a loss or a test prediction.
        seeds: at least 3 distinct training seeds (the noise floor's and every retraining's).
        random_sets: random edge sets per budget.
        retrain: the retrainings' settings (default: the model's).
        seed: seeds the random draws.
        progress: ``progress(fraction)`` over all retrainings; may raise to abort.
        processes: forked processes retraining at once where it is safe (:func:`~bind_core.forks.each_self_seeded`;
            the values do not depend on it).
        resamples: bootstrap resamples of the test nodes for each row's ``change`` (the mean change over the seeds
            with its paired interval, seeded by ``seed``); 0: no ``change``.
        level: that interval's coverage.

    Returns:
        The :class:`~bind_core.debiasing.edge_records.EdgeDebiasing`: ``pool`` (edges that affect something),
        ``gamma_audited``, ``baselines`` (Γ per seed on the unchanged graph, keyed by the seed as a string, as JSON
        stores it), ``noise_floor`` and ``budgets``: per budget ``budget``, ``requested``, ``deleted``, ``estimated``
        (the sum of the deleted edges' estimates), ``cross_group`` (how many deleted edges join two groups),
        ``before`` and ``after`` (mean Γ retrained with and without them), ``caveat`` (``None``, or why the summed
        estimate cannot be taken at its word), the check against chance and ``change`` (with ``resamples``).
    """
    if not budgets or any(not 0 < b <= 1 for b in budgets):
        raise ConfigError(f"budgets: {list(budgets)!r} must be fractions in (0, 1]")
    pool = result.edges[result.affects.nonzero().flatten()]
    per_budget = (1 + random_sets) * len(seeds)
    total = len(seeds) + per_budget * len(budgets)
    run = _EdgeBudgets(
        model, graph, result, pool, random_sets, groups, retrain, progress, total, processes, (resamples, level, seed)
    )
    baselines = run.baselines(seeds)
    before = statistics.fmean(baselines.values())
    rows = [
        run.row(budget, baselines, before, seed=seed + i, offset=len(seeds) + i * per_budget, size=per_budget)
        for i, budget in enumerate(budgets)
    ]
    return EdgeDebiasing(
        pool=int(pool.shape[0]),
        gamma_audited=result.gamma["total"],
        baselines={str(s): g for s, g in baselines.items()},
        noise_floor=statistics.stdev(baselines.values()),
        budgets=rows,
    )


@dataclass
class _EdgeBudgets:
    """What every budget of :func:`debias_edges` shares: the model and graph retrained, the estimate, the ``pool``
    of edges random sets are drawn from, the retrainings' settings and the progress over ``total`` retrainings."""

    model: TrainedModel
    graph: Graph
    result: EdgeInfluenceResult
    pool: Tensor
    random_sets: int
    groups: list[int] | None
    retrain: TrainConfig | None
    progress: Callable[[float], None] | None
    total: int
    processes: int = 1
    resampling: tuple[int, float, int] = (0, 0.95, 0)
    """``(resamples, level, seed)`` of each row's ``change`` (no ``change`` with 0 resamples)."""
    before_proba: dict[int, Tensor] = dataclasses.field(default_factory=dict)
    """Each seed's model retrained on the unchanged graph: its test nodes' class probabilities."""

    def baselines(self, seeds: Sequence[int]) -> dict[int, float]:
        """Γ of the unchanged graph retrained with each seed (:func:`~bind_core.debiasing.chance.seed_runs`); their
        test probabilities are kept for the rows' ``change``."""
        progress = self.progress
        hold = None if progress is None else (lambda: progress(0.0))
        runs = seed_runs(
            self.model,
            self.graph,
            seeds,
            lam=self.result.lam,
            groups=self.groups,
            retrain=self.retrain,
            hold=hold,
            processes=self.processes,
        )
        self.before_proba = {s: proba for s, (_, proba) in runs.items()}
        return {s: gamma for s, (gamma, _) in runs.items()}

    def row(
        self, budget: float, baselines: dict[int, float], before: float, *, seed: int, offset: int, size: int
    ) -> EdgeDebiasingRow:
        """Delete the most harmful edges of ``budget``, retrain and compare with random edges (``seed``: the random
        draws'; ``offset`` and ``size``: this budget's retrainings in the progress)."""
        requested = round(budget * int(self.pool.shape[0]))
        chosen = harmful_edges(self.result, requested)
        edges = self.result.edges[chosen]
        after_proba: dict[int, Tensor] = {}
        check = against_random_sets(
            self.model,
            edges,
            self.pool,
            self.graph.without_edges,
            baselines,
            random_sets=self.random_sets,
            lam=self.result.lam,
            groups=self.groups,
            seed=seed,
            progress=self._stage(offset, size),
            retrain=self.retrain,
            empty_reason="no edge has a negative estimate: none is harmful",
            items="edges",
            processes=self.processes,
            on_selected=after_proba.__setitem__,
        )
        estimated = float(self.result.delta[chosen].sum())
        sens = self.graph.sens
        return EdgeDebiasingRow(
            budget=budget,
            requested=requested,
            deleted=int(chosen.numel()),
            estimated=estimated,
            caveat=overreach(estimated, self.result.gamma["total"], "edges"),
            cross_group=int((sens[edges[:, 0]] != sens[edges[:, 1]]).sum()),
            before=before,
            after=None if check.selected is None else before + check.selected.mean,
            change=self.change(after_proba),
            **{f.name: getattr(check, f.name) for f in dataclasses.fields(check)},
        )

    def change(self, after: dict[int, Tensor]) -> Intervals | None:
        """The mean change over the seeds, after − before per metric, with its paired bootstrap interval over the
        test nodes (``None`` without resamples, or where nothing was deleted). Deleting edges keeps every node, so
        both sides are read on the same test nodes, in the same order."""
        resamples, level, seed = self.resampling
        if resamples <= 0 or not after:
            return None
        test = self.graph.test_idx
        found = mean_paired_change(
            [(self.before_proba[s], after[s]) for s in self.before_proba], self.graph.y[test], self.graph.sens[test],
            resamples=resamples, level=level, seed=seed, groups=self.groups, lam=self.result.lam,
        )  # fmt: skip
        return Intervals(level=level, resamples=resamples, **{name: i.record() for name, i in found.items()})

    def _stage(self, offset: int, size: int) -> Callable[[float], None] | None:
        """The progress of ``size`` retrainings that start ``offset`` in."""
        progress, total = self.progress, self.total
        if progress is None:
            return None
        return lambda fraction: progress((offset + fraction * size) / total)
