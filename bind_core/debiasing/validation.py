"""Ground truth for influence estimates: the actual ΔΓ of deleting nodes, and estimate-vs-actual correlation.

Three ways to get the "actual" change of Γ after deleting a node set ``S`` (``Γ`` always on the test nodes):

* ``"reoptimize"`` (default, the quantity an influence function approximates): copy the trained weights, move
  to ``G − S`` and re-optimise the *same* objective to convergence with the float64 L-BFGS polish.
  Deterministic and fast (a warm start).
* ``"scratch"``: train from scratch on ``G − S`` with the original settings and seed (adds the noise of a
  different training path; what the paper's debiasing does).
* ``"fine_tune"``: the reference code's protocol (30 Adam epochs at lr 0.01 from the trained weights), kept
  for comparison: its own movement dwarfs the effect of one node.
* ``"proximal"``: the proximal Bregman response, the question the estimate answers at any weights
  (:mod:`bind_core.influence.bregman`): minimise ``(1/m)·Σ_{j ∈ train∖S} ℓ_j(θ; G − S) + (λ/2)·‖θ‖² + r(θ) +
  (μ/2)·‖θ − θ̂‖²`` from ``θ̂`` (``m`` the original training set's size, so the objective is ``B − (1/m)·c_S``
  with ``B`` the Bregman objective, whose minimum is ``θ̂``), ``r`` the Bregman tilt on ``G``, with float64
  L-BFGS, ``μ`` the damping the estimate used (0 for the linear estimate). Well-posed where leave-one-out
  retraining of a flat objective is not, defined at weights that are not a minimum, and deterministic.
"""

from __future__ import annotations

import copy
import dataclasses
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch
from scipy.stats import pearsonr, spearmanr
from torch import Tensor

from bind_core.data.graph import Graph
from bind_core.debiasing.proximal_truth import proximal_reoptimize
from bind_core.debiasing.records import Correlation, UndefinedTruth, Validation, ValidationPoint
from bind_core.errors import ConfigError, NonFiniteError
from bind_core.fairness.metrics import gamma_eo, gamma_sp
from bind_core.influence.curvature import Coordinates, DampedCurvature
from bind_core.influence.functional import FunctionalModel
from bind_core.influence.solvers import SolveInfo
from bind_core.influence.step import Stepper
from bind_core.threads import check_threads, each_in_order
from bind_core.training.fit import ProgressCallback, TrainedModel, fine_tune, train
from bind_core.training.polish import polish
from bind_core.training.stationarity import is_stationary

MODES = ("reoptimize", "scratch", "fine_tune", "proximal")


def gammas(model: TrainedModel, graph: Graph, groups: list[int] | None = None) -> tuple[float, float]:
    """``(Γ_SP, Γ_EO)`` of ``model`` on ``graph``'s test nodes, over pairs of ``groups`` (default: all)."""
    return gammas_of(model.predict_proba(graph, graph.test_idx).double(), graph, groups)


def gammas_of(proba: Tensor, graph: Graph, groups: list[int] | None = None) -> tuple[float, float]:
    """``(Γ_SP, Γ_EO)`` of the class probabilities ``proba`` (``[k, C]``) of ``graph``'s test nodes, over pairs of
    ``groups`` (default: all)."""
    test = graph.test_idx
    sens, y = graph.sens[test], graph.y[test]
    return (
        float(gamma_sp(proba, sens, num_groups=graph.num_groups, groups=groups)),
        float(gamma_eo(proba, y, sens, num_groups=graph.num_groups, groups=groups)),
    )


def retrain_without(
    model: TrainedModel,
    graph: Graph,
    nodes: Tensor | Sequence[int],
    mode: str,
    *,
    damping: float = 0.0,
    hold: Callable[[], None] | None = None,
    coordinates: Coordinates | None = None,
    on_anchor: FunctionalModel | None = None,
) -> TrainedModel:
    """The model after deleting ``nodes`` from ``graph`` and retraining by ``mode`` (see the module docstring;
    ``damping`` is the proximal mode's ``μ``, ``coordinates`` those its L-BFGS runs in and ``on_anchor`` the model on
    ``graph`` whose tilt it reads: :func:`~bind_core.debiasing.proximal_truth.proximal_reoptimize`). ``hold()`` is
    called as the retraining advances (every objective evaluation or training report) and may raise to abort it."""
    reduced, _ = graph.without_nodes(torch.as_tensor(nodes, dtype=torch.long))
    tick = None if hold is None else (lambda *_: hold())
    if mode == "proximal":
        return proximal_reoptimize(
            model,
            reduced,
            num_train=int(graph.train_idx.numel()),
            damping=damping,
            anchor=graph,
            progress=tick,
            coordinates=coordinates,
            on_anchor=on_anchor,
        )
    if mode == "reoptimize":
        clone = TrainedModel(
            copy.deepcopy(model.module), model.model_config, model.train_config, dataclasses.replace(model.history)
        )
        cfg = model.train_config
        return polish(clone, reduced, max_iter=max(cfg.polish_max_iter, 1000), tol=cfg.polish_tol, progress=tick)
    if mode == "scratch":
        return train(reduced, model.train_config, model.model_config, device=model.device, progress=tick)
    if mode == "fine_tune":
        return fine_tune(model, reduced, progress=tick)
    raise ConfigError(f"mode: {mode!r} is not one of {', '.join(MODES)}")


def actual_delta(
    model: TrainedModel, graph: Graph, nodes: Tensor | Sequence[int], *, mode: str = "reoptimize"
) -> tuple[float, float]:
    """Actual ``(ΔΓ_SP, ΔΓ_EO)`` of deleting ``nodes`` (same sign convention as the estimate)."""
    before = gammas(model, graph)
    reduced, _ = graph.without_nodes(torch.as_tensor(nodes, dtype=torch.long))
    after = gammas(retrain_without(model, graph, nodes, mode), reduced)
    return after[0] - before[0], after[1] - before[1]


def _corr(est: np.ndarray, act: np.ndarray) -> dict[str, float | None]:
    if est.size < 3 or np.std(est) == 0 or np.std(act) == 0:
        return {"pearson": None, "spearman": None}
    return {"pearson": float(pearsonr(est, act)[0]), "spearman": float(spearmanr(est, act)[0])}


@dataclass
class ValidationResult:
    """Estimated vs actual ΔΓ for a list of deletions (single nodes or node sets)."""

    protocol: str
    mode: str
    sets: list[list[int]]
    estimated: np.ndarray  # [k, 3]: Γ, Γ_SP, Γ_EO
    actual: np.ndarray  # [k, 3]
    lam: float
    seconds: float
    noise_floor: float | None = None
    """The change of Γ the ground truth's re-optimisation makes with nothing deleted (deterministic ones only)."""
    clear_of_noise: float | None = None
    """The share of deletions whose actual |ΔΓ| exceeds twice the noise floor."""
    noise_floor_reason: str | None = None
    """Why there is no noise floor."""
    undefined_truth: UndefinedTruth | None = None
    """The deletions whose actual ΔΓ is undefined (none: ``None``)."""
    extra: dict[str, Any] = field(default_factory=dict)

    def correlations(self) -> dict[str, dict[str, float | None]]:
        """Pearson and Spearman per column over the deletions whose actual and estimated ΔΓ are defined (finite)."""
        names = ("gamma", "gamma_sp", "gamma_eo")
        ok = _finite(self.actual) & _finite(self.estimated)
        return {nm: _corr(self.estimated[ok, i], self.actual[ok, i]) for i, nm in enumerate(names)}

    def record(self) -> Validation:
        """The check as the results record it (the result's ``validation``).

        Returns:
            The :class:`~bind_core.debiasing.records.Validation`: the correlations, every point (``actual`` null
            where the re-optimisation found no finite optimum) and the check's other figures.
        """
        corr = {
            name: Correlation(pearson=c["pearson"], spearman=c["spearman"]) for name, c in self.correlations().items()
        }
        return Validation(
            protocol=self.protocol,
            mode=self.mode,
            count=len(self.sets),
            pearson=corr["gamma"].pearson,
            spearman=corr["gamma"].spearman,
            correlations=corr,
            points=[
                ValidationPoint(
                    nodes=s,
                    estimated=e.tolist() if np.isfinite(e).all() else None,
                    actual=a.tolist() if np.isfinite(a).all() else None,
                )
                for s, e, a in zip(self.sets, self.estimated, self.actual, strict=True)
            ],
            seconds=self.seconds,
            noise_floor=self.noise_floor,
            clear_of_noise=self.clear_of_noise,
            noise_floor_reason=self.noise_floor_reason,
            undefined_truth=self.undefined_truth,
            extra=dict(self.extra),
        )


def _finite(values: np.ndarray) -> np.ndarray:
    """``[k]`` bool: the rows of ``values`` (``[k, 3]``) that are finite throughout."""
    return np.isfinite(values).all(axis=1) if values.size else np.zeros(0, dtype=bool)


def ground_truth_mode(model: TrainedModel, graph: Graph, details: dict[str, Any]) -> str:
    """The ground truth of an estimate whose solve recorded ``details``: the proximal Bregman response
    (``"proximal"``) for a step estimate, and for a linear one at weights that are not stationary (with the solve's
    damping, 0 by default: the Bregman objective of ``G − S`` re-optimised); unconstrained re-optimisation
    (``"reoptimize"``, the paper's question) for a linear estimate at a stationary point, where the two coincide for
    a model linear in its weights and unconstrained re-optimisation is the established reference."""
    if details.get("method") == "step":
        return "proximal"
    return "reoptimize" if is_stationary(model, graph) else "proximal"


def sample_positions(m: int, sample: int, seed: int) -> list[int]:
    """The training positions the per-node check draws: ``sample`` of ``m`` at random, reproducibly from ``seed``."""
    return torch.randperm(m, generator=torch.Generator().manual_seed(seed))[: min(sample, m)].tolist()


def validate(
    model: TrainedModel,
    graph: Graph,
    influence: Any,
    *,
    protocol: str = "sample",
    sample: int = 50,
    num_sets: int = 10,
    max_set_fraction: float = 0.1,
    mode: str | None = None,
    seed: int = 0,
    progress: ProgressCallback | None = None,
    groups: list[int] | None = None,
    damping: float | None = None,
    threads: int = 1,
    coordinates: Coordinates | None = None,
) -> ValidationResult:
    """Compare the estimate with actual retraining.

    Args:
        influence: an :class:`~bind_core.influence.InfluenceResult` for ``model`` on ``graph``.
        protocol: ``"sample"``: single nodes drawn at random (``sample`` of them; the honest per-node check);
            ``"sets"``: the paper's protocol, node sets of growing size from the top of the harmful and of the
            helpful ranking (``num_sets`` of each, up to ``max_set_fraction`` of the training set), whose
            estimate is the sum over the set for the influence function (running totals inflate correlation;
            report both) and the set's own damped step for a step estimate
            (:class:`~bind_core.influence.step.Stepper`; a sum of flat-objective steps can exceed Γ itself).
        mode: how the actual ΔΓ is obtained (``reoptimize``, ``proximal``, ``scratch`` or ``fine_tune``); default:
            the question the estimate answers (:func:`ground_truth_mode`).
        groups: the groups Γ is measured over (default: all), as in the estimate.
        damping: the proximal mode's ``μ``; default: the damping the estimate's solve used.
        threads: CPU threads re-optimising deletions at once, for the deterministic ground truths (``reoptimize``,
            ``proximal``: each works on its own copy of the model, so the values are those of one thread; retraining
            from scratch or fine-tuning draws from torch's global generator and stays on one thread).
            :func:`~bind_core.threads.each_in_order`; progress then advances per deletion.
        coordinates: those the proximal ground truth's L-BFGS runs in
            (:func:`~bind_core.debiasing.proximal_truth.proximal_reoptimize`: the same minimum, in a few evaluations);
            default: the estimate's damped curvature's, formed again here for a dense step estimate, else the
            weights' own.
    """
    check_threads(threads)
    start = time.perf_counter()
    train_idx = graph.train_idx
    deletions = _deletions(influence.delta, protocol, sample, seed, num_sets, max_set_fraction)
    mode = ground_truth_mode(model, graph, influence.solve.details) if mode is None else mode
    damping = float(influence.solve.details.get("damping", 0.0)) if damping is None else damping
    stepper = _set_stepper(model, graph, influence, groups, progress) if protocol == "sets" else None
    on_anchor = FunctionalModel.from_trained(model, graph) if mode == "proximal" else None  # its tilt, made once
    if on_anchor is not None and coordinates is None:
        found = None if stepper is None else stepper.curvature.coordinates()
        coordinates = found or proximal_coordinates(on_anchor, influence.solve)
    before = gammas(model, graph, groups)
    check = _Check(model, graph, influence.lam, mode, damping, groups, before, stepper, coordinates)
    est_all = torch.stack([influence.delta, influence.delta_sp, influence.delta_eo], dim=1).double()
    act = _actuals(check, deletions, progress, threads if mode in ("reoptimize", "proximal") else 1, on_anchor)
    est = [check.estimated(pos, est_all) for pos in deletions]
    actual = np.asarray(act, dtype=np.float64).reshape(-1, 3)
    noise = _noise(check, actual[:, 0], on_anchor)
    return ValidationResult(
        protocol=protocol,
        mode=mode,
        sets=[train_idx[torch.tensor(p)].tolist() for p in deletions],
        estimated=np.asarray(est, dtype=np.float64).reshape(-1, 3),
        actual=actual,
        lam=influence.lam,
        seconds=time.perf_counter() - start,
        noise_floor=noise.floor,
        clear_of_noise=noise.clear,
        noise_floor_reason=noise.reason,
        undefined_truth=_undefined(deletions, actual, train_idx),
    )


def _actuals(
    check: _Check,
    deletions: list[list[int]],
    progress: ProgressCallback | None,
    threads: int,
    on_anchor: FunctionalModel | None = None,
) -> list[list[float]]:
    """Each deletion's actual ``[ΔΓ, ΔΓ_SP, ΔΓ_EO]`` (:meth:`_Check.actual`), in order; on one thread progress
    advances inside each re-optimisation too, on several only between them (the callback runs on this thread).
    ``on_anchor``: the model on the graph whose tilt a proximal truth reads; each thread gets its own fork."""
    count = len(deletions)
    act: list[list[float]] = [[] for _ in deletions]

    def put(i: int, values: list[float]) -> None:
        act[i] = values
        if progress is not None:
            progress("validation", (i + 1) / count)

    def actual(anchored: FunctionalModel | None, i: int) -> list[float]:
        hold = None if progress is None or threads > 1 else (lambda: progress("validation", i / count))
        return check.actual(deletions[i], hold, anchored)

    states = [on_anchor, *(None if on_anchor is None else on_anchor.fork() for _ in range(threads - 1))]
    each_in_order(list(range(count)), actual, put, states)
    return act


def _deletions(
    delta: Tensor, protocol: str, sample: int, seed: int, num_sets: int, max_set_fraction: float
) -> list[list[int]]:
    """The training positions :func:`validate` deletes together, one list per deletion (see its ``protocol``), among
    the nodes whose estimate is a number (a node whose deletion has no minimum near the weights has none to check)."""
    if protocol not in ("sample", "sets"):
        raise ConfigError(f"protocol: {protocol!r} is not one of sample, sets")
    m = int(delta.numel())
    known = torch.isfinite(delta)
    if protocol == "sample":
        if bool(known.all()):
            return [[p] for p in sample_positions(m, sample, seed)]
        among = torch.nonzero(known).flatten()
        return [[int(among[p])] for p in sample_positions(int(among.numel()), sample, seed)]
    order = torch.argsort(delta)
    order = order[known[order]]
    top = max(1, int(max_set_fraction * m))
    sizes = sorted({max(1, round(top * (i + 1) / num_sets)) for i in range(num_sets)})
    return [order[:k].tolist() for k in sizes] + [order.flip(0)[:k].tolist() for k in sizes]


def _set_stepper(
    model: TrainedModel, graph: Graph, influence: Any, groups: list[int] | None, progress: ProgressCallback | None
) -> Stepper | None:
    """For a step estimate, the :class:`~bind_core.influence.step.Stepper` that settles each set as a whole (its
    damping rule and operator); ``None`` for a linear estimate, whose sets are the sums of their members."""
    if influence.solve.details.get("method") != "step":
        return None
    return Stepper.build(
        FunctionalModel.from_trained(model, graph, groups),
        rule=influence.solve.details["damping_rule"],
        operator="lanczos" if influence.solve.solver == "lanczos" else "dense",
        progress=None if progress is None else (lambda _f: progress("validation", 0.0)),
    )


def proximal_coordinates(fm: FunctionalModel, solve: SolveInfo) -> Coordinates | None:
    """The coordinates a proximal ground truth runs in by default
    (:func:`~bind_core.debiasing.proximal_truth.proximal_reoptimize`): those of the step estimate's damped
    curvature, formed again for ``fm`` (the model on its graph, whose tilt the truth reads) with the estimate's
    damping rule and operator (``solve``: the estimate's); ``None`` (the weights' own) for a linear estimate."""
    details = solve.details
    if details.get("method") != "step" or "damping_rule" not in details:
        return None
    operator = "lanczos" if solve.solver == "lanczos" else "auto"
    return DampedCurvature.build(fm, rule=float(details["damping_rule"]), operator=operator).coordinates()


@dataclass
class _Check:
    """What :func:`validate` compares each deletion with: the ground truth's ``mode`` and ``damping``, Γ's weighting
    ``lam`` and ``groups``, ``(Γ_SP, Γ_EO)`` before deleting, and the set stepper (``None``: sums of members)."""

    model: TrainedModel
    graph: Graph
    lam: float
    mode: str
    damping: float
    groups: list[int] | None
    before: tuple[float, float]
    stepper: Stepper | None
    coordinates: Coordinates | None = None
    """Those the proximal ground truth runs in (:func:`validate`)."""

    def actual(
        self, pos: list[int], hold: Callable[[], None] | None, on_anchor: FunctionalModel | None = None
    ) -> list[float]:
        """Actual ``[ΔΓ, ΔΓ_SP, ΔΓ_EO]`` of deleting the training positions ``pos`` (NaN where the re-optimisation
        leaves every finite value: the objective has no minimum near θ̂ for this deletion, so no ground truth)."""
        nodes = self.graph.train_idx[torch.tensor(pos)]
        reduced, _ = self.graph.without_nodes(nodes)
        try:
            retrained = retrain_without(
                self.model,
                self.graph,
                nodes,
                self.mode,
                damping=self.damping,
                hold=hold,
                coordinates=self.coordinates,
                on_anchor=on_anchor,
            )
            after = gammas(retrained, reduced, self.groups)
        except NonFiniteError:
            after = (float("nan"), float("nan"))
        d_sp, d_eo = after[0] - self.before[0], after[1] - self.before[1]
        return [self.lam * d_sp + (1 - self.lam) * d_eo, d_sp, d_eo]

    def estimated(self, pos: list[int], est_all: Tensor) -> list[float]:
        """Estimated ``[ΔΓ, ΔΓ_SP, ΔΓ_EO]`` of the same deletion: a set's own step with a stepper (not the sum of its
        members'), else the sum of the rows of ``est_all`` (``[m, 3]``)."""
        if self.stepper is not None and len(pos) > 1:
            out = self.stepper.delete(pos).delta
            return [self.lam * float(out[0]) + (1 - self.lam) * float(out[1]), float(out[0]), float(out[1])]
        summed: list[float] = est_all[torch.tensor(pos)].sum(0).tolist()
        return summed


def _undefined(deletions: list[list[int]], actual: np.ndarray, train_idx: Tensor) -> UndefinedTruth | None:
    """The deletions (training positions) whose actual ΔΓ is undefined, by node (none: ``None``)."""
    return undefined_truth([train_idx[torch.tensor(p)].tolist() for p in deletions], actual)


def undefined_truth(sets: list[list[int]], actual: np.ndarray, *, what: str = "deletion") -> UndefinedTruth | None:
    """The checked ``sets`` (each its nodes: a node set, an edge's endpoints) whose actual ΔΓ is undefined (a row of
    ``actual`` not finite: the re-optimisation found no minimum near the given weights), or ``None`` when every one
    has one; ``what`` names a checked item in the reason."""
    gone = [nodes for nodes, a in zip(sets, actual, strict=True) if not np.isfinite(a).all()]
    if not gone:
        return None
    return UndefinedTruth(
        count=len(gone),
        nodes=gone,
        reason=f"the re-optimisation found no minimum near the given weights for this {what} (it carried them away "
        f"without bound); these {what}s are left out of the correlations",
    )


@dataclass(frozen=True)
class _NoiseFloor:
    """The ground truth's resolution (:func:`_noise`): the ``floor``, the share ``clear`` of it, or the ``reason``
    there is none."""

    floor: float | None = None
    clear: float | None = None
    reason: str | None = None


def _noise(check: _Check, actual: np.ndarray, on_anchor: FunctionalModel | None = None) -> _NoiseFloor:
    """The ground truth's own resolution: the change of Γ when the same re-optimisation runs with nothing deleted
    (the drift left by the audited weights' stationarity tolerance), and the share of checked deletions whose
    actual |ΔΓ| exceeds twice it. Deterministic ground truths only; retraining from scratch or fine-tuning moves
    Γ by its own path (its noise is the seeds' spread, :mod:`bind_core.debiasing.chance`)."""
    model, graph, mode, before, lam = check.model, check.graph, check.mode, check.before, check.lam
    if mode not in ("reoptimize", "proximal"):
        return _NoiseFloor(reason=f"{mode} retraining has no deterministic drift")
    again = retrain_without(
        model, graph, [], mode, damping=check.damping, coordinates=check.coordinates, on_anchor=on_anchor
    )
    sp, eo = gammas(again, graph, check.groups)
    drift = abs(lam * (sp - before[0]) + (1 - lam) * (eo - before[1]))
    finite = actual[np.isfinite(actual)]
    clear = float(np.mean(np.abs(finite) > 2 * drift)) if finite.size else None
    return _NoiseFloor(floor=drift, clear=clear)
