"""The audit's settings: :class:`AuditConfig` and the stages it names. Below every other pipeline module (it imports
only the settings of the model, the training and the influence estimate), so that the stages, the cost estimate and
the lower layers' callers can all be typed against it."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

from bind_core.codec import Encoded
from bind_core.errors import ConfigError
from bind_core.influence.arguments import METHODS, SOLVERS, InfluenceArguments, Method, Solver
from bind_core.models.gnn import ModelConfig
from bind_core.training.fit import TrainConfig
from bind_core.training.sampling import SAMPLED_ARCHS, normalise_fan_out
from bind_core.training.supplied import REFERENCES

STAGES = ("training", "metrics", "influence", "debiasing", "validation")
"""The audit's stages in the order they run (:func:`bind_core.pipeline.stages.planned_stages` says which run)."""
DEBIAS_RETRAIN = ("audit", "adam")
"""How the debiasing stage retrains (:attr:`AuditConfig.debias_retrain`)."""
MAX_REFINE_STEPS = 10_000


@dataclass(frozen=True)
class AuditConfig(Encoded):
    """Everything an audit needs; the defaults are the paper's settings.

    Args:
        model: architecture (paper: one-layer GCN, 16 hidden).
        training: optimisation (paper: 1000 Adam epochs, lr 1e-3, weight decay 1e-4, seed 10), then polish.
        lam: Γ = lam·Γ_SP + (1 − lam)·Γ_EO.
        solver: inverse-Hessian solver: ``auto`` (by size), ``exact``, ``cg``, ``lissa`` or ``lanczos``
            (:data:`~bind_core.influence.arguments.SOLVERS`; :class:`~bind_core.influence.arguments.InfluenceArguments`
            says what each does).
        non_iid: include BIND's non-i.i.d. term.
        budgets: debiasing budgets, fractions (< 1) or counts (>= 1) of the training set.
        validation_sample: training nodes whose estimate is checked against re-optimisation; 0 skips.
        stages: the stages to run, a subset of :data:`STAGES` (training always runs unless a model is given).
        bootstrap: resamples for the metrics' percentile confidence intervals (Γ_SP has none for more than
            two classes, see :mod:`bind_core.fairness.bootstrap`); 0 skips.
        level: the intervals' coverage.
        min_group_size: groups with fewer test nodes are reported (breakdown, warning) but kept out of every
            fairness metric, Γ and the influence objective; 0 keeps every group.
        stability_seeds: retrain with each of these training seeds and report the overlap of the top-k
            harmful sets (:func:`bind_core.influence.stability.topk_stability`); empty skips (it retrains).
        stability_k: the k of that top-k set.
        debias_utility: debias only with harmful nodes whose deletion is not estimated to raise the validation
            loss (:mod:`bind_core.influence.utility`); off by default (the paper's BIND).
        refine_steps: 0 (default) keeps the influence function's estimates; ``n > 0`` refines every training
            node's estimate by re-optimising its deletion approximately, with up to ``n`` trust-region steps on
            the Hessian at the trained weights (:mod:`bind_core.influence.refinement`; needs at most 5000
            parameters). For models where one Newton step is not enough (a one-layer GIN); slower.
        estimator: ``"linear"`` (the paper's influence function), ``"step"`` (damped Newton steps per node with Γ
            exact there, answering the proximal response; :mod:`bind_core.influence.step`) or ``"auto"``
            (default: ``"step"`` for multi-layer and attention models up to 5000 parameters, and for one-layer
            models whose weights are not stationary). With ``"step"`` the
            self-check compares against the proximal re-optimisation, otherwise against unconstrained
            re-optimisation.
        debias_seeds: check each debiasing budget against chance (:mod:`bind_core.debiasing.chance`): retrain with each
            of these training seeds (3 or more) the unchanged graph (the noise floor), the graph without the selected
            set, and without ``debias_random_sets`` random sets of its size; empty (default) skips (it retrains
            ``(2 + debias_random_sets)·seeds`` times per budget).
        debias_random_sets: random sets per budget for that check.
        chance_seconds: without ``debias_seeds``, run that check anyway, with the seeds :data:`AUTO_CHANCE_SEEDS`,
            when it is cheap: when its retrainings (:func:`chance_retrains`) times the audited model's own training
            seconds come to at most this many seconds; 0 (default) never (``bind-audit run`` passes 60).
        debias_retrain: how every retraining of the debiasing stage trains (the after-deletion retrain of each
            budget, the chance check's seed baselines and random sets, the edge debiasing's retrains).
            ``"audit"`` (default): as the audited model was trained, with its own settings (Adam, then the polish
            to a stationary point where the recipe has it: a one-layer model the audit trains, not a deeper one or
            a supplied model). ``"adam"``: the model's settings without the polish (Adam alone, keeping its
            best validation epoch, as a user trains); the rows' ``before`` is then the unchanged graph retrained
            the same way with the model's seed, so before and after compare like with like. For multi-layer models,
            where the polish costs minutes per retraining and polished models from different seeds land in
            different minima (seed noise that swamps the check against chance); each row's ``retrain`` says which.
        edges: after the node estimate, also attribute the bias to every undirected edge (ΔΓ of deleting it,
            :func:`bind_core.influence.edges.estimate_edges`, reusing the node estimate's solve); the result's
            ``edges``. One-layer GCN, GIN and SAGE only (otherwise the section says why it is empty). Off by default:
            its cost grows with the sum of squared degrees (about 1.1× the node estimate's time on Income, 10× on
            Recidivism; docs/RESULTS.md).
        edge_budgets: with ``edges``, ``debias_seeds`` and the debiasing stage, delete the most harmful edges for
            each budget (a fraction in (0, 1] of the edges whose deletion changes something), retrain with every
            debias seed and compare with random edges (:func:`bind_core.debiasing.edge_debias.debias_edges`; the
            ``edges`` section's ``debiasing``). Small by default: at 5-10% the summed estimates exceed Γ and the
            deletion raised bias on Income and Recidivism (docs/RESULTS.md).
        edge_validation_sample: with ``edges`` attributed and the validation stage running, also check this many
            edge estimates, drawn at random among the edges whose deletion changes something, against deleting the
            edge and re-optimising (:func:`bind_core.debiasing.edge_validation.validate_edges`; the ``edges``
            section's ``validation``); 0 skips.
        reference: for a supplied model, which model the audit describes (:data:`REFERENCES`): ``"as_given"``
            (default) the supplied weights as they are; ``"polished"`` a copy polished to a stationary point first
            (for research), with the supplied model's metrics and the share of test predictions that differ
            reported beside it (``supplied_model.comparison``). A model the audit trains itself is what its recipe
            leaves (``training.polish``), whatever this says.
    """

    model: ModelConfig = field(default_factory=ModelConfig)
    training: TrainConfig = field(default_factory=TrainConfig)
    lam: float = 0.5
    solver: Solver = "auto"
    non_iid: bool = True
    budgets: tuple[float, ...] = (0.01, 0.1)
    validation_sample: int = 50
    stages: tuple[str, ...] = STAGES
    bootstrap: int = 1000
    level: float = 0.95
    min_group_size: int = 0
    stability_seeds: tuple[int, ...] = ()
    stability_k: int = 10
    refine_steps: int = 0
    debias_utility: bool = False
    estimator: Method = "auto"
    debias_seeds: tuple[int, ...] = ()
    debias_random_sets: int = 3
    chance_seconds: float = 0.0
    debias_retrain: str = "audit"
    edges: bool = False
    edge_budgets: tuple[float, ...] = (0.0025, 0.01)
    edge_validation_sample: int = 30
    reference: str = "as_given"

    def __post_init__(self) -> None:
        if not 0.0 <= self.lam <= 1.0:
            raise ConfigError(f"lam: {self.lam!r} must be in [0, 1]")
        if self.solver not in SOLVERS:
            raise ConfigError(f"solver: {self.solver!r} is not one of {', '.join(SOLVERS)}")
        if any(not b > 0 for b in self.budgets):
            raise ConfigError(f"budgets: {list(self.budgets)!r} must all be positive")
        if any(b >= 1 and b != int(b) for b in self.budgets):
            raise ConfigError(f"budgets: {list(self.budgets)!r}: a count (>= 1) must be a whole number")
        if self.validation_sample < 0:
            raise ConfigError(f"validation_sample: {self.validation_sample!r} must be >= 0")
        if self.edge_validation_sample < 0:
            raise ConfigError(f"edge_validation_sample: {self.edge_validation_sample!r} must be >= 0")
        if not 0 <= self.bootstrap <= 100_000 or self.bootstrap == 1:
            raise ConfigError(f"bootstrap: {self.bootstrap!r} must be 0 (off) or between 2 and 100000")
        if not 0 < self.level < 1:
            raise ConfigError(f"level: {self.level!r} must be in (0, 1)")
        if self.min_group_size < 0:
            raise ConfigError(f"min_group_size: {self.min_group_size!r} must be >= 0")
        if len(self.stability_seeds) == 1 or len(set(self.stability_seeds)) != len(self.stability_seeds):
            raise ConfigError(f"stability_seeds: {list(self.stability_seeds)!r} must be empty or 2+ distinct seeds")
        if self.stability_k < 1:
            raise ConfigError(f"stability_k: {self.stability_k!r} must be >= 1")
        if not 0 <= self.refine_steps <= MAX_REFINE_STEPS:
            raise ConfigError(f"refine_steps: {self.refine_steps!r} must be in [0, {MAX_REFINE_STEPS}]")
        if self.debias_seeds and (len(self.debias_seeds) < 3 or len(set(self.debias_seeds)) != len(self.debias_seeds)):
            raise ConfigError(f"debias_seeds: {list(self.debias_seeds)!r} must be empty or 3+ distinct seeds")
        if not 0 <= self.chance_seconds <= 86_400:
            raise ConfigError(f"chance_seconds: {self.chance_seconds!r} must be in [0, 86400]")
        if not 1 <= self.debias_random_sets <= 20:
            raise ConfigError(f"debias_random_sets: {self.debias_random_sets!r} must be between 1 and 20")
        if self.debias_retrain not in DEBIAS_RETRAIN:
            raise ConfigError(f"debias_retrain: {self.debias_retrain!r} is not one of {', '.join(DEBIAS_RETRAIN)}")
        if self.debias_retrain == "adam" and self.training.epochs == 0:
            raise ConfigError("debias_retrain: adam retrains with Adam alone, and training.epochs 0 runs no Adam epoch")
        if any(not 0 < b <= 1 for b in self.edge_budgets):
            raise ConfigError(
                f"edge_budgets: {list(self.edge_budgets)!r} must be fractions in (0, 1] (empty: no edge debiasing)"
            )
        if self.reference not in REFERENCES:
            raise ConfigError(f"reference: {self.reference!r} is not one of {', '.join(REFERENCES)}")
        if self.training.polish and self.model.stationary_point is not None:
            raise ConfigError(f"training.polish: {self.model.stationary_point}, so no polish can end")
        if self.estimator not in METHODS:
            raise ConfigError(f"estimator: {self.estimator!r} is not one of {', '.join(METHODS)}")
        unknown = set(self.stages) - set(STAGES)
        if unknown:
            raise ConfigError(f"stages: {sorted(unknown)} are not among {', '.join(STAGES)}")
        if self.training.batch_size > 0:  # refused when the audit is requested, not after it queued
            if self.model.arch not in SAMPLED_ARCHS:
                raise ConfigError(
                    f"training.batch_size: mini-batch training samples {', '.join(SAMPLED_ARCHS)} models, "
                    f"not {self.model.arch}"
                )
            normalise_fan_out(self.training.fan_out, self.model.layers)

    def influence_arguments(self) -> InfluenceArguments:
        """The influence estimate's settings this audit asks for.

        Returns:
            :class:`~bind_core.influence.arguments.InfluenceArguments` with this config's ``lam``, ``estimator`` (as
            ``method``), ``non_iid`` and ``solver``.
        """
        return InfluenceArguments(lam=self.lam, method=self.estimator, non_iid=self.non_iid, solver=self.solver)

    def polishes(self, parameters: int) -> bool:
        """Whether the model this audit trains ends with the polish: ``training.polish`` when set, else where this
        audit's estimate is the paper's influence function (:meth:`~bind_core.training.fit.TrainConfig.polishes`).

        Args:
            parameters: the model's number of weights.

        Returns:
            Whether the polish runs.
        """
        return self.training.polishes(
            estimator=self.estimator,
            row_separable=self.model.row_separable,
            num_parameters=parameters,
            stationary_point=self.model.stationary_point is None,
        )

    def describing(self, model: ModelConfig, training: TrainConfig) -> AuditConfig:
        """This config as the audit of a supplied model runs it: ``model`` (the supplied model's architecture) and
        ``training`` (its own recipe, which the debiasing stage retrains with) in place of the settings for a model
        the audit trains, the audit's own ``training.seed`` kept (it seeds the audit's samples: the self-check's
        nodes, the profile, the stability seeds' first run).

        Args:
            model: the supplied model's :class:`~bind_core.models.gnn.ModelConfig`.
            training: its :class:`~bind_core.training.fit.TrainConfig`, the recipe it was trained with.

        Returns:
            The config that describes the audited model, never the defaults for one it did not train.
        """
        return replace(self, model=model, training=replace(training, seed=self.training.seed))

    def with_polish_decided(self, parameters: int) -> AuditConfig:
        """This config with ``training.polish`` set to :meth:`polishes` (unchanged when it is set already), so that
        the audited model and every retraining after it (debiasing, the check against chance, stability) follow
        one recipe.

        Args:
            parameters: the model's number of weights.

        Returns:
            The config, ``training.polish`` a boolean.
        """
        if self.training.polish is not None:
            return self
        return replace(self, training=replace(self.training, polish=self.polishes(parameters)))

    def debias_training(self, trained_with: TrainConfig) -> TrainConfig | None:
        """The settings the debiasing stage retrains with.

        Args:
            trained_with: the model's own :class:`~bind_core.training.fit.TrainConfig` (a supplied model's is its
                config's training section, the user's recipe).

        Returns:
            For ``debias_retrain="audit"`` the model's own recipe: ``None`` when it ends with the polish (every seed
            reaches the audited optimum, so the audited model is ``before``), else that recipe itself (the unchanged
            graph is then retrained with it for ``before``, so that before and after went through the same
            training). For ``"adam"`` the same recipe without the polish.
        """
        if self.debias_retrain == "audit":
            return None if trained_with.polish else trained_with
        return replace(trained_with, polish=False)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> AuditConfig:
        """The inverse of :meth:`to_dict`.

        Args:
            data: settings by name; missing keys take the defaults.

        Returns:
            The validated :class:`AuditConfig`.

        Raises:
            ConfigError: an unknown key, or a value the config refuses.
        """
        unknown = set(data) - set(cls.__dataclass_fields__)
        if unknown:
            raise ConfigError(f"unknown audit setting(s) {sorted(unknown)}")
        try:
            kwargs: dict[str, Any] = dict(data)
            if "model" in kwargs:
                kwargs["model"] = ModelConfig.from_dict(dict(kwargs["model"]))
            if "training" in kwargs:
                kwargs["training"] = TrainConfig.from_dict(dict(kwargs["training"]))
            if "budgets" in kwargs:
                kwargs["budgets"] = tuple(float(b) for b in kwargs["budgets"])
            if "edge_budgets" in kwargs:
                kwargs["edge_budgets"] = tuple(float(b) for b in kwargs["edge_budgets"])
            if "stages" in kwargs:
                kwargs["stages"] = tuple(kwargs["stages"])
            if "debias_seeds" in kwargs:
                kwargs["debias_seeds"] = tuple(int(s) for s in kwargs["debias_seeds"])
            if "stability_seeds" in kwargs:
                kwargs["stability_seeds"] = tuple(int(s) for s in kwargs["stability_seeds"])
            return cls(**kwargs)
        except (TypeError, ValueError) as exc:
            if isinstance(exc, ConfigError):
                raise
            raise ConfigError(f"malformed audit settings: {exc}") from exc


AUTO_CHANCE_SEEDS = (1, 10, 100)
"""The training seeds of the chance check when it runs by default (``chance_seconds``)."""


def chance_retrains(budgets: int, random_sets: int, seeds: int = len(AUTO_CHANCE_SEEDS)) -> int:
    """Retrainings the chance check takes at most, as :mod:`bind_core.pipeline.budget` counts them: per budget
    ``(2 + random_sets)`` with every seed, and the unchanged graph once with every seed."""
    return budgets * (2 + random_sets) * seeds + seeds
