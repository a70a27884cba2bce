"""Does deleting the selected nodes help more than deleting any nodes? Debiasing checked against chance.

Retraining from scratch is noisy: on the unchanged graph, Γ moves between training seeds (a two-layer GCN on
``synthetic(3000)``: standard deviation 0.0055), and deleting a few percent of the training nodes *at random* moves
Γ too. A debiasing effect means something only against both. For one deleted set ``S`` and training seeds
``s₁..s_k`` (at least 3), :func:`against_random`

* retrains on the unchanged graph with every seed: ``Γ(G; s)``, whose standard deviation over the seeds is the
  **noise floor** (computed once per audit, :func:`seed_baselines`);
* retrains without ``S`` with every seed: the effect ``ΔΓ_S(s) = Γ(G − S; s) − Γ(G; s)`` (paired by seed, so the
  seed's own offset cancels), and its mean and spread;
* does the same for ``random_sets`` sets of the same size drawn uniformly from the training nodes;
* reports the **advantage** ``mean ΔΓ_random − mean ΔΓ_S`` (positive: the selection reduced Γ more) and
  ``beats_random`` when the advantage exceeds twice the **yardstick**, the larger of the noise floor and the spread
  (standard deviation) of the random sets' mean effects: random deletions differ from each other even where
  retraining is deterministic (a polished one-layer GCN reaches the same optimum from every seed, noise floor
  ~1e-8, while two random sets of 30 nodes moved Γ by +0.042 and −0.007), so beating the seed noise alone would
  call a lucky random pick a win. ``reduces_bias`` says whether the selected set's mean effect is below minus
  twice the noise floor at all.

The verdict is a sentence a reader can act on; an effect inside the noise is said to be so, never a win.
"""

from __future__ import annotations

import dataclasses
import statistics
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import torch
from torch import Tensor

from bind_core.data.graph import Graph
from bind_core.debiasing.records import AgainstRandom, EffectSpread, RandomSet, RandomSpread
from bind_core.debiasing.validation import gammas_of
from bind_core.errors import ConfigError
from bind_core.forks import each_self_seeded
from bind_core.training.fit import TrainConfig, TrainedModel, train

MIN_SEEDS = 3
NOISE_MULTIPLE = 2.0
"""An effect or an advantage counts when it exceeds this many noise floors."""


def _gamma(model: TrainedModel, graph: Graph, lam: float, groups: list[int] | None) -> float:
    return _gamma_and_proba(model, graph, lam, groups)[0]


def _gamma_and_proba(model: TrainedModel, graph: Graph, lam: float, groups: list[int] | None) -> tuple[float, Tensor]:
    """Γ on ``graph``'s test nodes and the class probabilities it is read from (``[k, C]``, float64)."""
    proba = model.predict_proba(graph, graph.test_idx).double()
    sp, eo = gammas_of(proba, graph, groups)
    return lam * sp + (1 - lam) * eo, proba


def _retrain(
    model: TrainedModel,
    graph: Graph,
    seed: int,
    hold: Callable[[], None] | None = None,
    retrain: TrainConfig | None = None,
) -> TrainedModel:
    """Retrain with ``seed`` (and the settings ``retrain``, default the model's own); ``hold()`` is called at every
    progress report of the training (it may raise)."""
    config = dataclasses.replace(retrain or model.train_config, seed=seed)
    report = None if hold is None else (lambda _stage, _fraction: hold())
    return train(graph, config, model.model_config, device=model.device, progress=report)


def seed_baselines(
    model: TrainedModel,
    graph: Graph,
    seeds: Sequence[int],
    *,
    lam: float = 0.5,
    groups: list[int] | None = None,
    hold: Callable[[], None] | None = None,
    retrain: TrainConfig | None = None,
    processes: int = 1,
) -> dict[int, float]:
    """``Γ(G; s)`` of the model's architecture and settings retrained from scratch with each seed (``hold()``:
    called while they train, may raise to abort; ``retrain``: other training settings than the model's, e.g.
    without the polish, to ask what a model trained as its user trains it does; ``processes``: forked processes
    retraining at once, :func:`~bind_core.forks.each_self_seeded`: the same values)."""
    runs = seed_runs(model, graph, seeds, lam=lam, groups=groups, hold=hold, retrain=retrain, processes=processes)
    return {seed: gamma for seed, (gamma, _) in runs.items()}


def seed_runs(
    model: TrainedModel,
    graph: Graph,
    seeds: Sequence[int],
    *,
    lam: float = 0.5,
    groups: list[int] | None = None,
    hold: Callable[[], None] | None = None,
    retrain: TrainConfig | None = None,
    processes: int = 1,
) -> dict[int, tuple[float, Tensor]]:
    """:func:`seed_baselines` with each retrained model's test-node class probabilities beside its Γ (``{seed: (Γ,
    [k, C] float64)}``), for a paired interval of a change over the test nodes
    (:func:`~bind_core.fairness.bootstrap.mean_paired_change`)."""
    if len(seeds) < MIN_SEEDS or len(set(seeds)) != len(seeds):
        raise ConfigError(f"seeds: {list(seeds)!r} must be at least {MIN_SEEDS} distinct training seeds")
    found: list[tuple[float, Tensor]] = []

    def work(seed: int, here: Callable[[], None] | None) -> tuple[float, Tensor]:
        return _gamma_and_proba(_retrain(model, graph, seed, here, retrain), graph, lam, groups)

    def put(_: int, run: tuple[float, Tensor]) -> None:
        found.append(run)
        if hold is not None:
            hold()

    each_self_seeded([int(s) for s in seeds], work, put, processes=processes, hold=hold)
    return dict(zip([int(s) for s in seeds], found, strict=True))


def _spread(values: Sequence[float]) -> tuple[float, float]:
    """The mean and the standard deviation (0 for one value)."""
    return statistics.fmean(values), statistics.stdev(values) if len(values) > 1 else 0.0


def against_random(
    model: TrainedModel,
    graph: Graph,
    selected: Tensor,
    baselines: dict[int, float],
    *,
    random_sets: int = 3,
    lam: float = 0.5,
    groups: list[int] | None = None,
    seed: int = 0,
    progress: Callable[[float], None] | None = None,
    retrain: TrainConfig | None = None,
    chosen: Sequence[float] | None = None,
    processes: int = 1,
) -> AgainstRandom:
    """The selected set's effect on Γ against random sets of the same size (see the module docstring).

    Args:
        selected: the deleted nodes (indices into ``graph``).
        baselines: :func:`seed_baselines` of the same model and graph (its keys are the seeds).
        random_sets: random sets drawn (at least 1), each retrained with every seed.
        seed: seeds the draw of the random sets (uniformly from the training nodes).
        progress: ``progress(fraction)`` after each retraining; may raise to abort.
        retrain: the retrainings' settings (default: the model's); use the same as for ``baselines``.
        chosen: the selected set's effects per seed (in ``baselines``' order) where the caller has already
            retrained without it (:func:`bind_core.debiasing.verify.verify_set`); ``None``: retrained here.
        processes: forked processes retraining at once where it is safe (:func:`~bind_core.forks.each_self_seeded`;
            the values do not depend on it); progress then advances per retraining.

    Returns:
        The :class:`~bind_core.debiasing.records.AgainstRandom`: ``size``, ``seeds``, ``noise_floor``, ``selected``
        (``effects`` per seed, ``mean``, ``std``), ``random`` (``sets``: each ``effects``, ``mean``; ``mean`` and
        ``std`` of the set means), ``advantage``, ``yardstick``, ``beats_random``, ``reduces_bias`` and ``verdict``;
        ``None`` values with a ``reason`` for an empty set.
    """
    return against_random_sets(
        model,
        selected,
        graph.train_idx,
        lambda nodes: graph.without_nodes(nodes)[0],
        baselines,
        random_sets=random_sets,
        lam=lam,
        groups=groups,
        seed=seed,
        progress=progress,
        retrain=retrain,
        empty_reason="no node was selected for this budget",
        chosen=chosen,
        processes=processes,
    )


def against_random_sets(
    model: TrainedModel,
    selected: Tensor,
    pool: Tensor,
    delete: Callable[[Tensor], Graph],
    baselines: dict[int, float],
    *,
    random_sets: int = 3,
    lam: float = 0.5,
    groups: list[int] | None = None,
    seed: int = 0,
    progress: Callable[[float], None] | None = None,
    retrain: TrainConfig | None = None,
    empty_reason: str = "nothing was selected",
    items: str = "nodes",
    chosen: Sequence[float] | None = None,
    processes: int = 1,
    on_selected: Callable[[int, Tensor], None] | None = None,
) -> AgainstRandom:
    """:func:`against_random` for any kind of deleted item: ``selected`` (rows: nodes ``[k]`` or edges ``[k, 2]``)
    against ``random_sets`` sets of ``len(selected)`` rows drawn uniformly from ``pool`` (the items the selection
    chose from), each deleted by ``delete(rows) → the reduced graph`` and retrained with every seed of
    ``baselines``. Same result as :func:`against_random`; ``items`` names them in the verdict; ``chosen``: the
    selected set's effects per seed when the caller already has them (the selected set is then not retrained);
    ``processes``: forked processes retraining at once (:func:`~bind_core.forks.each_self_seeded`); ``on_selected(seed,
    proba)``: handed each model retrained without the selected set, its test nodes' class probabilities (``[k, C]``,
    float64; not with ``chosen``)."""
    if random_sets < 1:
        raise ConfigError(f"random_sets: {random_sets!r} must be >= 1")
    seeds = list(baselines)
    noise = statistics.stdev(baselines.values())
    size = int(selected.shape[0])
    if size == 0:
        return _nothing_deleted(seeds, noise, empty_reason)
    if size > int(pool.shape[0]):
        raise ConfigError(f"selected: {size} items, more than the {int(pool.shape[0])} random sets are drawn from")
    gen = torch.Generator().manual_seed(seed)
    picks = [pool[torch.randperm(int(pool.shape[0]), generator=gen)[:size]] for _ in range(random_sets)]
    keep = on_selected if chosen is None else None
    retrainings = _Retrainings(model, delete, baselines, lam, groups, retrain, progress, keep)
    effects = retrainings.effects(picks if chosen is not None else [selected, *picks], processes)
    effects_chosen = [float(e) for e in chosen] if chosen is not None else effects.pop(0)
    rows = [RandomSet(effects=e, mean=statistics.fmean(e)) for e in effects]
    return _judged(seeds, size, effects_chosen, rows, noise, items)


def _nothing_deleted(seeds: list[int], noise: float, reason: str) -> AgainstRandom:
    """:func:`against_random_sets`'s comparison when nothing was selected: ``None`` values and the ``reason``."""
    return AgainstRandom(
        size=0,
        seeds=seeds,
        noise_floor=noise,
        noise_multiple=NOISE_MULTIPLE,
        selected=None,
        random=None,
        advantage=None,
        beats_random=None,
        reduces_bias=None,
        reason=reason,
        verdict="nothing was deleted",
    )


@dataclass
class _Retrainings:
    """The retrainings of :func:`against_random_sets`: each deleted set retrained with every seed of ``baselines``,
    with the progress over all of them."""

    model: TrainedModel
    delete: Callable[[Tensor], Graph]
    baselines: dict[int, float]
    lam: float
    groups: list[int] | None
    retrain: TrainConfig | None
    progress: Callable[[float], None] | None
    on_first: Callable[[int, Tensor], None] | None = None
    """Handed the first set's retrained models' test probabilities, per seed (``on_selected``)."""

    def effects(self, sets: list[Tensor], processes: int) -> list[list[float]]:
        """Per set, the effect ``Γ(G − S; s) − Γ(G; s)`` of deleting it, per seed: one retraining per (set, seed), in
        ``processes`` forked processes at once where it is safe (:func:`~bind_core.forks.each_self_seeded`)."""
        seeds = list(self.baselines)
        jobs = [(k, s) for k in range(len(sets)) for s in seeds]
        reduced: dict[int, Graph] = {}  # the last set's reduced graph, made once for its seeds (in each process)
        found: list[float] = []
        on_first = self.on_first

        def work(job: tuple[int, int], hold: Callable[[], None] | None) -> tuple[float, Tensor | None]:
            k, seed = job
            if k not in reduced:
                reduced.clear()
                reduced[k] = self.delete(sets[k])
            graph = reduced[k]
            trained = _retrain(self.model, graph, seed, hold, self.retrain)
            if k == 0 and on_first is not None:
                gamma, proba = _gamma_and_proba(trained, graph, self.lam, self.groups)
                return gamma - self.baselines[seed], proba
            return _gamma(trained, graph, self.lam, self.groups) - self.baselines[seed], None

        def put(index: int, done: tuple[float, Tensor | None]) -> None:
            effect, proba = done
            found.append(effect)
            if proba is not None and on_first is not None:
                on_first(jobs[index][1], proba)
            self._hold(len(found), len(jobs))

        each_self_seeded(jobs, work, put, processes=processes, hold=lambda: self._hold(len(found), len(jobs)))
        return [found[k * len(seeds) : (k + 1) * len(seeds)] for k in range(len(sets))]

    def _hold(self, done: int, total: int) -> None:
        if self.progress is not None:
            self.progress(done / total)


def _judged(
    seeds: list[int], size: int, chosen: list[float], rows: list[RandomSet], noise: float, items: str
) -> AgainstRandom:
    """The selected set's effects (``chosen``, per seed) against the random sets' (``rows``): the advantage, the
    yardstick, the two judgements and the verdict (see the module docstring)."""
    random_means = [row.mean for row in rows]
    sel_mean, sel_std = _spread(chosen)
    rnd_mean, rnd_std = _spread(random_means)
    advantage = rnd_mean - sel_mean
    yardstick = max(noise, rnd_std)
    beats = advantage > NOISE_MULTIPLE * yardstick
    reduces = sel_mean < -NOISE_MULTIPLE * noise
    increases = sel_mean > NOISE_MULTIPLE * yardstick
    return AgainstRandom(
        size=size,
        seeds=seeds,
        noise_floor=noise,
        noise_multiple=NOISE_MULTIPLE,
        selected=EffectSpread(effects=chosen, mean=sel_mean, std=sel_std),
        random=RandomSpread(sets=rows, mean=rnd_mean, std=rnd_std),
        advantage=advantage,
        yardstick=yardstick,
        beats_random=beats,
        reduces_bias=reduces,
        verdict=verdict(sel_mean, rnd_mean, yardstick, beats=beats, reduces=reduces, items=items, increases=increases),
    )


def verdict(
    selected: float,
    random: float,
    noise: float,
    *,
    beats: bool,
    reduces: bool,
    items: str = "nodes",
    increases: bool = False,
) -> str:
    """One sentence on what the comparison shows (see :func:`against_random`; ``noise`` is the yardstick;
    ``items``: what was deleted, ``nodes`` or ``edges``; ``increases``: the selected set's own effect is a rise of
    Γ beyond twice the yardstick, which must not read as "no effect")."""
    k = NOISE_MULTIPLE
    figures = f"mean ΔΓ {selected:+.4f} for the selected {items}, {random:+.4f} for random ones, noise {noise:.4f}"
    if beats and reduces:
        return (
            f"deleting the selected {items} reduces bias more than deleting random {items}, beyond {k:g}× the noise "
            f"({figures})"
        )
    if beats:
        return (
            f"the selected {items} do better than random ones by more than {k:g}× the noise, but their own effect "
            f"is not clearly a reduction ({figures})"
        )
    if increases:
        return (
            f"deleting the selected {items} increases bias, beyond {k:g}× the noise: for a set this large the "
            f"estimates do not hold; a smaller budget may ({figures})"
        )
    if reduces:
        return (
            f"deleting the selected {items} reduces bias, but not clearly more than deleting as many random {items} "
            f"({figures})"
        )
    return f"no effect beyond the noise of retraining: the selection does not clearly beat random deletion ({figures})"
