"""The L-BFGS finish of a smooth model's deletions that the chord steps leave short (:meth:`Stepper._finish`, in the
damped curvature's coordinates): it brings them to the proximal optimum itself, leaves the settled ones alone, and
tells a deletion whose objective has no minimum near the given weights from one that merely ran out of steps."""

from __future__ import annotations

import pytest
import torch
from proximal_truths import proximal_truth

from bind_core.data.datasets import synthetic
from bind_core.errors import NonFiniteError
from bind_core.influence import step
from bind_core.influence.functional import FunctionalModel
from bind_core.influence.proximal import FAR
from bind_core.influence.step import Deletion, Stepper
from bind_core.influence.step_nodes import step_estimate
from bind_core.models.gnn import ModelConfig
from bind_core.training.fit import TrainConfig, train


@pytest.mark.heavy  # ~10 s here
def test_the_finish_takes_what_the_chord_steps_leave_to_the_proximal_optimum(monkeypatch: pytest.MonkeyPatch) -> None:
    graph = synthetic(300, seed=3)
    model = train(graph, TrainConfig(epochs=300, polish=False), ModelConfig(arch="gcn", layers=2))
    fm = FunctionalModel.from_trained(model, graph)
    stepper = Stepper.build(fm)
    assert stepper.mixes  # a smooth model: its deletions are finished
    finished = [stepper.delete([p]) for p in range(40)]
    monkeypatch.setattr(step, "FINISH_EVALUATIONS", 0)
    chord = [stepper.delete([p]) for p in range(40)]
    short = [p for p, d in enumerate(chord) if d.residual > stepper.tol]
    assert len(short) >= 5  # measured: 9 of 40 ran out of their 20 steps
    for p, (a, b) in enumerate(zip(finished, chord, strict=True)):
        if p not in short:  # settled by the chord steps: the finish does not run, the values are the same
            assert a.finished == 0 and torch.equal(a.delta, b.delta)
    assert all(finished[p].finished > 0 and finished[p].far is None for p in short)
    assert sum(finished[p].residual <= stepper.tol for p in short) >= len(short) - 1  # measured: 8 of 9
    scale = max(float(d.delta.abs().max()) for d in finished)
    for p in short[:2]:
        truth = proximal_truth(model, fm, stepper, p)
        assert float((finished[p].delta - truth).abs().max()) <= 1e-4 * scale
        assert float((chord[p].delta - truth).abs().max()) > float((finished[p].delta - truth).abs().max())


@pytest.mark.heavy  # ~10 s here
def test_a_deletion_without_a_minimum_near_the_weights_says_so() -> None:
    # 20 Adam epochs leave a two-layer GCN near its initialisation: its deletions' own losses outgrow the damping and
    # the proximal objective decreases without bound (tests/core/debiasing/test_no_minimum_near.py)
    graph = synthetic(100, seed=1, train_per_class=15)
    model = train(graph, TrainConfig(epochs=20), ModelConfig(layers=2, hidden=4))
    fm = FunctionalModel.from_trained(model, graph)
    stepper = Stepper.build(fm)
    reach = FAR * max(1.0, float(fm.theta.norm()))
    deletions: list[Deletion] = [stepper.delete([p]) for p in range(4)]
    for p, d in enumerate(deletions):
        assert d.far is not None and "from the given ones" in d.far
        assert d.residual > stepper.tol and d.finished > 0
        # the weights stay where the chord steps stopped, within reach, not where the finish left for
        assert float((d.weights.double() - fm.theta.cpu()).norm()) <= reach
        with pytest.raises(NonFiniteError, match="no minimum near them"):  # the self-check's truth agrees
            proximal_truth(model, fm, stepper, p)
    details = step_estimate(fm).solve.details
    assert details["no_minimum"] >= 25 and details["unsettled"] >= details["no_minimum"]  # measured: 30 of 30
    assert details["stalled"] + details["no_minimum"] <= details["unsettled"]
