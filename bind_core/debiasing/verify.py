"""Verify a what-if: delete a chosen set of training nodes, retrain over several seeds and measure what the estimate
(:mod:`bind_core.debiasing.what_if`) only predicted, judged against random sets of the same size.

For seeds ``s₁..s_k`` (at least 3) :func:`verify_set`

* retrains the model's architecture on the unchanged graph with every seed: ``Γ(G; s)``, ``Γ_SP(G; s)``,
  ``Γ_EO(G; s)`` (the baselines; their spread over the seeds is the noise floor);
* retrains without the set with every seed: the actual effect per seed, ``ΔΓ(s) = Γ(G − S; s) − Γ(G; s)`` (paired by
  seed), and the same for Γ_SP and Γ_EO, with their mean and spread;
* deletes ``random_sets`` random sets of the same size and retrains each with every seed
  (:func:`bind_core.debiasing.chance.against_random`), for the verdict against chance.

It retrains ``(2 + random_sets)·k`` times. The model retrained without the set with the first seed is handed back
(:attr:`VerifiedSet.retrained`), for whoever keeps the debiased weights.
"""

# ruff: noqa: RUF009  (key() returns dataclasses.field(...): fields with metadata, not shared defaults)
from __future__ import annotations

import dataclasses
import statistics
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from torch import Tensor

from bind_core.codec import key
from bind_core.data.graph import Graph
from bind_core.debiasing.chance import MIN_SEEDS, against_random
from bind_core.debiasing.records import AgainstRandom
from bind_core.debiasing.validation import gammas
from bind_core.errors import ConfigError
from bind_core.training.fit import TrainConfig, TrainedModel, train


@dataclass(frozen=True, kw_only=True)
class Spread:
    """An effect measured once per seed."""

    effects: list[float] = key("numbers: the effect per seed, in the seeds' order")
    mean: float = key("number: their mean")
    std: float = key("number: their standard deviation (0 for a single value)")

    @classmethod
    def of(cls, values: Sequence[float]) -> Spread:
        """The spread of ``values`` (at least one).

        Args:
            values: one effect per seed.

        Returns:
            The :class:`Spread`.
        """
        std = statistics.stdev(values) if len(values) > 1 else 0.0
        return cls(effects=[float(v) for v in values], mean=statistics.fmean(values), std=std)


@dataclass(frozen=True, kw_only=True)
class Chance:
    """The set's effect on Γ against random sets of its size (:func:`bind_core.debiasing.chance.against_random`)."""

    noise_floor: float = key("number: the standard deviation of Γ over the seeds on the unchanged graph")
    random_means: list[float] = key("numbers: each random set's mean ΔΓ")
    random_mean: float = key("number: their mean")
    random_std: float = key("number: their spread")
    advantage: float = key("number: random_mean − the set's mean ΔΓ (positive: the set reduced Γ more)")
    yardstick: float = key("number: the larger of the noise floor and random_std")
    beats_random: bool = key("boolean: the advantage exceeds twice the yardstick")
    reduces_bias: bool = key("boolean: the set's mean ΔΓ is below minus twice the noise floor")
    verdict: str = key("string: the judgement in one sentence")

    @classmethod
    def of(cls, found: AgainstRandom) -> Chance:
        """The part of :func:`~bind_core.debiasing.chance.against_random`'s answer a verification reports, for a
        non-empty set.

        Args:
            found: the comparison.

        Returns:
            The :class:`Chance`.

        Raises:
            ValueError: the comparison is of an empty set (its numbers are null).
        """
        rnd = found.random
        if rnd is None or found.advantage is None or found.yardstick is None:
            raise ValueError(f"an empty set has no comparison with chance: {found.reason}")
        return cls(
            noise_floor=found.noise_floor,
            random_means=[row.mean for row in rnd.sets],
            random_mean=rnd.mean,
            random_std=rnd.std,
            advantage=found.advantage,
            yardstick=found.yardstick,
            beats_random=bool(found.beats_random),
            reduces_bias=bool(found.reduces_bias),
            verdict=found.verdict,
        )


@dataclass(frozen=True, kw_only=True)
class Verification:
    """What deleting a set of training nodes and retraining did, over several seeds, against chance (the what-if
    job's stored result: :func:`bind_core.codec.encode` gives its JSON)."""

    size: int = key("integer: the number of deleted nodes")
    seeds: list[int] = key("integers: the training seeds")
    random_sets: int = key("integer: the random sets of the same size it was compared with")
    gamma_before: Spread = key("Γ on the unchanged graph, over the seeds")
    delta: Spread = key("the actual ΔΓ per seed (negative: deleting the set reduced bias)")
    delta_sp: Spread = key("the same for Γ_SP")
    delta_eo: Spread = key("the same for Γ_EO")
    chance: Chance = key("the judgement against random sets")


@dataclass(frozen=True)
class VerifiedSet:
    """What :func:`verify_set` hands back: the :class:`Verification` and the model retrained without the set with
    the first seed (for whoever keeps the debiased weights; no part of the JSON).

    Attributes:
        verification: the measured effects and the judgement against chance.
        retrained: the first seed's model retrained without the set.
    """

    verification: Verification
    retrained: TrainedModel | None = field(default=None, compare=False, repr=False)


@dataclass
class _Counter:
    """Progress over ``total`` retrainings (``done`` so far); ``progress(fraction)`` may raise to abort."""

    progress: Callable[[float], None] | None
    total: int
    done: int = 0

    def training(self) -> Callable[[str, float], None] | None:
        """A retraining's progress callback, within the current retraining."""
        progress, done, total = self.progress, self.done, self.total
        return None if progress is None else (lambda _s, f: progress((done + f) / total))

    def rest(self) -> Callable[[float], None] | None:
        """The progress of the retrainings left, as one callback (``rest(fraction)`` of them done)."""
        progress, done, total = self.progress, self.done, self.total
        return None if progress is None else (lambda f: progress((done + f * (total - done)) / total))

    def step(self, count: int = 1) -> None:
        """``count`` retrainings done."""
        self.done += count
        if self.progress is not None:
            self.progress(self.done / self.total)


def _measure(
    model: TrainedModel,
    graph: Graph,
    seed: int,
    retrain: TrainConfig | None,
    counter: _Counter,
    groups: list[int] | None,
) -> tuple[TrainedModel, float, float]:
    """Retrain on ``graph`` with ``seed``; the model and its ``(Γ_SP, Γ_EO)``."""
    config = dataclasses.replace(retrain or model.train_config, seed=seed)
    trained = train(graph, config, model.model_config, device=model.device, progress=counter.training())
    counter.step()
    sp, eo = gammas(trained, graph, groups)
    return trained, sp, eo


def _without(
    model: TrainedModel,
    reduced: Graph,
    before: dict[int, tuple[float, float]],
    retrain: TrainConfig | None,
    counter: _Counter,
    groups: list[int] | None,
) -> tuple[TrainedModel | None, list[float], list[float]]:
    """Retrain on ``reduced`` with every seed of ``before`` (the seed's ``(Γ_SP, Γ_EO)`` on the unchanged graph): the
    first seed's model and the effects on Γ_SP and Γ_EO, per seed."""
    sp_effects, eo_effects, first = [], [], None
    for s, (sp0, eo0) in before.items():
        trained, sp, eo = _measure(model, reduced, s, retrain, counter, groups)
        first = trained if first is None else first
        sp_effects.append(sp - sp0)
        eo_effects.append(eo - eo0)
    return first, sp_effects, eo_effects


def _check(graph: Graph, positions: Sequence[int], seeds: Sequence[int], random_sets: int) -> None:
    """Refuse an empty set, repeats, positions outside the training set, too few seeds, or no random set."""
    n = int(graph.train_idx.numel())
    if not positions:
        raise ConfigError("positions: the set is empty")
    if len(set(positions)) != len(positions) or any(not 0 <= int(p) < n for p in positions):
        raise ConfigError(f"positions: must be distinct places in the {n} training nodes")
    if len(seeds) < MIN_SEEDS or len(set(seeds)) != len(seeds):
        raise ConfigError(f"seeds: {list(seeds)!r} must be at least {MIN_SEEDS} distinct training seeds")
    if random_sets < 1:
        raise ConfigError(f"random_sets: {random_sets!r} must be >= 1")


def verify_set(
    model: TrainedModel,
    graph: Graph,
    positions: Sequence[int],
    *,
    seeds: Sequence[int],
    random_sets: int = 3,
    lam: float = 0.5,
    groups: list[int] | None = None,
    retrain: TrainConfig | None = None,
    progress: Callable[[float], None] | None = None,
) -> VerifiedSet:
    """Delete the training nodes at ``positions``, retrain with every seed and compare (see the module docstring).

    Args:
        model: the audited model; its architecture and (without ``retrain``) its settings are retrained.
        graph: the graph it was trained on.
        positions: the deleted nodes, as places in ``graph.train_idx`` (an audit's influence rows' positions).
        seeds: at least 3 distinct training seeds.
        random_sets: random sets of the same size, each retrained with every seed.
        lam: Γ = lam·Γ_SP + (1 − lam)·Γ_EO.
        groups: the groups the fairness metrics compare (default: all).
        retrain: the retrainings' settings (default: the model's own).
        progress: ``progress(fraction)`` as the retrainings advance; may raise to abort.

    Returns:
        The :class:`VerifiedSet`: the :class:`Verification`, and the model retrained without the set with the
            first seed.

    Raises:
        ConfigError: an empty set, repeated or out-of-range positions, fewer than 3 distinct seeds, no random set,
            or a set larger than the training set can supply random sets for.
    """
    _check(graph, positions, seeds, random_sets)
    counter = _Counter(progress, (2 + random_sets) * len(seeds))
    before = {int(s): _measure(model, graph, int(s), retrain, counter, groups)[1:] for s in seeds}
    nodes = graph.train_idx[list(positions)]
    first, sp_effects, eo_effects = _without(model, graph.without_nodes(nodes)[0], before, retrain, counter, groups)
    effects = [lam * sp + (1 - lam) * eo for sp, eo in zip(sp_effects, eo_effects, strict=True)]
    baselines = {s: lam * sp + (1 - lam) * eo for s, (sp, eo) in before.items()}
    chance = _against_chance(model, graph, nodes, baselines, effects, counter, random_sets, lam, groups, retrain)
    verification = Verification(
        size=len(positions),
        seeds=[int(s) for s in seeds],
        random_sets=random_sets,
        gamma_before=Spread.of(list(baselines.values())),
        delta=Spread.of(effects),
        delta_sp=Spread.of(sp_effects),
        delta_eo=Spread.of(eo_effects),
        chance=chance,
    )
    return VerifiedSet(verification, retrained=first)


def _against_chance(
    model: TrainedModel,
    graph: Graph,
    nodes: Tensor,
    baselines: dict[int, float],
    effects: list[float],
    counter: _Counter,
    random_sets: int,
    lam: float,
    groups: list[int] | None,
    retrain: TrainConfig | None,
) -> Chance:
    """The set (its ``effects`` per seed, already measured) against ``random_sets`` random sets of its size
    (:func:`~bind_core.debiasing.chance.against_random`), the progress continuing ``counter``'s."""
    found = against_random(
        model,
        graph,
        nodes,
        baselines,
        random_sets=random_sets,
        lam=lam,
        groups=groups,
        progress=counter.rest(),
        retrain=retrain,
        chosen=effects,
    )
    return Chance.of(found)
