"""What the audit's checks report, typed (part of :mod:`bind_core.pipeline.results`): estimated against actual ΔΓ
(:class:`Correlation`) and a selection against random deletions of the same size (:class:`AgainstRandom`), for nodes
and edges alike."""

# ruff: noqa: RUF009  (key() and open_keys() return dataclasses.field(...): fields with metadata, not shared defaults)
from __future__ import annotations

from dataclasses import dataclass

from bind_core.pipeline.result_codec import key


@dataclass(kw_only=True)
class Correlation:
    """Estimated against actual ΔΓ for one part of Γ."""

    pearson: float | None = key("number in [-1, 1] or null (undefined, e.g. constant values)")
    spearman: float | None = key("number in [-1, 1] or null")


@dataclass(kw_only=True)
class EffectSpread:
    """The change in Γ after retraining without the selected nodes, per seed."""

    effects: list[float] = key("numbers: Γ(retrained without the set) − Γ(retrained on the graph), per seed")
    mean: float = key("number: their mean")
    std: float = key("number: their standard deviation")


@dataclass(kw_only=True)
class RandomSet:
    """One random set of the same size."""

    effects: list[float] = key("numbers: its effect per seed")
    mean: float = key("number: their mean")


@dataclass(kw_only=True)
class RandomSpread:
    """The random sets' effects."""

    sets: list[RandomSet] = key("each random set")
    mean: float = key("number: mean of the sets' means")
    std: float = key("number: standard deviation of the sets' means")


@dataclass(kw_only=True)
class AgainstRandom:
    """The budget's selection against chance (:func:`bind_core.debiasing.chance.against_random`)."""

    size: int = key("integer: nodes in the selected set (and each random one)")
    seeds: list[int] = key("integers: the training seeds retrained with")
    noise_floor: float = key("number: standard deviation of Γ across seeds on the unchanged graph")
    noise_multiple: float = key("number: how many yardsticks a difference must exceed")
    selected: EffectSpread | None = key("the selected set's effects; null when nothing was selected")
    random: RandomSpread | None = key("the random sets' effects; null when nothing was selected")
    advantage: float | None = key("number or null: random mean − selected mean (positive: the selection does better)")
    yardstick: float | None = key("number: the larger of the noise floor and the random sets' spread", optional=True)
    beats_random: bool | None = key("boolean or null: advantage > noise_multiple × yardstick")
    reduces_bias: bool | None = key("boolean or null: the selected mean < −noise_multiple × noise floor")
    reason: str | None = key("string: why the numbers are null (nothing was selected)", optional=True)
    verdict: str = key("string: one sentence on what the comparison shows")
