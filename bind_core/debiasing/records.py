"""What debiasing and the self-check report, typed: one row per budget with its retraining recipe, and the
estimates against retraining (collected in :mod:`bind_core.pipeline.results`)."""

# ruff: noqa: RUF009  (key() and open_keys() return dataclasses.field(...): fields with metadata, not shared defaults)
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from bind_core.codec import key, open_keys
from bind_core.fairness.records import Intervals, MetricValues


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


@dataclass(kw_only=True)
class DebiasingRow:
    """One budget: delete the most harmful training nodes, retrain, compare
    (:func:`bind_core.debiasing.debias.debias`).

    Attributes:
        budget: the budget asked for, a fraction (< 1) or a count (>= 1) of training nodes
        requested: nodes the budget asks for
        deleted: nodes deleted
        nodes: the deleted nodes' ids, each the user's id (graph.node_id_meaning says what it is)
        estimated_delta: the estimated ΔΓ of deleting them
        caveat: why the estimate cannot be taken at its word (it lowers Γ by more than Γ itself); present only then
        selection: top_ranked (a step estimate's sets) or non_overlapping (the paper's rule)
        utility_aware: whether nodes estimated to raise the validation loss were kept
        estimated_utility: the estimated change in validation loss (utility-aware only)
        before: the test metrics before
        after: the test metrics after retraining without the nodes
        backfired: the bias metrics (delta_sp, delta_eo, gamma) that rose after the deletion, so the budget
            backfired on them; empty when none rose; absent in audits from before it was recorded
        against_random: the check against chance; null unless debias_seeds were given
        seconds: seconds the budget took
        retrain: how every retraining of the row trained: audit (the model's recipe, ``recipe``: Adam, then the
            polish where it has it; before is the audited model where the polish makes every seed reach it) or adam
            (Adam alone, as a user trains; before is the unchanged graph retrained so too); absent in audits from
            before the setting
        chance_rule: whether the check against chance ran by default and why (the audit's chance_seconds rule);
            absent where the seeds were given or the rule is off
        recipe: the training every retraining of the row used (a supplied model's: its config's training section);
            absent in audits from before it was recorded
        change: after − before per metric with its paired bootstrap interval over the test nodes; absent without
            the bootstrap
        within_noise: of backfired, the metrics whose rise lies inside the test nodes' sampling noise (their change's
            interval reaches 0): not a clear backfire; absent without the bootstrap
    """

    budget: float = key("number: the budget asked for, a fraction (< 1) or a count (>= 1) of training nodes")
    requested: int = key("integer: nodes the budget asks for")
    deleted: int = key("integer: nodes deleted")
    nodes: list[int | str] = key(
        "integers or strings: the deleted nodes' ids, each the user's id (graph.node_id_meaning says what it is)"
    )
    estimated_delta: float | None = key(
        "number: the estimated ΔΓ of deleting them; null where the set's own estimate has no minimum near the given "
        "weights (the caveat says so)"
    )
    caveat: str | None = key(
        "string: why the estimate cannot be taken at its word (it lowers Γ by more than Γ itself, or there is none); "
        "present only then",
        optional=True,
    )
    selection: str = key("string: top_ranked (a step estimate's sets) or non_overlapping (the paper's rule)")
    utility_aware: bool = key("boolean: whether nodes estimated to raise the validation loss were kept")
    estimated_utility: float | None = key(
        "number: the estimated change in validation loss (utility-aware only)", optional=True
    )
    before: MetricValues = key("the test metrics before")
    after: MetricValues = key("the test metrics after retraining without the nodes")
    backfired: list[str] | None = key(
        "strings: the bias metrics (delta_sp, delta_eo, gamma) that rose after the deletion, so the budget backfired "
        "on them; empty when none rose; absent in audits from before it was recorded",
        optional=True,
    )
    against_random: AgainstRandom | None = key("the check against chance; null unless debias_seeds were given")
    seconds: float = key("number: seconds the budget took")
    retrain: str | None = key(
        "string: how every retraining of the row trained: audit (the model's recipe, see recipe: Adam, then the "
        "polish where it has it; before is the audited model where the polish makes every seed reach it) or adam "
        "(Adam alone, as a user trains; before is the unchanged graph retrained so too); absent in audits from "
        "before the setting",
        optional=True,
    )
    chance_rule: str | None = key(
        "string: whether the check against chance ran by default and why (the audit's chance_seconds rule); absent "
        "where the seeds were given or the rule is off",
        optional=True,
    )
    recipe: RetrainRecipe | None = key(
        "the training every retraining of the row used (a supplied model's: its config's training section); absent in "
        "audits from before it was recorded",
        optional=True,
    )
    change: Intervals | None = key(
        "after − before per metric (estimate) with its paired percentile bootstrap interval over the test nodes: each "
        "resample draws the same nodes for both models, so an interval that excludes 0 says the change is not an "
        "artefact of which nodes were tested (it says nothing of retraining's own noise: against_random does); absent "
        "without the bootstrap (bootstrap: 0) and in audits from before it was recorded",
        optional=True,
    )
    within_noise: list[str] | None = key(
        "strings: of backfired, the metrics whose rise lies inside the test nodes' sampling noise (the change's "
        "paired interval reaches 0, so the rise may be an artefact of which nodes were tested): not a clear backfire; "
        "empty when every rise is clear; absent without the bootstrap and in audits from before it was recorded",
        optional=True,
    )

    def clear_rises(self) -> list[str]:
        """The bias metrics the deletion raised clear of the test nodes' sampling noise.

        Returns:
            ``backfired`` less ``within_noise``: every one that rose, where there is no interval to tell.
        """
        inside = set(self.within_noise or ())
        return [name for name in self.backfired or () if name not in inside]


@dataclass(kw_only=True)
class RetrainRecipe:
    """How the debiasing retrained (:class:`bind_core.training.fit.TrainConfig`): from scratch, with each seed."""

    optimizer: str = key("string: adam or sgd")
    lr: float = key("number: learning rate")
    weight_decay: float = key("number: the L2 coefficient λ of the objective")
    epochs: int = key("integer: epochs at most")
    patience: int = key("integer: early stopping after this many epochs without a better validation loss (0: off)")
    keep: str = key("string: best_val (the epoch of the lowest validation loss) or last")
    polish: bool = key("boolean: whether a float64 L-BFGS polish to a stationary point followed")
    extra: dict[str, Any] = open_keys("the recipe's other settings (seed, momentum, mini-batches)")


@dataclass(kw_only=True)
class ValidationPoint:
    """One checked set of nodes."""

    nodes: list[int] = key("integers: the nodes deleted, as indices into the graph (0-based; node_ids: the user's)")
    estimated: list[float] | None = key(
        "numbers: estimated change of [Γ, Γ_SP, Γ_EO]; null where there is none (a set whose deletion has no "
        "minimum near the given weights), left out of the correlations"
    )
    actual: list[float] | None = key(
        "numbers: the change after re-optimising without them, same order; null where the re-optimisation found no "
        "finite optimum (see undefined_truth)"
    )
    node_ids: list[int | str] | None = key(
        "integers or strings: the same nodes by the user's ids (graph.node_id_meaning says what they are); absent in "
        "audits stored before they were written",
        optional=True,
    )


@dataclass(kw_only=True)
class UndefinedTruth:
    """The checked deletions without a ground truth: their re-optimisation found no minimum near the given weights."""

    count: int = key("integer: deletions without a ground truth")
    nodes: list[list[int]] = key("lists of integers: the nodes of each, as indices into the graph (0-based)")
    reason: str = key("string: why (they are left out of the correlations)")
    node_ids: list[list[int | str]] | None = key(
        "lists of integers or strings: the same nodes by the user's ids; absent in audits stored before they were "
        "written",
        optional=True,
    )


@dataclass(kw_only=True)
class Validation:
    """The self-check: estimates against re-optimisation (:class:`bind_core.debiasing.validation.Validation`)."""

    protocol: str = key("string: how the nodes were chosen (sample)")
    mode: str = key("string: the ground truth re-optimised against")
    count: int = key("integer: sets checked")
    pearson: float | None = key("number or null: Pearson correlation for Γ")
    spearman: float | None = key("number or null: Spearman correlation for Γ")
    correlations: dict[str, Correlation] = key("object, gamma / gamma_sp / gamma_eo → its correlations")
    points: list[ValidationPoint] = key("every checked set")
    seconds: float = key("number: seconds the check took")
    noise_floor: float | None = key("number: the size of change the re-optimisation cannot resolve", optional=True)
    clear_of_noise: float | None = key("number in [0, 1]: share of sets whose change exceeds it", optional=True)
    noise_floor_reason: str | None = key(
        "string: why there is no noise floor (the ground truth's retraining has no deterministic drift)", optional=True
    )
    undefined_truth: UndefinedTruth | None = key(
        "the deletions without a ground truth; absent when every one has one", optional=True
    )
    extra: dict[str, Any] = open_keys("the check's other figures")
