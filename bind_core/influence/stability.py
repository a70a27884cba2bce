"""How stable the influence ranking is across training seeds: the overlap of the top-k harmful sets.

Each seed trains the model afresh (same settings otherwise) and estimates every training node's ΔΓ; the
top-k harmful set is the k nodes with the most negative ΔΓ (fewer when fewer are harmful). Overlap is
reported per pair of seeds and over all seeds together: the intersection size and the Jaccard index
``|A ∩ B| / |A ∪ B|`` (1.0: the same set).
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from typing import Protocol

import torch

from bind_core.data.graph import Graph
from bind_core.data.groups import groups_arg, included_groups
from bind_core.data.labels import user_ids
from bind_core.errors import ConfigError
from bind_core.influence.arguments import InfluenceArguments, Solver
from bind_core.influence.estimate import estimate
from bind_core.influence.records import Overlap, PairOverlap, Stability
from bind_core.models.gnn import ModelConfig
from bind_core.training.fit import TrainConfig, train


class RetrainSettings(Protocol):
    """The settings each seed's retrain and estimate read; only the training seed varies between seeds. The
    audit's :class:`~bind_core.pipeline.config.AuditConfig` has them all."""

    @property
    def model(self) -> ModelConfig: ...
    @property
    def training(self) -> TrainConfig: ...
    @property
    def lam(self) -> float: ...
    @property
    def non_iid(self) -> bool: ...
    @property
    def solver(self) -> Solver: ...
    @property
    def min_group_size(self) -> int: ...


def topk_harmful(delta: torch.Tensor, graph: Graph, k: int) -> list[int | str]:
    """The user's ids (:func:`~bind_core.data.labels.user_ids`) of the (at most) ``k`` training nodes with the most
    negative ``delta`` (one per training node, in ``train_idx`` order), most harmful first."""
    order = torch.argsort(delta)[:k]
    order = order[delta[order] < 0]
    return user_ids(graph, graph.train_idx[order].tolist())


def _overlap(sets: Sequence[set[int | str]]) -> Overlap:
    """The sets' intersection, union and Jaccard index (1 for empty sets)."""
    inter = set.intersection(*sets)
    union = set.union(*sets)
    return Overlap(intersection=len(inter), union=len(union), jaccard=len(inter) / len(union) if union else 1.0)


def topk_stability(
    graph: Graph,
    config: RetrainSettings,
    *,
    seeds: Sequence[int] = (1, 10, 100),
    k: int = 10,
    device: str | torch.device = "cpu",
    known: Mapping[int, torch.Tensor] | None = None,
    progress: Callable[[str, float], None] | None = None,
) -> Stability:
    """Train with each seed, estimate the influence, and compare the top-k harmful sets.

    Args:
        graph: the audited graph.
        config: the settings of :class:`RetrainSettings` (model, training, lam, solver, non-i.i.d. term,
            min_group_size), e.g. the audit's; only the training seed varies.
        seeds: two or more distinct training seeds.
        k: the size of the top-k harmful set.
        known: every training node's ΔΓ already estimated for some seeds (the audit's own), reused for those
            seeds instead of retraining.
        progress: ``progress("stability", fraction)`` after each seed.

    Returns:
        The :class:`~bind_core.influence.records.Stability`: ``k``, ``seeds``, ``sets`` (seed as a string → the
        user's ids), ``pairwise`` (per pair of seeds: ``seeds``, ``intersection``, ``union``, ``jaccard``), ``all``
        and ``mean_pairwise_jaccard``.
    """
    seeds = [int(s) for s in seeds]
    if len(seeds) < 2 or len(set(seeds)) != len(seeds):
        raise ConfigError(f"stability seeds: {seeds!r} must be two or more distinct seeds")
    if k < 1:
        raise ConfigError(f"k: {k!r} must be >= 1")
    groups = groups_arg(graph, included_groups(graph, config.min_group_size))
    sets: dict[int, list[int | str]] = {}
    for i, seed in enumerate(seeds):
        if known is not None and seed in known:
            delta = known[seed]
        else:
            done = i / len(seeds)
            hold = None if progress is None else (lambda *_, d=done: progress("stability", d))
            model = train(graph, replace(config.training, seed=seed), config.model, device=device, progress=hold)
            arguments = InfluenceArguments(lam=config.lam, non_iid=config.non_iid, solver=config.solver)
            delta = estimate(model, graph, arguments, groups=groups, progress=hold).delta
        sets[seed] = topk_harmful(delta, graph, k)
        if progress is not None:
            progress("stability", (i + 1) / len(seeds))
    pairs = list(itertools.combinations(seeds, 2))
    overlaps = [_overlap([set(sets[a]), set(sets[b])]) for a, b in pairs]
    return Stability(
        k=k,
        seeds=seeds,
        sets={str(s): v for s, v in sets.items()},
        pairwise=[PairOverlap(seeds=[a, b], **vars(o)) for (a, b), o in zip(pairs, overlaps, strict=True)],
        all=_overlap([set(v) for v in sets.values()]),
        mean_pairwise_jaccard=sum(o.jaccard for o in overlaps) / len(overlaps),
    )
