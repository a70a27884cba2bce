"""The estimate for multi-layer and attention models: damped Newton steps per node, Γ evaluated exactly there.

Why (docs/METHOD.md, "Multi-layer and attention models"). For a two-layer GNN or a GAT the training objective is
flat: at a converged point about half the Hessian's eigenvalues lie below the weight decay, and re-optimising after
a deletion (leave-one-out retraining) travels far along those flat directions, to a point one Newton step does not
reach and along a path on which Γ is not linear. That question is ill-posed; the estimate answers a well-posed
one instead, the **proximal Bregman response** (PBRF, Bae et al., NeurIPS 2022, adapted to graphs; defined at any
weights, docs/METHOD.md "The model as given"):

    θ_v^μ = argmin_θ  F_v(θ) = B(θ) − (1/m)·c_v(θ) + (μ/2)·‖θ − θ̂‖²,      ΔΓ_v = Γ(θ_v^μ; G − v) − Γ(θ̂; G),

where ``B`` is the training objective with each kept node's loss replaced by its Bregman divergence from the
outputs at ``θ̂`` (so ``θ̂`` is the answer when nothing is deleted), and ``c_v`` is the deleted loss of
:mod:`bind_core.influence.estimate` (``v``'s loss and the change of the losses of the training nodes ``T(v)``
whose computation graph holds ``v``). The curvature ``H = ∇²B(θ̂)`` is the Gauss–Newton matrix plus the weight
decay; the damping follows a rule, not a per-dataset constant: ``μ = DAMPING_RULE·λ_max(H)``
(:mod:`bind_core.influence.curvature`).

From ``θ̂`` the estimate takes the damped Newton step ``Δθ_v = (1/m)·(H + μI)⁻¹·∇c_v(θ̂)``, then further steps
with the same frozen ``(H + μI)⁻¹`` on the exact gradient of ``F_v`` on ``G − v`` (a chord method, Anderson-mixed
for a smooth model: :mod:`bind_core.influence.anderson`; each halved until ``F_v`` decreases enough), at most
:data:`STEPS` in all, and evaluates Γ **exactly** on ``G − v`` at the
weights reached, rather than linearising Γ: first-order estimates rank the proximal response well but come out
several times too large, because Γ stops being linear beyond moves of ~0.1, and one step alone reached Pearson
0.925 where the settled steps reach 0.99999 (docs/RESULTS.md). The first-order value ``∇Γᵀ·Δθ_v`` plus the exact
direct term (``Γ(θ̂; G − v) − Γ(θ̂; G)``) is kept in ``parts``; ``parts["step"]`` is the rest, so the parts add up.
A set of nodes is settled the same way on ``G − S`` (:class:`Stepper`), not as the sum of its members.

Cost: one dense curvature matrix (from the training rows' Jacobian, :mod:`bind_core.influence.gaussnewton`) and
its eigendecomposition up to :data:`~bind_core.influence.solvers.EXACT_MAX_PARAMETERS` parameters, else Lanczos
eigenpairs from a few hundred Hessian-vector products (:mod:`bind_core.influence.lowrank`); per training node one
forward and one backward pass of the model on ``G − v`` at ``θ̂`` (which give ``∇c_v`` and the direct term), and one
of each per step.

The sign convention is the estimate's (:data:`bind_core.influence.SIGN_CONVENTION`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace

import torch
from torch import Tensor

from bind_core.errors import ConfigError
from bind_core.influence.anderson import Mixing
from bind_core.influence.curvature import DAMPING_RULE, DampedCurvature, choose_operator
from bind_core.influence.firstlayer import FirstLayerCache, SplitModel
from bind_core.influence.functional import FunctionalModel, GammaEvaluator, gammas_from_proba
from bind_core.influence.fused import FusedObjective
from bind_core.influence.lbfgs import Found, minimise
from bind_core.influence.lowrank import DampedInverse
from bind_core.influence.proximal import Evaluation, proximal_objective, touched_rows
from bind_core.influence.reduce import GraphReducer, Reduction
from bind_core.influence.solvers import SolveInfo
from bind_core.models.gnn import flat_parameters, probabilities
from bind_core.models.propagation import GraphInputs

STEPS = 20
"""Damped Newton steps per node at most (the first, then chord steps with the Hessian at ``θ̂`` frozen) towards
the proximal optimum; each after the first costs one forward and one backward pass on ``G − v``."""


HALVINGS = 30
"""A step is halved up to this many times until the proximal objective decreases enough (Armijo); a damped Newton
direction descends, so a small enough step always does."""


FINISH_EVALUATIONS = 300
"""Evaluations at most of the L-BFGS finish (:meth:`Stepper._finish`) of a deletion whose chord steps stopped short:
a deletion the damped curvature's coordinates bring to its minimum took 3–160 evaluations on ``synthetic(600,
seed=3)``'s two-layer SAGE and GIN, one without a minimum near ``θ̂`` 34–134 to leave its reach."""


FINISH_PATIENCE = 10
"""The finish's ``patience`` on a model with kinks (:func:`~bind_core.influence.lbfgs.minimise`, ``by_value``): it
stops once this many evaluations in a row have not lowered the objective by
:data:`~bind_core.influence.lbfgs.CHANGE`. Less than the self-check's truth's
(:data:`~bind_core.influence.lbfgs.PATIENCE`): nearly every deletion of such a model is finished, so each evaluation
counts. 20 until 2026-12-07: the same searches stopped at 10 reach the same best points to 10⁻⁷ (PyG two-layer GCN
and SAGE on Income, 60 deletions each: every ΔΓ within 1.4·10⁻⁷ of a search run to a patience of 300 at 10 as at
20; three-layer GCN, 40 deletions: within 3.5·10⁻⁶ at both) with a third fewer evaluations, the finish a two-layer
GCN's 16.5 → 10.2 and a three-layer GCN's 33.2 → 19.1 on average (``bench/bench_finish.py``, docs/SCALE.md)."""


STALL_HALVINGS = 4
"""With :data:`STALL_SHARE`: a step that needed at least this many halvings (Armijo) and moved the weights by at most
that share of their distance from ``θ̂`` ends the chord steps: they have stalled (on a ReLU model's kinks the
minimum lies where no gradient vanishes, and the steps zigzag across it in ever smaller steps)."""
STALL_SHARE = 1e-2


def inputs_without(fm: FunctionalModel, nodes: int | Tensor) -> GraphInputs:
    """The model inputs of ``G − nodes`` in the full graph's numbering: their edges removed (each keeps only a GCN
    self-loop, which touches no other node), the aggregation renormalised with the reduced degrees and the
    aggregated features recomputed with it. Every other node then has exactly its output on ``G − nodes``. For
    many deletions of one model, :class:`GraphReducer` does the same without sorting."""
    return GraphReducer(fm)(nodes)


def full_inputs(fm: FunctionalModel) -> GraphInputs:
    """The full graph's inputs, as :func:`inputs_without` gives those of ``G − nodes``: the model's own (the
    aggregated features and the adjacency the layers run on)."""
    return fm.inputs


@dataclass
class Deletion:
    """One deletion's outcome (:meth:`Stepper.delete`)."""

    delta: Tensor
    """``[2]``: ΔΓ_SP, ΔΓ_EO at the weights reached on ``G − S``; NaN where the deletion has no minimum near ``θ̂``
    (:attr:`far`)."""
    direct: Tensor
    """``[2]``: ``Γ(θ̂; G − S) − Γ(θ̂; G)``."""
    first_order: Tensor
    """``[2]``: ``∇Γᵀ·Δθ_S`` for the first step."""
    first_step: Tensor
    weights: Tensor
    taken: int
    """Chord steps taken (the first among them)."""
    residual: float
    """The proximal gradient's largest entry at the weights reached: settled when at most the stepper's ``tol``."""
    finished: int = 0
    """The L-BFGS finish's evaluations (0: the chord steps settled)."""
    far: str | None = None
    """Why the deletion has no minimum near ``θ̂`` (its finish carried the weights beyond reach of them), else
    ``None``. Such a deletion has no proximal response: its ``delta`` is NaN (no value answers the question), its
    ``weights`` where the chord steps stopped (docs/METHOD.md, "Deletions without a minimum near the given weights")."""


@dataclass(eq=False)
class Stepper:
    """The damped-step machinery for one model: its damped curvature (:class:`DampedCurvature`), the full graph's
    outputs and Γ at ``θ̂``, and the rows a deletion is judged on; :meth:`delete` settles one deletion (a node or a
    set of training positions). Made by :meth:`build`; the constructor only stores."""

    fm: FunctionalModel
    curvature: DampedCurvature
    steps: int
    """Damped steps per deletion at most (the first, then chord steps)."""
    tol: float
    """A deletion is settled when the proximal gradient's largest entry is at most this."""
    full: GraphInputs
    """The full graph's inputs."""
    wanted: Tensor
    """The rows a deletion is judged on: the training nodes, then the test nodes."""
    test: Tensor
    """The test nodes: the very tensor the reducer cuts its blocks for, so that each reduced graph's test-row block
    (cached by the tensor's identity, :meth:`~bind_core.data.sparse.Adjacency.rows`) is made once, by the reducer,
    not cut again at each read of Γ."""
    base_proba: Tensor
    """The test nodes' probabilities at ``θ̂`` on ``G``."""
    gammas: GammaEvaluator
    base_gamma: Tensor
    """``[2]``: Γ_SP, Γ_EO at ``θ̂`` on ``G``."""
    grad_gamma: Tensor
    """``[2, p]``: their gradients."""
    grad_objective: Tensor
    """``∇B(θ̂)``: 0 at any weights, to rounding."""
    y: Tensor
    """Every node's label, on the model's device."""
    reducer: GraphReducer
    view: Callable[[Reduction], GraphInputs] | None
    """The training nodes' computation graph, where the objective is evaluated when it is a small part of ``G``."""
    train_rows: Tensor
    base_first: Tensor | None = None
    """The full graph's first-layer output at ``θ̂`` (activated), for Γ's direct term on the computation graph."""
    first: FirstLayerCache | None = None
    tilt_hat: tuple[Tensor, Tensor] | None = None
    """``(r(θ̂), ∇r(θ̂))``: the Bregman tilt (:meth:`FunctionalModel.tilt`) and its gradient at ``θ̂``, the same for
    every deletion (the tilt reads ``G``), so that each deletion's first evaluation, at ``θ̂``, adds them rather than
    running the tilt's pass."""
    fused: FusedObjective | None = None
    """The objective with its gradient formed by hand (:mod:`bind_core.influence.fused`), for a two-layer GCN or SAGE
    on its computation graph; ``None``: autograd's (:func:`~bind_core.influence.proximal.proximal_objective`)."""
    test_view: Callable[[Reduction], GraphInputs] | None = None
    """A GAT's inputs of ``G − S`` where Γ reads the test rows: each layer only the edges into the rows the next one
    reads (:meth:`GraphReducer.attention_rows`); ``None``: the reduced graph's own."""

    @classmethod
    def build(
        cls,
        fm: FunctionalModel,
        *,
        rule: float = DAMPING_RULE,
        rtol: float = 1e-9,
        steps: int = STEPS,
        tol: float = 1e-7,
        operator: str = "auto",
        progress: Callable[[float], None] | None = None,
        threads: int = 1,
    ) -> Stepper:
        """The stepper of ``fm`` at its weights: the damped curvature (``rule``, ``rtol``, ``operator``:
        :meth:`DampedCurvature.build`, reporting ``progress``), then the baseline every deletion is measured
        against. ``steps`` and ``tol`` bound each deletion's chord steps; ``threads``: CPU threads forming the dense
        curvature's rows (:func:`~bind_core.training.hessian.dense_hessian_by_rows`)."""
        if steps < 1:
            raise ConfigError(f"steps: {steps!r} must be >= 1")
        choose_operator(operator, fm.num_parameters)  # a bad operator fails before the curvature's minutes
        curvature = DampedCurvature.build(
            fm, rule=rule, rtol=rtol, operator=operator, progress=progress, threads=threads
        )
        g, theta = fm.graph, fm.theta
        full = full_inputs(fm)
        train, test = g.train_idx.to(fm.device), g.test_idx.to(fm.device)
        wanted = torch.cat([train, test])  # training rows first: the last layer computes these only
        with torch.no_grad():
            base_proba = probabilities(fm.logits(theta, wanted, full)[train.numel() :])
        gammas = GammaEvaluator(g, fm.groups, fm.device)
        # The training objective is evaluated where it lives: the training nodes' computation graph when that is a
        # small part of the graph (each deletion's training rows then cost what they read), else the whole graph.
        rows = fm.objective_rows()
        reducer = GraphReducer(fm, rows=test if rows.nodes is not None else wanted)
        view = None if rows.nodes is None else reducer.restrict(rows.nodes, rows.train)
        base_first, first = _first_layer_at_hat(fm, full, rows.nodes)
        fused = None if view is None else FusedObjective.of(fm, first, rows.inputs, rows.train, base_first)
        return cls(
            fm,
            curvature,
            steps,
            tol,
            full,
            wanted,
            test,
            base_proba,
            gammas,
            gammas(base_proba).detach(),
            _gamma_gradients(fm, theta, full),
            torch.func.grad(fm.bregman)(theta).detach(),
            g.y.to(fm.device),
            reducer,
            view,
            rows.train,
            base_first,
            first,
            _tilt_at(fm, theta),
            fused,
            reducer.attention_rows(test) if view is not None and fm.module.config.arch == "gat" else None,
        )

    @property
    def m(self) -> int:
        """The number of training nodes."""
        return int(self.fm.graph.train_idx.numel())

    @property
    def train(self) -> Tensor:
        return self.wanted[: self.m]

    @property
    def mixes(self) -> bool:
        """Whether the chord steps are Anderson-mixed (:mod:`bind_core.influence.anderson`): for a smooth model. On a
        model with kinks (:meth:`~bind_core.models.gnn.ModelConfig.kinks`) the gradient jumps across them, the past
        steps say nothing about the next one, and the steps stop where they stall instead (:data:`STALL_HALVINGS`)."""
        return not self.fm.module.config.kinks()

    @property
    def mu(self) -> float:
        """The damping ``μ``."""
        return self.curvature.mu

    @property
    def solve(self) -> SolveInfo:
        """How the damped curvature was made (its details gain each deletion batch's figures)."""
        return self.curvature.solve

    @property
    def lowrank(self) -> DampedInverse | None:
        return self.curvature.lowrank

    def fork(self) -> Stepper:
        """A copy that settles deletions on another thread beside this one (:mod:`bind_core.influence.threads`): its own
        model copy (:meth:`FunctionalModel.fork`) and first-layer memory; the curvature, the reducer and the baseline
        are shared, read only. Its deletions equal this one's exactly."""
        fm = self.fm.fork()
        first = None if self.first is None else self.first.fork(SplitModel(fm))
        return replace(self, fm=fm, first=first)

    def solve_damped(self, vec: Tensor) -> Tensor:
        """``(H + μI)⁻¹·vec`` (:meth:`DampedCurvature.apply`)."""
        return self.curvature.apply(vec)

    def solve_damped_exactly(self, vec: Tensor) -> Tensor:
        """``(H + μI)⁻¹·vec`` to rounding (:meth:`DampedCurvature.apply_exactly`)."""
        return self.curvature.apply_exactly(vec)

    def delete(self, positions: list[int]) -> Deletion:
        """Settle the deletion of the training nodes at ``positions`` together (see
        :func:`~bind_core.influence.step_nodes.step_estimate`)."""
        nodes = self.fm.graph.train_idx[torch.tensor(positions, dtype=torch.long)]
        gone = torch.zeros(self.m, dtype=torch.bool)
        gone[torch.tensor(positions, dtype=torch.long)] = True
        reduction = self.reducer.reduce(nodes)
        part = None if self.view is None else self.view(reduction)
        reduced = reduction.inputs if self.test_view is None else self.test_view(reduction)
        return self._settle(reduced, gone, part, changed=reduction.changed)

    def delete_edges(self, edges: Tensor) -> Deletion:
        """Settle the deletion of the undirected ``edges`` (``[k, 2]``, both directions go) together: no loss is
        removed; the training nodes within ``hops − 1`` of an endpoint (one hop less than for a deleted node: the
        endpoints stay) have their losses changed. The edges the audit settles are the most extreme by their
        first-order value, whose first step can overshoot far (a move in Γ of ~1 where the answer is ~0.04); where
        the chord steps stall there, the L-BFGS finish takes over, as for a node."""
        fm, g = self.fm, self.fm.graph
        pairs = torch.as_tensor(edges, dtype=torch.long).reshape(-1, 2)
        reduced = fm.module.prepare(g.without_edges(pairs), fm.theta.dtype, fm.device)
        return self._settle(reduced, torch.zeros(self.m, dtype=torch.bool))

    def _settle(
        self,
        reduced: GraphInputs,
        gone: Tensor,
        part: GraphInputs | None = None,
        *,
        changed: Tensor | None = None,
    ) -> Deletion:
        """Damped steps towards the proximal optimum on the reduced graph (``reduced``: its inputs in the full
        graph's numbering; ``part``: those of its training nodes' computation graph, where the objective is
        evaluated when given), the training positions ``gone`` (a mask) deleted with their losses, every other one
        kept with its loss on the reduced graph; Γ exactly at the weights reached. A deletion whose chord steps stop
        above ``tol`` is finished by L-BFGS on the same objective (:meth:`_finish`): for a smooth model to its
        minimum, for a model with kinks (not :attr:`mixes`), whose minimum lies where no gradient vanishes, to the
        lowest objective it finds; where the finish leaves ``θ̂``'s reach the deletion has no minimum near it
        (:attr:`Deletion.far`). ``changed``: the rows whose aggregated features the deletion changed
        (:meth:`GraphReducer.reduce`), when known."""
        fm, m = self.fm, self.m
        objective = self._objective(reduced, ~gone.to(fm.device), part, changed)
        # F at θ̂ on G − S: F(θ) = B(θ) − c_S(θ)/m + (μ/2)·‖θ − θ̂‖² + const, so its gradient at θ̂ gives ∇c_S(θ̂)
        # without a backward pass through the full graph's losses (∇B(θ̂) = 0).
        value, grad_f, proba = objective(fm.theta)
        unchanged = proba if proba is not None else self._proba_at_hat(reduced, changed)  # the direct term
        grad_c = (self.grad_objective - grad_f) * m
        first_step = self.solve_damped(grad_c) / m
        at, grad_f, moved, taken = self._chord_steps(objective, value, grad_f, unchanged)
        residual, finished, far = float(grad_f.abs().max()), 0, None
        if residual > self.tol:  # L-BFGS finishes what the chord steps left
            found = self._finish(objective, at)
            finished, far = found.evaluations, found.far
            # its best point: by the gradient where the model is smooth, by the objective where it has kinks (its
            # first evaluation is the chord's end point, so never worse); where it left θ̂'s reach the end point stays
            if far is None and (found.largest < residual if self.mixes else found.evaluations > 0):
                at, residual, moved = found.weights, found.largest, None
        with torch.no_grad():
            direct = self.gammas(unchanged) - self.base_gamma
            if far is not None:  # no value answers it: Γ at the weights reached is not read
                delta = torch.full_like(direct, float("nan"))
            else:
                moved = self._test_proba(at, reduced) if moved is None else moved  # Γ at the weights reached
                delta = self.gammas(moved) - self.base_gamma
            return Deletion(
                delta=delta.cpu(),
                direct=direct.detach().cpu(),
                first_order=(self.grad_gamma @ first_step).cpu(),
                first_step=first_step.detach().cpu(),
                weights=at.detach().cpu(),
                taken=taken,
                residual=residual,
                finished=finished,
                far=far,
            )

    def _finish(self, objective: Callable[[Tensor], Evaluation], at: Tensor) -> Found:
        """L-BFGS on the proximal ``objective`` from ``at``, where the chord steps stopped short, in the damped
        curvature's coordinates (:func:`~bind_core.influence.lbfgs.minimise`, :data:`FINISH_EVALUATIONS` at most),
        its best point by the gradient for a smooth model and by the objective for one with kinks; its ``far`` says
        the objective has no minimum near ``θ̂``."""

        def evaluate(weights: Tensor) -> tuple[Tensor, Tensor]:
            value, grad, _ = objective(weights)
            return torch.tensor(value, dtype=weights.dtype), grad

        coordinates = self.curvature.coordinates()
        return minimise(
            evaluate,
            at.detach(),
            coordinates,
            anchor=self.fm.theta,
            tol=self.tol,
            max_iter=FINISH_EVALUATIONS,
            budget=FINISH_EVALUATIONS,
            by_value=not self.mixes,
            patience=FINISH_PATIENCE,
        )

    def _objective(
        self, reduced: GraphInputs, rest: Tensor, part: GraphInputs | None, changed: Tensor | None
    ) -> Callable[[Tensor], Evaluation]:
        """The proximal objective of :meth:`_settle`'s deletion (its arguments), the training positions ``rest`` kept:
        on the computation graph with the first layer reused and the tilt sharing it where that is known."""
        fm, y = self.fm, self.y
        # On the whole graph the test rows come in the same pass as the training rows; on the computation graph
        # they are evaluated apart, only where Γ is read (at θ̂ and at the weights reached).
        inputs, rows = (reduced, self.wanted) if part is None else (part, self.train_rows)
        first, at_changed = None, None
        if part is not None and changed is not None and self.first is not None:
            first, at_changed = self.first, self.first.changed_positions(changed)
        if first is not None and at_changed is not None and part is not None and self.fused is not None:
            return self.fused.objective(first, part, rows, rest, y[self.train], self.mu, at_changed)
        graph = None if first is None else fm.objective_rows().inputs  # the tilt shares the first layer there
        touched = None
        if graph is not None and at_changed is not None and graph.adjacency is not None:
            touched = touched_rows(graph, rows, at_changed, len(fm.module.convs))  # the tilt's pass: only these
        kept = y[self.train[rest]]
        return proximal_objective(
            fm,
            inputs,
            rows,
            rest,
            kept,
            self.m,
            self.mu,
            first=first,
            changed=at_changed,
            tilt=fm.tilt,
            graph=graph,
            tilt_hat=self.tilt_hat,
            touched=touched,
        )

    def _chord_steps(
        self, objective: Callable[[Tensor], Evaluation], value: float, grad_f: Tensor, moved: Tensor | None
    ) -> tuple[Tensor, Tensor, Tensor | None, int]:
        """Chord steps from ``θ̂`` (where ``objective`` is ``value`` with gradient ``grad_f``): the frozen damped inverse
        on the exact gradient (Anderson-mixed with the last steps where :attr:`mixes`), each step halved until ``F``
        decreases enough, until the gradient's largest entry is at most ``tol``, after ``steps``, or once they stall
        (:data:`STALL_HALVINGS`). Returns the weights reached, the gradient there, the test probabilities there
        (``moved`` until a step is taken; ``None`` where the objective did not give them) and the steps taken."""
        at, taken, stalled = self.fm.theta, 0, False
        mixing = Mixing.of(1, at.numel(), at) if self.mixes else None
        only = torch.zeros(1, dtype=torch.long, device=at.device)
        while not stalled and taken < self.steps and float(grad_f.abs().max()) > self.tol:
            direction = self.solve_damped(grad_f)  # the frozen damped inverse on the exact gradient
            if mixing is None:
                slope = float(grad_f @ direction)  # > 0: −direction descends F ((H + μI)⁻¹ is positive definite)
            else:
                mixed, slopes = mixing.step(only, at.unsqueeze(0), direction.unsqueeze(0), grad_f.unsqueeze(0))
                direction, slope = mixed[0], float(slopes[0])  # > 0 too (Mixing.step)
            for halvings in range(HALVINGS):  # noqa: B007 (read below) a frozen Hessian may overshoot: halve (Armijo)
                candidate = at - direction
                value_new, grad_new, proba_new = objective(candidate)
                if value_new <= value - 1e-4 * slope:
                    break
                direction, slope = 0.5 * direction, 0.5 * slope
            else:
                break  # no progress along the chord direction: keep the best point reached
            at, value, grad_f, moved = candidate, value_new, grad_new, proba_new
            taken += 1
            stalled = halvings >= STALL_HALVINGS and _short(direction, at - self.fm.theta)
        return at, grad_f, moved, taken

    def _proba_at_hat(self, reduced: GraphInputs, changed: Tensor | None) -> Tensor:
        """The test nodes' probabilities at ``θ̂`` on the reduced graph, from the full graph's first layer with the
        ``changed`` rows recomputed where that is known (the same values as :meth:`_test_proba`, to rounding)."""
        if self.base_first is None or changed is None or reduced.x_prop is None:
            return self._test_proba(self.fm.theta, reduced)
        logits = None if self.fused is None else self.fused.test_logits_at_hat(reduced, changed, self.test)
        if logits is not None:
            return probabilities(logits)
        module = self.fm.module
        with torch.no_grad():
            h = self.base_first.clone()
            h[changed] = module.activate(0, module.first_layer(reduced.x_prop[changed]))
            return probabilities(module.forward_after_first(h, reduced, self.test))

    def _test_proba(self, at: Tensor, reduced: GraphInputs) -> Tensor:
        """The test nodes' probabilities at ``at`` on the reduced graph (no gradient: Γ only reads them), with the
        computation graph's first-layer rows from the last evaluation where it was at ``at``."""
        with torch.no_grad():
            if self.fused is not None and self.first is not None:
                logits = self.fused.test_logits(at, self.first, reduced, self.test)
                if logits is not None:
                    return probabilities(logits)
            h = None if self.first is None or reduced.x_prop is None else self.first.full_rows(at, reduced.x_prop)
            if h is not None and self.first is not None:
                return probabilities(self.first.split.logits(at, h, reduced, self.test))
            return probabilities(self.fm.logits(at, self.test, reduced))


def _short(step: Tensor, move: Tensor) -> bool:
    """Whether ``step`` moved the weights by at most :data:`STALL_SHARE` of their distance ``move`` from ``θ̂``."""
    return float(step.norm()) <= STALL_SHARE * float(move.norm())


def _first_layer_at_hat(
    fm: FunctionalModel, full: GraphInputs, nodes: Tensor | None
) -> tuple[Tensor | None, FirstLayerCache | None]:
    """On the computation graph (``nodes``), Γ's direct term needs the test rows at ``θ̂`` on ``G − S`` apart. The
    first layer's output there is the full graph's except at the rows whose aggregated features ``S`` changes: kept
    (activated), it spares a pass over every row; and the view's first layer at ``θ̂``, reused. ``(None, None)`` for
    one-layer models, without a computation graph, when the module's weights are not ``θ̂``, or where the
    activation between layers is not elementwise (a layer normalisation: the kept rows' linearisation
    ``H₀ + D₀ ⊙ (P − P₀)`` holds only for a diagonal derivative)."""
    module, z = fm.module, full.x_prop
    if nodes is None or z is None or len(module.convs) < 2 or not module.elementwise_between_layers:
        return None, None
    if not torch.equal(flat_parameters(module)[2], fm.theta):
        return None, None
    with torch.no_grad():
        base_first = module.activate(0, module.first_layer(z))
    return base_first, FirstLayerCache(SplitModel(fm), z, nodes)


def _tilt_at(fm: FunctionalModel, theta: Tensor) -> tuple[Tensor, Tensor]:
    """``(r(θ), ∇r(θ))``: the Bregman tilt (:meth:`FunctionalModel.tilt`) and its gradient at ``theta``."""
    probe = theta.detach().clone().requires_grad_(True)
    value = fm.tilt(probe)
    (grad,) = torch.autograd.grad(value, probe)
    return value.detach(), grad.detach()


def _gamma_gradients(fm: FunctionalModel, theta: Tensor, inputs: GraphInputs) -> Tensor:
    """``[∇Γ_SP, ∇Γ_EO]`` at ``theta`` by reverse-mode autograd, ``[2, p]``."""
    probe = theta.detach().clone().requires_grad_(True)
    test = fm.graph.test_idx.to(fm.device)
    values = gammas_from_proba(probabilities(fm.logits(probe, test, inputs)), fm.graph, fm.groups)
    rows = [torch.autograd.grad(values[i], probe, retain_graph=i == 0)[0] for i in range(2)]
    return torch.stack(rows).detach()
