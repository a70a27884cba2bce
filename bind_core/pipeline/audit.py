"""The audit facade: train (or take) a model, measure its bias, attribute it to training nodes, debias, and
check the estimates against retraining. What the service's worker and the command line call."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch

from bind_core.data.graph import Graph
from bind_core.data.groups import groups_arg, included_groups
from bind_core.debiasing.debias import debias, report
from bind_core.debiasing.validation import validate
from bind_core.errors import AuditCancelled, ConfigError
from bind_core.fairness.bootstrap import bootstrap_metrics
from bind_core.fairness.breakdown import group_breakdown, probability_histograms
from bind_core.fairness.metrics import worst_pairs
from bind_core.influence import SIGN_CONVENTION, SOLVERS, ChunkRunner, InfluenceResult, estimate, refine
from bind_core.influence.estimate import METHODS
from bind_core.influence.functional import FunctionalModel
from bind_core.influence.refinement import require_refinable
from bind_core.influence.step import Stepper
from bind_core.influence.utility import utility_influence
from bind_core.models.gnn import GNN, ModelConfig
from bind_core.pipeline.caveats import estimate_warnings, metric_warnings, model_warnings, warnings_for
from bind_core.training.fit import TrainConfig, TrainedModel, train
from bind_core.training.stationarity import require_stationary

STAGES = ("training", "metrics", "influence", "debiasing", "validation")
AuditProgress = Callable[[str, float], bool | None]
"""``progress(stage, fraction)`` of :func:`run_audit`; ``False`` asks the audit to stop."""
MAX_REFINE_STEPS = 10_000


@dataclass(frozen=True)
class AuditConfig:
    """Everything an audit needs; the defaults are the paper's settings.

    Args:
        model: architecture (paper: one-layer GCN, 16 hidden).
        training: optimisation (paper: 1000 Adam epochs, lr 1e-3, weight decay 1e-4, seed 10), then polish.
        lam: Γ = lam·Γ_SP + (1 − lam)·Γ_EO.
        solver: inverse-Hessian solver: ``auto``, ``exact``, ``cg`` or ``lissa``.
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
            (default: ``"step"`` for multi-layer and attention models up to 5000 parameters). With ``"step"`` the
            self-check compares against the proximal re-optimisation, otherwise against unconstrained
            re-optimisation.
        debias_seeds: check each debiasing budget against chance (:mod:`bind_core.debiasing.chance`): retrain with each
            of these training seeds (3 or more) the unchanged graph (the noise floor), the graph without the selected
            set, and without ``debias_random_sets`` random sets of its size; empty (default) skips (it retrains
            ``(2 + debias_random_sets)·seeds`` times per budget).
        debias_random_sets: random sets per budget for that check.
    """

    model: ModelConfig = field(default_factory=ModelConfig)
    training: TrainConfig = field(default_factory=TrainConfig)
    lam: float = 0.5
    solver: str = "auto"
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
    estimator: str = "auto"
    debias_seeds: tuple[int, ...] = ()
    debias_random_sets: int = 3

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
        if not 1 <= self.debias_random_sets <= 20:
            raise ConfigError(f"debias_random_sets: {self.debias_random_sets!r} must be between 1 and 20")
        if self.estimator not in METHODS:
            raise ConfigError(f"estimator: {self.estimator!r} is not one of {', '.join(METHODS)}")
        unknown = set(self.stages) - set(STAGES)
        if unknown:
            raise ConfigError(f"stages: {sorted(unknown)} are not among {', '.join(STAGES)}")

    def to_dict(self) -> dict[str, Any]:
        return {
            "model": self.model.to_dict(),
            "training": self.training.to_dict(),
            "lam": self.lam,
            "solver": self.solver,
            "non_iid": self.non_iid,
            "budgets": list(self.budgets),
            "validation_sample": self.validation_sample,
            "stages": list(self.stages),
            "bootstrap": self.bootstrap,
            "level": self.level,
            "min_group_size": self.min_group_size,
            "stability_seeds": list(self.stability_seeds),
            "stability_k": self.stability_k,
            "refine_steps": self.refine_steps,
            "debias_utility": self.debias_utility,
            "estimator": self.estimator,
            "debias_seeds": list(self.debias_seeds),
            "debias_random_sets": self.debias_random_sets,
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> AuditConfig:
        """Inverse of :meth:`to_dict`; missing keys take the defaults, unknown keys are an error."""
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


@dataclass
class AuditResult:
    """The outcome of :func:`run_audit`. ``to_dict`` is JSON-ready; ``influence_rows`` lists every node."""

    graph: Graph
    config: AuditConfig
    model: TrainedModel
    metrics: dict[str, Any]
    influence: InfluenceResult | None = None
    debiasing: list[dict[str, Any]] | None = None
    validation: dict[str, Any] | None = None
    stability: dict[str, Any] | None = None
    refinement: dict[str, Any] | None = None
    stationarity: dict[str, Any] | None = None
    """The check before the influence stage (:func:`bind_core.training.stationarity.require_stationary`)."""
    timings: dict[str, float] = field(default_factory=dict)
    device: str = "cpu"

    def to_dict(self) -> dict[str, Any]:
        return {
            "metrics": self.metrics,
            "influence_summary": self.influence.summary() if self.influence is not None else None,
            "top_harmful": self._top("harmful"),
            "top_helpful": self._top("helpful"),
            "debiasing": self.debiasing,
            "validation": self.validation,
            "stability": self.stability,
            "refinement": self.refinement,
            "stationarity": self._stationarity(),
            "training": self.model.history,
            "model": {"parameters": self.model.num_parameters, **self.model.model_config.to_dict()},
            "graph": self.graph.summary(),
            "timings": self.timings,
            "device": self.device,
            "warnings": warnings_for(self.graph, self.config.min_group_size)
            + metric_warnings(self.metrics)
            + self._estimate_warnings(),
            "sign_convention": SIGN_CONVENTION,
        }

    def _stationarity(self) -> dict[str, Any]:
        """The polish's record, the audit's check and, with influence, the Hessian's spectrum at the weights."""
        out = {**self.model.stationarity, **(self.stationarity or {})}
        if self.influence is not None:
            d = self.influence.solve.details
            keys = ("max_eigenvalue", "min_eigenvalue", "below_weight_decay", "dropped_eigenvalues", "damping")
            out["spectrum"] = {k: d[k] for k in keys if k in d} or None
        return out

    def influence_rows(self) -> list[dict[str, Any]]:
        """One row per training node (in ``train_idx`` order); empty when influence was not computed."""
        if self.influence is None:
            return []
        g, inf = self.graph, self.influence
        idx = g.train_idx
        return [
            {
                "position": i,
                "node_index": int(node),
                "node_id": int(nid),
                "group": int(grp),
                "label": int(lab),
                "delta": float(d),
                "delta_sp": float(dsp),
                "delta_eo": float(deo),
            }
            for i, (node, nid, grp, lab, d, dsp, deo) in enumerate(
                zip(
                    idx.tolist(),
                    g.node_ids[idx].tolist(),
                    g.sens[idx].tolist(),
                    g.y[idx].tolist(),
                    inf.delta.tolist(),
                    inf.delta_sp.tolist(),
                    inf.delta_eo.tolist(),
                    strict=True,
                )
            )
        ]

    def _estimate_warnings(self) -> list[str]:
        return model_warnings(self.model.model_config, self.stationarity) + estimate_warnings(
            self.influence, self.validation, self.refinement
        )

    def _top(self, direction: str, k: int = 10) -> list[dict[str, Any]] | None:
        if self.influence is None:
            return None
        rows = self.influence_rows()
        rows.sort(key=lambda r: r["delta"], reverse=direction == "helpful")
        return [r for r in rows[:k] if (r["delta"] < 0) == (direction == "harmful")]


def _check_refinable(model: TrainedModel | None, graph: Graph, config: AuditConfig) -> None:
    """Fail before training when ``refine_steps`` asks for a refinement the model is too large for."""
    if model is not None:
        count = model.num_parameters
    else:
        count = sum(p.numel() for p in GNN(config.model, graph.num_features, graph.num_classes).parameters())
    require_refinable(count)


def _set_estimator(
    model: TrainedModel,
    graph: Graph,
    influence: InfluenceResult,
    groups: list[int] | None,
    hold: Callable[[float], None] | None = None,
) -> Callable[[list[int]], float] | None:
    """For a step estimate, ΔΓ of deleting a set of training positions as a whole (its own damped step); else
    ``None`` (the influence function's sets are non-overlapping and their estimates add up)."""
    details = influence.solve.details
    if details.get("method") != "step":
        return None
    operator = "lanczos" if influence.solve.solver == "lanczos" else "dense"  # the estimate's own operator
    stepper = Stepper(
        FunctionalModel.from_trained(model, graph, groups), rule=details["damping_rule"], operator=operator,
        progress=hold,
    )  # fmt: skip
    lam = influence.lam

    def set_estimate(positions: list[int]) -> float:
        delta = stepper.delete(positions).delta
        return lam * float(delta[0]) + (1 - lam) * float(delta[1])

    return set_estimate


def run_audit(
    graph: Graph,
    config: AuditConfig | None = None,
    *,
    progress: AuditProgress | None = None,
    model: TrainedModel | None = None,
    device: str | torch.device = "cpu",
    chunk_runner: ChunkRunner | None = None,
) -> AuditResult:
    """Run the audit's stages on ``graph`` (see :data:`STAGES`) and return everything they produced.

    ``progress(stage, fraction)`` is called as each stage advances, also inside every long loop (training epochs,
    the polish's evaluations and Newton steps, Hessian columns, solver iterations, the per-node terms, every
    retraining), so that the work can be stopped within about one such step: when it returns ``False`` the audit
    stops with :class:`~bind_core.errors.AuditCancelled`; it may also raise (its exception propagates). A supplied
    ``model`` skips training (the paper's setting: a given GNN trained on the graph). ``chunk_runner``
    computes the influence estimate's per-node terms from its plan (e.g. spread over workers; see
    :mod:`bind_core.influence.plan`); by default they are computed here.
    """
    config = config or AuditConfig()
    timings: dict[str, float] = {}

    def tick(stage: str, frac: float) -> None:
        if progress is not None and progress(stage, frac) is False:
            raise AuditCancelled(stage)

    if config.refine_steps and "influence" in config.stages:
        _check_refinable(model, graph, config)
    start = time.perf_counter()
    tick("training", 0.0)
    if model is None:
        model = train(graph, config.training, config.model, progress=tick, device=device)
    timings["training"] = time.perf_counter() - start

    start = time.perf_counter()
    tick("metrics", 0.0)
    groups = groups_arg(graph, included_groups(graph, config.min_group_size))
    test = graph.test_idx
    proba = model.predict_proba(graph, test).double()
    metrics: dict[str, Any] = {
        "test": {
            **report(model, graph, config.lam, groups),
            "worst_pairs": worst_pairs(proba, graph.y[test], graph.sens[test], groups=groups),
        },
        "groups": group_breakdown(model, graph, config.min_group_size),
        "included_groups": groups if groups is not None else list(range(graph.num_groups)),
        "histograms": probability_histograms(model, graph),
    }
    if config.bootstrap:
        intervals = bootstrap_metrics(
            proba,
            graph.y[test],
            graph.sens[test],
            resamples=config.bootstrap,
            level=config.level,
            seed=config.training.seed,
            groups=groups,
        )
        metrics["intervals"] = {
            "level": config.level,
            "resamples": config.bootstrap,
            **{k: v.to_dict() for k, v in intervals.items()},
        }
    timings["metrics"] = time.perf_counter() - start
    tick("metrics", 1.0)
    result = AuditResult(graph, config, model, metrics, timings=timings, device=str(device))

    if "influence" not in config.stages:
        return result
    start = time.perf_counter()
    tick("influence", 0.0)
    result.stationarity = require_stationary(model, graph)
    share = 0.2 if config.refine_steps else 1.0  # of the influence stage's progress; refining takes the rest
    result.influence = estimate(
        model, graph, lam=config.lam, non_iid=config.non_iid, solver=config.solver, groups=groups,
        progress=lambda stage, frac: tick(stage, share * frac), chunk_runner=chunk_runner, method=config.estimator,
    )  # fmt: skip
    if config.refine_steps:
        result.influence, refined = refine(
            model, graph, result.influence, max_iter=config.refine_steps, groups=groups,
            progress=lambda _stage, frac: tick("influence", share + (1 - share) * frac),
        )  # fmt: skip
        result.refinement = refined.record()
    timings["influence"] = time.perf_counter() - start

    if "debiasing" in config.stages and config.budgets:
        start = time.perf_counter()
        tick("debiasing", 0.0)
        hold = lambda _f: tick("debiasing", 0.0)  # noqa: E731 (a checkpoint while a stage prepares)
        utility = (
            utility_influence(model, graph, non_iid=config.non_iid, solver=config.solver, progress=hold)
            if config.debias_utility
            else None
        )
        result.debiasing = debias(
            model, graph, result.influence.delta, budgets=config.budgets, lam=config.lam, progress=tick,
            groups=groups, utility=utility, chance_seeds=config.debias_seeds, random_sets=config.debias_random_sets,
            set_estimate=_set_estimator(model, graph, result.influence, groups, hold),
        )  # fmt: skip
        timings["debiasing"] = time.perf_counter() - start

    if "validation" in config.stages and config.validation_sample > 0:
        start = time.perf_counter()
        tick("validation", 0.0)
        checked = validate(
            model,
            graph,
            result.influence,
            protocol="sample",
            sample=config.validation_sample,
            progress=tick,
            groups=groups,
        )
        result.validation = checked.to_dict()
        timings["validation"] = time.perf_counter() - start

    if config.stability_seeds:
        from bind_core.influence.stability import topk_stability

        start = time.perf_counter()
        result.stability = topk_stability(
            graph, config, seeds=config.stability_seeds, k=config.stability_k, device=device, reference=result,
            progress=lambda _stage, frac: tick("stability", frac),
        )  # fmt: skip
        timings["stability"] = time.perf_counter() - start
    return result
